# oto merge's fetch step (oto.fleet.remote): bring every bundle stored under config["source"], a storage URL
# such as s3://bucket/night1, into bundles/ of the working directory. The storage plugin that serves the URL
# (snakemake-storage-plugin-s3 for s3://; settings from --storage-s3-* or SNAKEMAKE_STORAGE_S3_*) retrieves
# the folder as a whole; the rule keeps the bundles. It reruns when the folder changes (a new upload).

SOURCE = config["source"].rstrip("/")


rule all:
    default_target: True
    input:
        "bundles",


rule fetch:
    input:
        storage(SOURCE),
    output:
        directory("bundles"),
    log:
        "logs/fetch.log",
    conda:
        "../../envs/oto.yaml"
    shell:
        "mkdir -p {output:q} && find {input:q} -type f -name '*.oto.tar.gz' -exec cp {{}} {output:q}/ ';' 2> {log:q}"

# oto merge's fetch step (oto.fleet.remote): copy every bundle under config["source"], a storage URL such as
# s3://bucket/prefix, into bundles/ of the working directory, through the Snakemake storage plugin that
# serves the URL (snakemake-storage-plugin-s3 for s3://; its settings come from --storage-s3-* or the
# SNAKEMAKE_STORAGE_S3_* variables). Bundles already fetched are not fetched again.

SOURCE = config["source"].rstrip("/")
SUFFIX = ".oto.tar.gz"
NAMES = glob_wildcards(storage(SOURCE + "/{name}" + SUFFIX)).name


wildcard_constraints:
    name=r"[A-Za-z0-9._-]+",


rule all:
    default_target: True
    input:
        expand("bundles/{name}" + SUFFIX, name=sorted(set(n for n in NAMES if "/" not in n))),


rule fetch:
    input:
        storage(SOURCE + "/{name}" + SUFFIX),
    output:
        "bundles/{name}" + SUFFIX,
    log:
        "logs/fetch/{name}.log",
    shell:
        "cp {input:q} {output:q} 2> {log:q}"

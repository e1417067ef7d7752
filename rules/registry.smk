# Experiment registry: merge every generation's per-job registry.jsonl into the persistent SQLite store
# results/<arch>/registry/registry.sqlite (deliberately not a declared output: it outlives runs and later
# runs read it as optional knowledge). The declared output is the merge summary.
rule registry:
    input:
        expand(
            "results/{{arch}}/{library}/gen{gen}/registry.jsonl",
            library=LIBRARIES,
            gen=range(MAXGEN),
        ),
    output:
        "results/{arch}/registry/consolidated.yaml",
    log:
        "results/{arch}/logs/registry.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        results=f"results/{ARCH}",
    script:
        "../scripts/registry.py"

rule ceilings:
    input:
        profile=PROFILE,
    output:
        "results/{arch}/ceilings.yaml",
    log:
        "results/{arch}/logs/ceilings.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/ceilings.py"

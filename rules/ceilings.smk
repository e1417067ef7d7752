rule ceilings:
    input:
        profile="arch_profiles/{arch}.yaml",
    output:
        "results/{arch}/ceilings.yaml",
    log:
        "results/{arch}/logs/ceilings.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/ceilings.py"

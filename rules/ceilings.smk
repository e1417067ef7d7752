rule ceilings:
    input:
        profile=ancient(PROFILE),
    output:
        "results/{arch}/ceilings.yaml",
    params:
        profile=profile_view("ceilings"),
    log:
        "results/{arch}/logs/ceilings.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/ceilings.py"

rule ceilings:
    input:
        profile=ancient(PROFILE),
    output:
        "results/{arch}/ceilings.yaml",
    log:
        "results/{arch}/logs/ceilings.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        profile=profile_view("ceilings"),
    script:
        "../scripts/ceilings.py"

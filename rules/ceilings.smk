rule ceilings:
    input:
        profile=ancient(PROFILE),
    output:
        "results/{arch}/ceilings.yaml",
    log:
        "results/{arch}/logs/ceilings.log",
    # First: the live page's rooflines and the digests it caches for the report and dashboard need it.
    priority: 50
    conda:
        "../workflow/envs/oto.yaml"
    params:
        profile=profile_view("ceilings"),
    script:
        "../scripts/ceilings.py"

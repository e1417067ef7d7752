rule normalise:
    input:
        samples="results/{arch}/{library}/gen{gen}/samples.csv",
        candidates="results/{arch}/{library}/gen{gen}/candidates.yaml",
        profile=ancient(PROFILE),
    output:
        "results/{arch}/{library}/gen{gen}/scores.csv",
    log:
        "results/{arch}/logs/{library}/gen{gen}/normalise.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        profile=profile_view("normalise"),
    script:
        "../scripts/normalise.py"

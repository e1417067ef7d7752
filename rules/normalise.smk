rule normalise:
    input:
        samples="results/{arch}/{library}/gen{gen}/samples.csv",
        candidates="results/{arch}/{library}/gen{gen}/candidates.yaml",
        profile=ancient(PROFILE),
    output:
        "results/{arch}/{library}/gen{gen}/scores.csv",
    params:
        profile=profile_view("normalise"),
    log:
        "results/{arch}/logs/{library}/gen{gen}/normalise.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/normalise.py"

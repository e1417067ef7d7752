rule benchmark:
    input:
        candidates="results/{arch}/{library}/gen{gen}/candidates.yaml",
        build="results/{arch}/{library}/gen{gen}/build.yaml",
        deck="results/{arch}/{library}/deck.yaml",
        profile=ancient(PROFILE),
    output:
        "results/{arch}/{library}/gen{gen}/samples.csv",
    params:
        workdir=lambda wc: f"results/{wc.arch}/{wc.library}/gen{wc.gen}/work",
        profile=profile_view("benchmark"),
    resources:
        gpu=1,
    priority: 10
    log:
        "results/{arch}/logs/{library}/gen{gen}/benchmark.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/benchmark.py"

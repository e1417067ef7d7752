rule benchmark:
    input:
        candidates="results/{arch}/{library}/gen{gen}/candidates.yaml",
        build="results/{arch}/{library}/gen{gen}/build.yaml",
        deck="results/{arch}/{library}/deck.yaml",
        profile=ancient(PROFILE),
    output:
        "results/{arch}/{library}/gen{gen}/samples.csv",
    log:
        "results/{arch}/logs/{library}/gen{gen}/benchmark.log",
    priority: 10
    conda:
        "../workflow/envs/oto.yaml"
    resources:
        gpu=1,
    params:
        results=f"results/{ARCH}",
        workdir=lambda wc: f"results/{wc.arch}/{wc.library}/gen{wc.gen}/work",
        profile=profile_view("benchmark"),
    script:
        "../scripts/benchmark.py"

# Compiles may run in parallel; only benchmarks hold the GPU.
rule compile:
    input:
        candidates="results/{arch}/{library}/gen{gen}/candidates.yaml",
        deck="results/{arch}/{library}/deck.yaml",
        profile=ancient(PROFILE),
    output:
        "results/{arch}/{library}/gen{gen}/build.yaml",
    log:
        "results/{arch}/logs/{library}/gen{gen}/compile.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        workdir=lambda wc: f"results/{wc.arch}/{wc.library}/gen{wc.gen}/work",
        profile=profile_view("compile"),
    script:
        "../scripts/compile.py"

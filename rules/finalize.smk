# Every deck size of the library measured against its shipped solution, with the tuned finalists.
rule finalize:
    input:
        selection=last_selection,
        deck="results/{arch}/{library}/deck.yaml",
        profile=ancient(PROFILE),
    output:
        final="results/{arch}/{library}/final.yaml",
        samples="results/{arch}/{library}/final_samples.csv",
    log:
        "results/{arch}/logs/{library}/finalize.log",
    priority: 10
    conda:
        "../workflow/envs/oto.yaml"
    resources:
        gpu=1,
    params:
        results=f"results/{ARCH}",
        workdir=lambda wc: f"results/{wc.arch}/{wc.library}/final_work",
        profile=profile_view("finalize"),
    script:
        "../scripts/finalize.py"

# Every deck size of the library measured against its shipped solution, with the tuned finalists.
rule finalize:
    input:
        selection=last_selection,
        deck="results/{arch}/{library}/deck.yaml",
        profile=ancient(PROFILE),
    output:
        final="results/{arch}/{library}/final.yaml",
        samples="results/{arch}/{library}/final_samples.csv",
    params:
        workdir=lambda wc: f"results/{wc.arch}/{wc.library}/final_work",
        profile=profile_view("finalize"),
    resources:
        gpu=1,
    priority: 10
    log:
        "results/{arch}/logs/{library}/finalize.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/finalize.py"

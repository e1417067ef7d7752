# rocBLAS's own clients on the tuned library, through the client the backend declares (rocblas_client):
# verify (one job per library, so a library's logic needs only its own) before the logic files are written (a kernel the client finds wrong leaves the package), compare
# after them (the A/B the report and the dashboard show). Without a client each writes why it was skipped.
rule verify:
    input:
        finals=["results/{arch}/{library}/final.yaml"],
        samples=["results/{arch}/{library}/final_samples.csv"],
        decks=["results/{arch}/{library}/deck.yaml"],
        profile=ancient(PROFILE),
    output:
        "results/{arch}/{library}/verify.yaml",
    log:
        "results/{arch}/logs/{library}/verify.log",
    conda:
        "../workflow/envs/oto.yaml"
    resources:
        gpu=1,
    params:
        label=lookup(dpath="package/label", within=config),
        workdir=lambda wc: f"results/{wc.arch}/{wc.library}/verify_work",
        profile=profile_view("verify"),
    script:
        "../scripts/verify.py"


rule compare:
    input:
        finals=expand("results/{{arch}}/{library}/final.yaml", library=LIBRARIES),
        decks=expand("results/{{arch}}/{library}/deck.yaml", library=LIBRARIES),
        logic=[logic_path(lib) for lib in LIBRARIES],
        verify=expand("results/{{arch}}/{library}/verify.yaml", library=LIBRARIES),
        profile=ancient(PROFILE),
    output:
        "results/{arch}/compare/compare.yaml",
        samples="results/{arch}/compare/samples.csv",
    log:
        "results/{arch}/logs/compare.log",
    conda:
        "../workflow/envs/oto.yaml"
    resources:
        gpu=1,
    params:
        label=lookup(dpath="package/label", within=config),
        workdir=lambda wc: f"results/{wc.arch}/compare/work",
        profile=profile_view("compare"),
    script:
        "../scripts/compare.py"

# rocBLAS's own clients on the tuned library, through the client the backend declares (rocblas_client):
# verify before the logic files are written (a kernel the client finds wrong leaves the package), compare
# after them (the A/B the report and the dashboard show). Without a client each writes why it was skipped.
rule verify:
    input:
        finals=expand("results/{{arch}}/{library}/final.yaml", library=LIBRARIES),
        samples=expand("results/{{arch}}/{library}/final_samples.csv", library=LIBRARIES),
        decks=expand("results/{{arch}}/{library}/deck.yaml", library=LIBRARIES),
        profile=ancient(PROFILE),
    output:
        "results/{arch}/verify/verify.yaml",
    log:
        "results/{arch}/logs/verify.log",
    conda:
        "../workflow/envs/oto.yaml"
    resources:
        gpu=1,
    params:
        label=lookup(dpath="package/label", within=config),
        workdir=lambda wc: f"results/{wc.arch}/verify/work",
        profile=profile_view("verify"),
    script:
        "../scripts/verify.py"


rule compare:
    input:
        finals=expand("results/{{arch}}/{library}/final.yaml", library=LIBRARIES),
        decks=expand("results/{{arch}}/{library}/deck.yaml", library=LIBRARIES),
        logic=[logic_path(lib) for lib in LIBRARIES],
        verify="results/{arch}/verify/verify.yaml",
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

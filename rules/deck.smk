# One deck job per library, reading only that library's files with the deck settings as params: selecting
# more or fewer libraries (families, patterns) leaves every other library's deck, and so its tuning, alone.
rule deck:
    input:
        unpack(deck_inputs),
    output:
        deck="results/{arch}/{library}/deck.yaml",
        # the shipped kernels' legality under this arch's limits: later jobs of the library start from it
        legality="results/{arch}/{library}/legality.json",
    log:
        "results/{arch}/logs/{library}/deck.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        deck=PLAN.deck,
        profile=profile_view("deck"),
    script:
        "../scripts/deck.py"


# results/<arch>/deck.yaml: every library the deliverables cover (this run's and those earlier runs finished)
rule coverage:
    input:
        slices=expand("results/{{arch}}/{library}/deck.yaml", library=PLAN.delivered),
        # a library of this run's deck: the file names its source
        current=f"results/{{arch}}/{LIBRARIES[0]}/deck.yaml",
    output:
        "results/{arch}/deck.yaml",
    log:
        "results/{arch}/logs/coverage.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        results=f"results/{ARCH}",
        deck=PLAN.deck,
    script:
        "../scripts/coverage.py"

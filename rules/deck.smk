rule deck:
    input:
        PLAN.deck_inputs,
    output:
        deck="results/{arch}/deck.yaml",
        slices=expand("results/{{arch}}/{library}/deck.yaml", library=LIBRARIES),
    params:
        kind=PLAN.deck_kind,
        libraries=LIBRARIES,
    log:
        "results/{arch}/logs/deck.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/deck.py"

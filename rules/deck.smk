rule deck:
    input:
        PLAN.deck_inputs,
    output:
        deck="results/{arch}/deck.yaml",
        slices=expand("results/{{arch}}/{library}/deck.yaml", library=LIBRARIES),
    log:
        "results/{arch}/logs/deck.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        results=f"results/{ARCH}",
        deck=PLAN.deck,
        libraries=LIBRARIES,
    script:
        "../scripts/deck.py"

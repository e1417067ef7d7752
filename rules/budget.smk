# The time budget (config budget): after every generation, one job decides for every library who runs the
# next generation and who is starved (oto.measurement.budget), so each mutate job reads one small file.
# The library list and the budget are params: another selection or budget decides again.


rule budget:
    input:
        unpack(budget_inputs),
    output:
        "results/{arch}/budget/gen{gen}.yaml",
    log:
        "results/{arch}/logs/budget/gen{gen}.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        hours=config["budget"]["hours"] if config["budget"] else None,
        sweep=config["budget"]["sweep"] if config["budget"] else None,
        max_generations=MAXGEN,
        libraries=LIBRARIES,
    script:
        "../scripts/budget.py"

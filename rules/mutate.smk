# The proposal step. gen0 is seeded from the shipped solutions; later generations read the previous
# selection. The agent rule writes the same proposals.yaml contract.
rule mutate:
    input:
        unpack(mutate_inputs),
    output:
        "results/{arch}/{library}/gen{gen}/proposals.yaml",
    params:
        strategy=lookup(dpath="search/strategy", within=config),
    log:
        "results/{arch}/logs/{library}/gen{gen}/mutate.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/mutate.py"

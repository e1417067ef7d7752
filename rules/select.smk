rule select:
    input:
        unpack(select_inputs),
    output:
        "results/{arch}/{library}/gen{gen}/selection.yaml",
        registry="results/{arch}/{library}/gen{gen}/registry.jsonl",
    params:
        profile=profile_view("select"),
    log:
        "results/{arch}/logs/{library}/gen{gen}/select.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/select_kernels.py"

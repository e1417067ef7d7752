rule select:
    input:
        unpack(select_inputs),
    output:
        "results/{arch}/{library}/gen{gen}/selection.yaml",
        registry="results/{arch}/{library}/gen{gen}/registry.jsonl",
    log:
        "results/{arch}/logs/{library}/gen{gen}/select.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        results=f"results/{ARCH}",
        profile=profile_view("select"),
    script:
        "../scripts/select_kernels.py"

rule select:
    input:
        unpack(select_inputs),
    output:
        "results/{arch}/{library}/gen{gen}/selection.yaml",
    log:
        "results/{arch}/logs/{library}/gen{gen}/select.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/select_kernels.py"

rule emit:
    input:
        unpack(emit_inputs),
    output:
        candidates="results/{arch}/{library}/gen{gen}/candidates.yaml",
        tensile="results/{arch}/{library}/gen{gen}/tensile_config.yaml",
    params:
        profile=profile_view("emit"),
    log:
        "results/{arch}/logs/{library}/gen{gen}/emit.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/emit.py"

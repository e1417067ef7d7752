rule emit:
    input:
        unpack(emit_inputs),
    output:
        candidates="results/{arch}/{library}/gen{gen}/candidates.yaml",
        tensile="results/{arch}/{library}/gen{gen}/tensile_config.yaml",
    log:
        "results/{arch}/logs/{library}/gen{gen}/emit.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        results=f"results/{ARCH}",
        profile=profile_view("emit"),
    script:
        "../scripts/emit.py"

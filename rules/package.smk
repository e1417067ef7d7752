rule logic:
    input:
        final="results/{arch}/{library}/final.yaml",
        deck="results/{arch}/{library}/deck.yaml",
        verify="results/{arch}/{library}/verify.yaml",
        profile=ancient(PROFILE),
    output:
        "results/{arch}/logic/{prefix}_{library}.yaml",
        # where its numbers came from; JSON, which TensileCreateLibrary never reads (oto.tensile.provenance)
        provenance="results/{arch}/logic/{prefix}_{library}.provenance.json",
    log:
        "results/{arch}/logs/{library}/logic_{prefix}.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        label=lookup(dpath="package/label", within=config),
        profile=profile_view("logic"),
    script:
        "../scripts/logic.py"


# One family, all of its selected contraction patterns: results/<arch>/family/<FAMILY>.yaml
rule family:
    input:
        unpack(family_inputs),
    output:
        "results/{arch}/family/{family}.yaml",
    log:
        "results/{arch}/logs/family_{family}.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/family.py"


rule report:
    input:
        finals=expand("results/{{arch}}/{library}/final.yaml", library=PLAN.delivered),
        ceilings="results/{arch}/ceilings.yaml",
        deck="results/{arch}/deck.yaml",
        verify=expand("results/{{arch}}/{library}/verify.yaml", library=LIBRARIES),
        compare="results/{arch}/compare/compare.yaml",
    output:
        md="results/{arch}/acceptance.md",
        html=report(
            "results/{arch}/acceptance.html",
            caption="../workflow/report/acceptance.rst",
            category="Acceptance",
        ),
    log:
        "results/{arch}/logs/report.log",
    conda:
        "../workflow/envs/oto.yaml"
    script:
        "../scripts/report.py"


rule package:
    input:
        # this run's libraries and those earlier runs finished in the folder (nights accumulate)
        logic=[logic_path(lib) for lib in PLAN.delivered],
        provenance=[logic_provenance_path(lib) for lib in PLAN.delivered],
        acceptance="results/{arch}/acceptance.md",
        # The README's one target also leaves the final dashboard and the consolidated experiment registry.
        dashboard="results/{arch}/dashboard/index.html",
        registry="results/{arch}/registry/consolidated.yaml",
        profile=ancient(PROFILE),
    output:
        "results/{arch}/TensileLibrary.dat",
        manifest="results/{arch}/library/manifest.yaml",
    log:
        "results/{arch}/logs/package.log",
    conda:
        "../workflow/envs/oto.yaml"
    params:
        label=lookup(dpath="package/label", within=config),
        profile=profile_view("package"),
    script:
        "../scripts/package.py"

"""Rule package: every library's logic file → TensileLibrary.dat."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import package
from oto.tensile.packaging import PackageSettings

with stage(snakemake) as ctx:
    package.run(
        [Path(p) for p in snakemake.input.logic],
        ctx.profile,
        Path(snakemake.output[0]),
        PackageSettings.from_config(ctx.config),  # its label is params.label's, which re-runs the rule
        manifest=Path(snakemake.output.manifest),
        tensile_cfg=ctx.config["tensile"],
        provenance_paths=[Path(p) for p in snakemake.input.provenance],
    )

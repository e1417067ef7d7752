"""Rule package: every library's logic file → TensileLibrary.dat."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import package

with stage(snakemake) as ctx:
    package.run(
        [Path(p) for p in snakemake.input.logic],
        ctx.profile,
        snakemake.params.label,
        Path(snakemake.output[0]),
        manifest=Path(snakemake.output.manifest),
        tensile_cfg=ctx.config.get("tensile") or {},
        create_library=(ctx.config.get("package") or {}).get("create_library", "auto"),
        provenance_paths=[Path(p) for p in snakemake.input.provenance],
        allow_simulated=bool((ctx.config.get("package") or {}).get("allow_simulated", False)),
    )

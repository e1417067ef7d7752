"""Rule logic: one library's final winners → a rocBLAS/Tensile logic file."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import logic

with stage(snakemake) as ctx:
    logic.run(
        Path(snakemake.input.final),
        Path(snakemake.input.deck),
        ctx.profile,
        snakemake.params.label,
        Path(snakemake.output[0]),
        Path(snakemake.output.provenance),
        Path(snakemake.input.verify),
    )

"""Rule emit: proposals → candidates.yaml and the Tensile benchmark config."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import emit

with stage(snakemake) as ctx:
    emit.run(
        Path(snakemake.input.proposals),
        Path(snakemake.input.deck),
        ctx.profile,
        ctx.config,
        ctx.optional_input(snakemake, "previous"),
        Path(snakemake.params.results),
        Path(snakemake.output.candidates),
        Path(snakemake.output.tensile),
    )

"""Rule finalize: the tuned finalists measured on every deck size of the library."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import finalize

with stage(snakemake) as ctx:
    finalize.run(
        Path(snakemake.input.selection),
        Path(snakemake.input.deck),
        ctx.profile,
        ctx.config,
        Path(snakemake.params.workdir),
        Path(snakemake.params.results),
        Path(snakemake.output.final),
        Path(snakemake.output.samples),
    )

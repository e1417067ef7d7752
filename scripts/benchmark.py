"""Rule benchmark: time candidates and references, interleaved, through the backend."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import benchmark

with stage(snakemake) as ctx:
    benchmark.run(
        Path(snakemake.input.candidates),
        Path(snakemake.input.build),
        Path(snakemake.input.deck),
        ctx.profile,
        ctx.config,
        Path(snakemake.params.workdir),
        Path(snakemake.params.results),
        Path(snakemake.output[0]),
    )

"""Rule compare: the paired, interleaved A/B of the tuned library against the spoof and the upstream path."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import compare

with stage(snakemake) as ctx:
    compare.run(
        [Path(p) for p in snakemake.input.finals],
        [Path(p) for p in snakemake.input.decks],
        [Path(p) for p in snakemake.input.logic],
        [Path(p) for p in snakemake.input.verify],
        ctx.profile,
        ctx.config,
        snakemake.params.label,
        Path(snakemake.output[0]),
        Path(snakemake.output.samples),
        Path(snakemake.params.workdir),
    )

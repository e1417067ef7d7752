"""Rule verify: rocBLAS's own client on every library's deck sizes with the tuned library installed."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import verify

with stage(snakemake) as ctx:
    verify.run(
        [Path(p) for p in snakemake.input.finals],
        [Path(p) for p in snakemake.input.samples],
        [Path(p) for p in snakemake.input.decks],
        ctx.profile,
        ctx.config,
        snakemake.params.label,
        Path(snakemake.output[0]),
        Path(snakemake.params.workdir),
    )

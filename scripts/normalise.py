"""Rule normalise: samples → drift-normalised scores with confidence intervals."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import normalise

with stage(snakemake) as ctx:
    normalise.run(
        Path(snakemake.input.samples),
        Path(snakemake.input.candidates),
        ctx.profile,
        ctx.config,
        Path(snakemake.output[0]),
    )

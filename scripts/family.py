"""Rule family: summary of one family over its contraction patterns."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import family

with stage(snakemake):
    family.run(
        snakemake.wildcards.family,
        [Path(p) for p in snakemake.input.finals],
        [Path(p) for p in snakemake.input.logic],
        Path(snakemake.output[0]),
    )

"""Rule registry: per-job registry files → the consolidated experiment store."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import registry

with stage(snakemake):
    registry.run(
        [Path(f) for f in snakemake.input], Path(snakemake.params.results), Path(snakemake.output[0])
    )

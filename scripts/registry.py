"""Rule registry: per-job registry files → the consolidated experiment store."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto import registry
from oto.smk import stage

with stage(snakemake):
    out = Path(snakemake.output[0])
    registry.consolidate(
        [Path(f) for f in snakemake.input], registry.store_path(out.parents[1]), out_summary=out
    )

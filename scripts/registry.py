"""Rule registry: per-job registry files → the consolidated experiment store."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.registry.store import consolidate, store_path
from oto.run.context import stage

with stage(snakemake):
    out = Path(snakemake.output[0])
    consolidate([Path(f) for f in snakemake.input], store_path(out.parents[1]), out_summary=out)

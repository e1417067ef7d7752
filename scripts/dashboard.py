"""Rule dashboard: the dashboard page, its charts and data.json, from every result file of the run."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.dashboard.writer import write_dashboard
from oto.smk import stage

with stage(snakemake) as ctx:
    write_dashboard(Path(snakemake.input.ceilings).parent, ctx.config, Path(snakemake.output.page).parent)

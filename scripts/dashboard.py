"""Rule dashboard: the final dashboard page, its charts and data.json, from every result file of the run."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.reporting.dashboard import refresh, write_dashboard
from oto.run.context import stage

with stage(snakemake) as ctx:
    results = Path(snakemake.input.ceilings).parent
    write_dashboard(results, ctx.config, Path(snakemake.output.page).parent)
    refresh(results, ctx.config, force=True)  # the live page too says the run finished (best effort)

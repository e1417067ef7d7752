"""Rule dashboard: the final dashboard page, its charts and data.json, from every result file of the run."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.reporting.dashboard import publish_live, write_dashboard
from oto.run.context import stage

with stage(snakemake) as ctx:
    results = Path(snakemake.input.ceilings).parent
    write_dashboard(results, ctx.config, Path(snakemake.output.page).parent)
    publish_live(results, Path(snakemake.output.page).parent)  # the live page says the run finished too

"""Rule dashboard: the final dashboard page, its charts and data.json, from every result file of the run."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import dashboard

with stage(snakemake) as ctx:
    dashboard.run(Path(snakemake.params.results), ctx.config, Path(snakemake.output.page).parent)

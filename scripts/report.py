"""Rule report: the acceptance report, Markdown and its HTML twin."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import report

with stage(snakemake) as ctx:
    report.run(
        [Path(p) for p in snakemake.input.finals],
        Path(snakemake.input.ceilings),
        Path(snakemake.input.deck),
        ctx.profile,
        ctx.config,
        Path(snakemake.output.md),
        Path(snakemake.output.html),
    )

"""Rule coverage: every library's deck slice → results/<arch>/deck.yaml."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.reporting.dashboard import refresh
from oto.run.context import stage
from oto.stages import coverage

with stage(snakemake) as ctx:
    coverage.run(
        list(snakemake.input.slices), snakemake.input.current, snakemake.params.deck, snakemake.output[0]
    )
    # The run has started: the dashboard says it is waiting for first results (best effort).
    refresh(Path(snakemake.params.results), ctx.config)

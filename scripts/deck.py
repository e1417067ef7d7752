"""Rule deck: the shipped library → results/<arch>/deck.yaml and one slice per selected library."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.reporting.dashboard import refresh
from oto.run.context import stage
from oto.stages import deck

with stage(snakemake) as ctx:
    deck.run(
        snakemake.params.deck,
        snakemake.params.libraries,
        snakemake.output.deck,
        list(snakemake.output.slices),
    )
    # The run has started: the dashboard says it is waiting for first results (best effort).
    refresh(Path(snakemake.params.results), ctx.config)

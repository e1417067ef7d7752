"""Rule budget: config budget's decision for one generation, every library's share in one file."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import budget

with stage(snakemake) as ctx:
    budget.run(
        int(snakemake.wildcards.gen),
        float(snakemake.params.hours),
        int(snakemake.params.max_generations),
        [Path(p) for p in snakemake.input.decks],
        [Path(p) for p in snakemake.input.selections],
        [Path(p) for p in snakemake.input.samples],
        Path(snakemake.output[0]),
        sweep=int(snakemake.params.sweep),
        previous=ctx.optional_input(snakemake, "previous"),
    )

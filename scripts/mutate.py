"""Rule mutate: evidence → next generation's proposals (the agent when enabled, then search.strategy)."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import mutate

with stage(snakemake) as ctx:
    mutate.run(
        int(snakemake.wildcards.gen),
        Path(snakemake.input.deck),
        ctx.optional_input(snakemake, "previous"),
        ctx.profile,
        ctx.config,
        Path(snakemake.params.results),
        Path(snakemake.output[0]),
        agent_audit=Path(snakemake.log.agent),
        previous_build=ctx.optional_input(snakemake, "prev_build"),
        previous_candidates=ctx.optional_input(snakemake, "prev_candidates"),
        read_profile=ctx.full_profile,
        budget=ctx.optional_input(snakemake, "budget"),  # config budget, after gen0
        libraries=list(snakemake.params.budget_libraries),
    )

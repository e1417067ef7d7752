"""Rule select: best kernel per tuning size, verdicts against the spoof floor, convergence."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.reporting.dashboard import refresh
from oto.run.context import stage
from oto.stages import select

with stage(snakemake) as ctx:
    select.run(
        Path(snakemake.input.scores),
        Path(snakemake.input.candidates),
        Path(snakemake.input.build),
        ctx.optional_input(snakemake, "previous"),
        ctx.profile,
        ctx.config,
        Path(snakemake.output[0]),
        out_registry=Path(snakemake.output.registry),
    )
    # The live dashboard, one generation behind at most; best effort: never fails the select job.
    refresh(Path(snakemake.params.results), ctx.config)

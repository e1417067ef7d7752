"""Rule compile: build the generation's kernels through the backend."""

from pathlib import Path

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import compile as compile_stage

with stage(snakemake) as ctx:
    compile_stage.run(
        Path(snakemake.input.candidates),
        Path(snakemake.input.deck),
        ctx.profile,
        ctx.config,
        Path(snakemake.params.workdir),
        Path(snakemake.output[0]),
    )

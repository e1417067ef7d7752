"""Rule ceilings: arch profile → theoretical and roofline ceilings."""

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import ceilings

with stage(snakemake) as ctx:
    ceilings.run(snakemake.input.profile, ctx.profile, snakemake.output[0])

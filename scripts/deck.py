"""Rule deck: the deck source → results/<arch>/<library>/deck.yaml, one library's slice, and legality.json."""

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import deck

with stage(snakemake) as ctx:
    deck.run(
        snakemake.params.deck,
        snakemake.wildcards.library,
        snakemake.output.deck,
        ctx.profile,
        snakemake.output.legality,
    )

"""Rule deck: the deck source → results/<arch>/<library>/deck.yaml, one library's slice."""

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.run.context import stage
from oto.stages import deck

with stage(snakemake):
    deck.run(snakemake.params.deck, snakemake.wildcards.library, snakemake.output[0])

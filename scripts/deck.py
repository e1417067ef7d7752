"""Rule deck: the shipped library → results/<arch>/deck.yaml and one slice per selected library."""

import _oto  # noqa: F401  (puts the oto package on sys.path)
from oto.smk import stage
from oto.stages import deck

with stage(snakemake) as ctx:
    deck.run(
        snakemake.params.kind,
        snakemake.input.source,
        snakemake.params.libraries,
        snakemake.output.deck,
        list(snakemake.output.slices),
    )

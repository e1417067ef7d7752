"""Many testers, one library: the tester's preflight and device profile, shards of the deck, checksummed
result bundles, and the validated merge of bundles from many devices into one results/<arch>/."""

from collections.abc import Sequence


def split_passthrough(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(oto's arguments, the arguments after ``--`` that go to snakemake)."""
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]

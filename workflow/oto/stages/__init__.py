"""One module per workflow stage. Each exposes ``run(...)`` with explicit paths so tests can call it
without Snakemake; ``scripts/<stage>.py`` only unpacks the ``snakemake`` object."""

"""One module per workflow stage, orchestration only: read the stage's input files, call the domain, write
its outputs. Each exposes ``run(...)`` with explicit paths so tests can call it without Snakemake;
``scripts/<stage>.py`` only unpacks the ``snakemake`` object. A stage never imports another stage."""

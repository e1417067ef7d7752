"""The Snakemake glue: the run configuration and its schema, the run plan the Snakefile needs at parse time,
the context a rule's ``script:`` runs a stage in, and the run lock."""

"""The dashboard's chart files (under dashboard/plots/, as <name>.svg) and their labels, in page order.

Kept free of heavy imports: rules/dashboard.smk reads it while Snakemake parses the workflow."""

CHARTS = {
    "progress_gflops": "Progress: best GFLOPS against the ceilings",
    "progress_score": "Progress: speed-up over the spoof floor",
    "wins_ties_losses": "Wins, ties and losses",
    "coverage": "Coverage of the deck",
    "benchmarks_by_proposer": "Benchmarks by proposer",
    "failures": "Failure classes over time",
    "reference_drift": "Noise: reference drift",
}

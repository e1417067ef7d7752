"""What a tuner's user looks at: the live dashboard (results/<arch>/dashboard/) and the figures it shares
with the acceptance report.

``collect`` reads the result files into one JSON-able document, ``figures`` turns per-size records into the
tables both pages show, ``plots`` draws the SVG charts and ``writer`` renders the pages. This package
module stays import-light: the Snakefile reads ``names`` while parsing.
"""

"""What a tuner's user looks at: the dashboard (live: results/<arch>/live/, final: results/<arch>/dashboard/)
and the acceptance report, which share one collector and one set of figures.

``collect`` reads the result files into one JSON-able document, ``figures`` turns per-size records into the
tables both pages show, ``plots`` draws the SVG charts, ``dashboard`` renders the dashboard and
``acceptance`` the report. This package module stays import-light: the Snakefile reads ``charts`` while
parsing.
"""

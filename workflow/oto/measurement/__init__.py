"""Measurement: launch plans interleaved with the reference, racing, samples, drift-normalised scores with
confidence intervals, per-size selection and verdicts, and recorded real noise for grading all of it."""

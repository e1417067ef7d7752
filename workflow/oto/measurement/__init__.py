"""Measurement: launch plans interleaved with the reference, racing, samples, drift-normalised scores with
confidence intervals, per-size selection and verdicts, recorded real noise for grading all of it, and
``oto override`` (:mod:`.stock_override`: the best shipped kernel per workload GEMM by measured or simulated
times)."""

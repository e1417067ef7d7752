"""rocBLAS's own clients, driven and read by oto: the output of ``rocblas-bench`` and ``rocblas-test``
parsed per size, the runners that call them (the real binaries with an installed library, or the simulated
GPU through the same interface, labelled simulated), the verify decision (a kernel rocBLAS's check fails is
taken out of the package) and the paired, interleaved A/B statistics of ``compare``."""

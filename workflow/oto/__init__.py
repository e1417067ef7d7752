"""oto: tuned rocBLAS/Tensile GEMM libraries for AMD GPUs that ship without them."""

__version__ = "0.1.0"

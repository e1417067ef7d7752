"""The coverage deck: which libraries rocBLAS ships for the reference GPU, at which sizes, with which kernels
(:mod:`.model`), read from a manifest, logic files or an installed rocBLAS (:mod:`.sources`), the sizes a
generation tunes on (:mod:`.tuning_sizes`), the GEMMs a user's workload runs, read from TunableOp and rocBLAS
logs (:mod:`.workload`), and rocBLAS's override file that runs the best shipped kernel for each
(:mod:`.override`)."""

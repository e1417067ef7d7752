"""The coverage deck: which libraries rocBLAS ships for the reference GPU, at which sizes, with which kernels
(:mod:`.model`), read from a manifest, logic files or an installed rocBLAS (:mod:`.sources`), and the sizes a
generation tunes on (:mod:`.tuning_sizes`)."""

"""Tensile interop: the kernel parameters oto tunes and their legality, Tensile's defaults, logic files and
``.dat`` libraries (read and write), benchmark configs and what Tensile's runs leave behind (logs, solutions,
results CSV), TensileCreateLibrary packaging and the run-time registration of ISAs Tensile lacks."""

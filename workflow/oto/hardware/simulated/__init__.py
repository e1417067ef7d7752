"""The simulated GPU: :mod:`.performance` gives each kernel's noise-free time and build outcome on an arch
profile, :mod:`.noise` the thermal/DVFS drift, jitter, outliers and clock readings of a run on it."""

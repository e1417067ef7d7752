"""The hardware model: arch profiles, theoretical and roofline ceilings, device memory limits, what GPU this
machine has, and the simulated GPU (``simulated``: a performance model and a noise model)."""

"""Measurement backends behind one interface (see :mod:`oto.backends.base`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oto.backends.base import Backend

BACKENDS = ("sim", "tensile", "replay")


def resolve(config: Mapping[str, Any], profile: Mapping[str, Any], stream: str) -> Backend:
    """Return the configured backend. ``stream`` names the job (library/generation) so that seeded
    backends draw independent, reproducible noise per job."""
    name = config.get("backend", "auto")
    if name == "auto":
        from oto.envcheck import auto_backend

        name = auto_backend(profile, config.get("tensile") or {})[0]
    if name == "tensile":
        from oto.backends.tensile import TensileBackend

        return TensileBackend(profile, config.get("tensile") or {}, stream=stream)
    if name == "sim":
        from oto.backends.sim import SimBackend

        return SimBackend(profile, config.get("sim", {}), seed=int(config.get("seed", 0)), stream=stream)
    if name == "replay":
        from oto.backends.replay import ReplayBackend

        return ReplayBackend(config.get("replay") or {}, seed=int(config.get("seed", 0)), stream=stream)
    raise ValueError(f"config field 'backend': unknown backend {name!r} (known: auto, {', '.join(BACKENDS)})")

"""Measurement backends behind one interface (see :mod:`oto.backends.base`), registered by name, and which
one a run gets.

A backend is a plug-in: a class following :class:`oto.backends.base.Backend`, registered in :data:`BACKENDS`
under the name config ``backend`` gives (the config schema's enum is tested against the registry), with its
options in a config block of its own whose defaults live in the schema (``sim:``, ``replay:``,
``tensile:``). The registry names each class by its module, imported on first use: a job imports only the
backend it runs. ``tests/test_backend_contract.py`` runs every registered backend through one contract.

``backend: auto`` picks ``tensile`` only where a GPU matching the profile's arch is visible *and* Tensile is
found; otherwise ``sim``. The GPU is checked first, so a machine without one never pays for probing Tensile;
and a machine without the ROCm kernel driver's device (``/dev/kfd``) is not probed at all: ROCm runs nothing
there, and asking rocm_agent_enumerator and rocminfo costs each workflow job that resolves ``auto`` ~0.15 s.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oto.backends.base import Backend
from oto.config import config_with_defaults
from oto.hardware.detect import detect_gpu
from oto.tensile.install import tensile_command

# name -> "module:class", imported when a run asks for it
BACKENDS: dict[str, str] = {
    "sim": "oto.backends.sim:SimBackend",
    "tensile": "oto.backends.tensile:TensileBackend",
    "replay": "oto.backends.replay:ReplayBackend",
}
AUTO = "auto"  # config backend: auto resolves to one of AUTO_CHOICES (auto_backend says which and why)
AUTO_CHOICES = ("sim", "tensile")
KFD_DEVICE = Path("/dev/kfd")  # the amdgpu kernel driver's compute device, which every ROCm program opens


def auto_backend(profile: Mapping[str, Any], tensile_cfg: Mapping[str, Any]) -> tuple[str, str]:
    """(backend, why) for ``backend: auto``."""
    if not KFD_DEVICE.exists():
        return "sim", f"no AMD GPU ROCm can use: {KFD_DEVICE} is absent (no amdgpu compute driver)"
    gpu = detect_gpu()
    arch = profile["arch"]
    if not gpu["physical"]:
        return "sim", "no AMD GPU visible (rocm_agent_enumerator/rocminfo found none)"
    if arch not in (gpu["physical"], gpu["effective"]):
        return "sim", f"GPU {gpu['physical']} does not match the profile's arch {arch}"
    if tensile_command(tensile_cfg) is None:
        return "sim", f"GPU {gpu['physical']} found but Tensile is not installed"
    return "tensile", f"GPU {gpu['physical']} and Tensile found"


def backend_type(name: str) -> type[Backend]:
    """The class registered as ``name`` (imported now, not before)."""
    try:
        module, cls = BACKENDS[name].split(":")
    except KeyError:
        raise ValueError(
            f"config field 'backend': unknown backend {name!r} (known: {AUTO}, {', '.join(BACKENDS)})"
        ) from None
    return getattr(importlib.import_module(module), cls)


def profile_fields(backend: str) -> tuple[str, ...]:
    """The arch-profile fields the configured backend's builds and measurements depend on (``auto``: any of
    the backends it may pick)."""
    chosen = AUTO_CHOICES if backend == AUTO else (backend,)
    return tuple(dict.fromkeys(f for name in chosen for f in backend_type(name).PROFILE_FIELDS))


def provenance_fields(backend: str) -> tuple[str, ...]:
    """The arch-profile fields the configured backend's provenance reads (``auto``: any it may pick): a stage
    that resolves the backend only for its provenance (mutate, emit) must declare them."""
    from oto.backends.sim import SimBackend

    return SimBackend.PROVENANCE_FIELDS if backend in ("sim", "auto") else ()


def job_stream(library: str, stage: str) -> str:
    """The name of one job's stream (``<library>/gen<N>`` or ``<library>/final``): seeded backends draw
    independent, reproducible noise per stream."""
    return f"{library}/{stage}"


def backend_class(config: Mapping[str, Any], profile: Mapping[str, Any]) -> type[Backend]:
    """The class of the backend ``config`` gets (``auto`` resolved), for what it declares (its costs)."""
    config = config_with_defaults(config)
    name = config["backend"]
    if name == AUTO:
        name = auto_backend(profile, config["tensile"])[0]
    return backend_type(name)


def resolve(config: Mapping[str, Any], profile: Mapping[str, Any], stream: str) -> Backend:
    """Return the configured backend. ``stream`` names the job (library/generation) so that seeded
    backends draw independent, reproducible noise per job."""
    config = config_with_defaults(config)
    return backend_class(config, profile).from_config(config, profile, stream)

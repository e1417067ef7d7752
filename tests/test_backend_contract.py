"""The one backend contract, checked for every registered backend on a tiny problem: what it declares
(name, numbers, capabilities, costs, the profile fields it reads), its provenance, and build and measure
answering every kernel and launch. The config schema's ``backend`` enum is the registry plus ``auto``.

The tensile backend runs against the stand-in Tensile and client of tests/test_tensile_backend.py."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest
from oto.backends import AUTO, AUTO_CHOICES, BACKENDS, backend_type, profile_fields, resolve
from oto.backends.base import (
    BUILD_CLASSES,
    ROCBLAS_CLIENTS,
    SAMPLE_CLASSES,
    Capabilities,
    Costs,
    Kernel,
    Launch,
    MeasurePlan,
    Problem,
    Size,
)
from oto.config import config_schema, validate_config
from oto.deck.sources import SHIPPED_MANIFEST, read_manifest
from oto.gemm import Library
from oto.hardware.profile import load_profile, load_schema
from oto.tensile.params import candidate_id, canonical
from test_replay import make_cache
from test_tensile_backend import CLIENT, FAKE, PT

ROOT = Path(__file__).resolve().parents[1]
PROFILE = load_profile(ROOT / "arch_profiles" / "gfx90c.yaml")
SIZES = [Size(64, 64, 1, 64), Size(256, 128, 1, 96)]


@dataclass
class Rig:
    """One backend's tiny problem: the config, the problem, kernels of which ``good`` build."""

    config: dict[str, Any]
    problem: Problem
    kernels: list[Kernel]
    good: set[str]


def _kernel(params: dict) -> Kernel:
    p = canonical(params)
    return Kernel(candidate_id(p), p)


def sim_rig(tmp: Path) -> Rig:
    deck = read_manifest(SHIPPED_MANIFEST).libraries["Cijk_Ailk_Bljk_DB"]
    shipped = [_kernel(s["params"]) for s in deck.solutions[:2]]
    illegal = _kernel({"ThreadTile": [16, 16], "WorkGroup": [64, 16, 1]})  # 1024 threads x 256 elements
    config = validate_config({"arch": "gfx90c", "families": ["DB"], "backend": "sim", "seed": 5})
    return Rig(config, Problem.of(deck, PROFILE), [*shipped, illegal], {k.id for k in shipped})


def replay_rig(tmp: Path) -> Rig:
    cache = make_cache(tmp / "cache.json")
    config = validate_config(
        {"arch": "gfx90c", "families": ["DB"], "backend": "replay", "replay": {"cache": str(cache)}}
    )
    recorded = [Kernel("k-fast", {"x": 4, "y": 32, "z": 0}), Kernel("k-slow", {"x": 1, "y": 128, "z": 1})]
    absent = Kernel("k-absent", {"x": 8, "y": 128, "z": 0})  # outside the recorded space
    problem = Problem(Library.parse("Cijk_Ailk_Bljk_SB"), PROFILE, PT)
    return Rig(config, problem, [*recorded, absent], {"k-fast", "k-slow"})


def tensile_rig(tmp: Path) -> Rig:
    client = tmp / "tensile_client"
    client.write_text(f'#!/bin/sh\nexec {sys.executable} {CLIENT} "$@"\n')
    client.chmod(0o755)
    tensile = {
        "command": [sys.executable, str(FAKE)],
        "asm_cache": str(tmp / "cache" / "asm.yaml"),
        "prebuilt_client": str(client),
        "batch_size": 8,
        "timeout_s": 20,
        # the GPU-reset journal and its quarantine under the test's folder, not the checkout's results/
        "journal": str(tmp / "gpu-journal"),
        "quarantine": str(tmp / "quarantine.jsonl"),
    }
    config = validate_config({"arch": "gfx90c", "families": ["SB"], "backend": "tensile", "tensile": tensile})
    base = {"WorkGroup": [16, 16, 1], "DepthU": 16, "VectorWidth": 4}
    good = [
        _kernel({**base, "ThreadTile": [4, 4], "WorkGroupMapping": 8}),
        _kernel({**base, "ThreadTile": [8, 8], "WorkGroupMapping": 8}),
    ]
    rejected = _kernel({**base, "ThreadTile": [4, 4], "WorkGroupMapping": 1})  # the stand-in's rule says no
    problem = Problem(Library.parse("Cijk_Ailk_Bjlk_SB"), PROFILE, PT)
    return Rig(config, problem, [*good, rejected], {k.id for k in good})


# Every registered backend needs a rig here: a new backend is not registered until it passes the contract.
RIGS: dict[str, Callable[[Path], Rig]] = {"sim": sim_rig, "replay": replay_rig, "tensile": tensile_rig}


def test_every_registered_backend_has_a_rig_and_the_schema_enum_is_the_registry():
    assert set(RIGS) == set(BACKENDS)
    assert config_schema()["properties"]["backend"]["enum"] == [AUTO, *BACKENDS]
    assert set(AUTO_CHOICES) <= set(BACKENDS)
    with pytest.raises(ValueError, match=r"config field 'backend': unknown backend 'gpu' \(known: auto, sim"):
        backend_type("gpu")


def _declared(path: str) -> bool:
    """A dotted profile path the arch-profile schema declares (optional fields included: ``calibration``)."""
    node = load_schema()
    for part in path.split("."):
        props = node.get("properties") or {}
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict) or "{" in part:
            node = node.get("additionalProperties") or {}
        else:
            return False
    return True


@pytest.mark.parametrize("name", sorted(RIGS))
def test_backend_contract(name, tmp_path):
    rig = RIGS[name](tmp_path)
    cls = backend_type(name)
    assert cls.name == name and cls.numbers in ("simulated", "replayed", "measured")
    assert cls.rocblas_client in ROCBLAS_CLIENTS
    assert all(_declared(f) for f in cls.PROFILE_FIELDS), cls.PROFILE_FIELDS
    assert set(cls.PROFILE_FIELDS) <= set(profile_fields(name))
    costs = cls.costs(rig.config)
    assert isinstance(costs, Costs) and costs.source
    for f in fields(Costs):
        value = getattr(costs, f.name)
        assert f.name == "source" or (math.isfinite(value) and value >= 0), (f.name, value)

    backend = resolve(rig.config, PROFILE, "Cijk_Ailk_Bljk_DB/gen0")  # through the registry
    assert type(backend) is cls
    assert isinstance(backend.capabilities, Capabilities) and backend.launch_timeout_us > 0
    prov = backend.provenance()
    assert prov["backend"] == name and prov["numbers"] == cls.numbers
    json.dumps(prov)  # provenance goes into YAML and JSON records as it is
    assert backend.quarantined("Cijk_Ailk_Bljk_DB") == {}  # nothing took this rig's GPU down

    built = backend.build(rig.problem, rig.kernels, tmp_path / "work")
    assert [b.kernel_id for b in built] == [k.id for k in rig.kernels]
    assert all(b.status in BUILD_CLASSES for b in built)
    assert {b.kernel_id for b in built if b.status == "ok"} == rig.good
    assert all(b.reason for b in built if b.status != "ok"), "a failure says why"

    ok = [k for k in rig.kernels if k.id in rig.good]
    launches = [
        Launch(k.id, "reference" if j == 0 else "candidate", s, r)
        for r in range(2)
        for s in range(len(SIZES))
        for j, k in enumerate(ok)
    ]
    samples = backend.measure(
        rig.problem, MeasurePlan({k.id: k for k in ok}, SIZES, launches), tmp_path / "work"
    )
    cells = {(s.kernel_id, s.size_index, s.rep) for s in samples}
    assert {(la.kernel_id, la.size_index, la.rep) for la in launches} <= cells  # every launch is answered
    assert all(s.status in SAMPLE_CLASSES for s in samples)
    assert all(math.isfinite(s.time_us) and s.time_us > 0 for s in samples if s.status == "ok")
    assert any(s.status == "ok" for s in samples)
    if backend.capabilities.launch_order == "plan":
        assert [s.seq for s in samples] == list(range(len(launches)))
    else:
        assert sorted(s.seq for s in samples) == list(range(len(samples)))

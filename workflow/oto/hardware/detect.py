"""What AMD GPU this machine has: the agents ROCm enumerates, the ISA HIP sees under HSA_OVERRIDE_GFX_VERSION,
and the ROCm/HIP version."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_GFX = re.compile(r"\bgfx[0-9a-f]{3,4}\b")


def _run(cmd: list[str], timeout: float = 20) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def override_arch(value: str | None) -> str | None:
    """HSA_OVERRIDE_GFX_VERSION '9.0.0' → 'gfx900' (what HIP reports under the override)."""
    if not value:
        return None
    parts = value.strip().split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    major, minor, step = (int(p) for p in parts)
    return f"gfx{major}{minor:x}{step:x}"


def detect_gpu(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """{'agents': [...], 'physical': gfx or None, 'effective': gfx or None, 'override': str|None, 'source'}.

    rocm_agent_enumerator reads KFD's gfx_target_version (the physical ISA); rocminfo goes through the HSA
    runtime, which applies HSA_OVERRIDE_GFX_VERSION. HIP kernels must be built for the *effective* arch."""
    env = dict(os.environ if env is None else env)
    agents: list[str] = []
    source = None
    for cmd in (["rocm_agent_enumerator"], ["rocminfo"]):
        if shutil.which(cmd[0]) is None:
            continue
        out = _run(cmd)
        if out:
            found = [g for g in _GFX.findall(out) if g != "gfx000"]
            if found:
                agents, source = list(dict.fromkeys(found)), cmd[0]
                break
    override = env.get("HSA_OVERRIDE_GFX_VERSION")
    physical = agents[0] if agents else None
    effective = override_arch(override) if (physical and override) else physical
    return {
        "agents": agents,
        "physical": physical,
        "effective": effective,
        "override": override,
        "source": source,
    }


def hip_version() -> str | None:
    for cmd in (["hipconfig", "--version"],):
        out = _run(cmd) if shutil.which(cmd[0]) else None
        if out and out.strip():
            return out.strip().splitlines()[0]
    for path in ("/opt/rocm/.info/version", "/opt/rocm/.info/version-dev"):
        if Path(path).exists():
            return Path(path).read_text().strip()
    return None

"""``oto env``: what this machine offers the workflow, and which backend ``auto`` picks.

Reports the GPU (rocminfo / rocm_agent_enumerator, with HSA_OVERRIDE_GFX_VERSION taken into account), the
ROCm/HIP version, Tensile (version, whether it knows the target ISA natively or needs oto's run-time
registration), compilers, the prebuilt client, and whether ANTHROPIC_API_KEY is set (never its value).

Backend rule: ``auto`` picks ``tensile`` only where a GPU matching the profile's arch is visible *and*
Tensile is importable; otherwise ``sim``. The GPU is checked first, so a machine without one never pays for
importing Tensile.
"""

from __future__ import annotations

import json
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


def tensile_command(tensile_cfg: Mapping[str, Any]) -> list[str] | None:
    from oto.backends.tensile import RUNTIME_SCRIPT, tensile_python_from_path

    if tensile_cfg.get("command"):
        return [str(c) for c in tensile_cfg["command"]]
    python = tensile_cfg.get("python") or os.environ.get("OTO_TENSILE_PYTHON") or tensile_python_from_path()
    return [str(python), str(RUNTIME_SCRIPT)] if python else None


def tensile_info(tensile_cfg: Mapping[str, Any]) -> dict[str, Any]:
    cmd = tensile_command(tensile_cfg)
    if cmd is None:
        return {"found": False, "why": "no tensile.python, $OTO_TENSILE_PYTHON or `Tensile` on PATH"}
    out = _run([*cmd, "probe"], timeout=300)
    if not out:
        return {"found": False, "why": f"`{' '.join(cmd)} probe` failed (Tensile not importable?)"}
    try:
        info = json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"found": False, "why": "probe printed no JSON"}
    return {"found": True, **info}


def auto_backend(profile: Mapping[str, Any], tensile_cfg: Mapping[str, Any]) -> tuple[str, str]:
    """(backend, why) for ``backend: auto``."""
    gpu = detect_gpu()
    arch = profile["arch"]
    if not gpu["physical"]:
        return "sim", "no AMD GPU visible (rocm_agent_enumerator/rocminfo found none)"
    if arch not in (gpu["physical"], gpu["effective"]):
        return "sim", f"GPU {gpu['physical']} does not match the profile's arch {arch}"
    if tensile_command(tensile_cfg) is None:
        return "sim", f"GPU {gpu['physical']} found but Tensile is not installed"
    return "tensile", f"GPU {gpu['physical']} and Tensile found"


def report(profile: Mapping[str, Any] | None, tensile_cfg: Mapping[str, Any]) -> dict[str, Any]:
    gpu = detect_gpu()
    tensile = tensile_info(tensile_cfg)
    compilers = {
        name: shutil.which(name)
        for name in ("hipcc", "amdclang++", "clang++", "clang-offload-bundler", "hipconfig")
    }
    client = tensile_cfg.get("prebuilt_client")
    out: dict[str, Any] = {
        "gpu": gpu,
        "hip_version": hip_version(),
        "tensile": tensile,
        "compilers": compilers,
        "prebuilt_client": {
            "path": client,
            "exists": bool(client and Path(client).is_file() and os.access(client, os.X_OK)),
        },
        "anthropic_api_key": "set" if os.environ.get("ANTHROPIC_API_KEY") else "not set",
    }
    if profile is not None:
        out["arch"] = profile["arch"]
        out["auto_backend"], out["auto_backend_reason"] = auto_backend(profile, tensile_cfg)
        if tensile.get("found"):
            out["tensile"]["target_native"] = tensile.get("native", {}).get(profile["arch"], True)
    return out


def format_report(rep: Mapping[str, Any]) -> str:
    g, t = rep["gpu"], rep["tensile"]
    lines = [
        f"GPU            {', '.join(g['agents']) or 'none'}"
        + (f" (via {g['source']})" if g["source"] else "")
        + (
            f"; HSA_OVERRIDE_GFX_VERSION={g['override']} → HIP sees {g['effective']}" if g["override"] else ""
        ),
        f"ROCm/HIP       {rep['hip_version'] or 'not found'}",
    ]
    if t.get("found"):
        arch = rep.get("arch", "gfx90c")
        native = t.get("native", {}).get(arch, True)
        lines.append(
            f"Tensile        {t['version']} ({t['python']}); {arch}: "
            + ("known natively" if native else "not known → registered at run time with gfx900's caps")
        )
    else:
        lines.append(f"Tensile        not found ({t['why']})")
    lines.append(
        "compilers      " + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in rep["compilers"].items())
    )
    pc = rep["prebuilt_client"]
    lines.append(
        f"client         {pc['path'] or 'tensile.prebuilt_client not set'}"
        + ("" if not pc["path"] else (" (ok)" if pc["exists"] else " (missing or not executable)"))
    )
    lines.append(f"API key        ANTHROPIC_API_KEY {rep['anthropic_api_key']}")
    if "auto_backend" in rep:
        lines.append(f"backend auto → {rep['auto_backend']} ({rep['auto_backend_reason']})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import argparse

    import yaml

    ap = argparse.ArgumentParser(prog="oto env", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/config.yaml", help="run configuration (for tensile.*, arch)")
    ap.add_argument("--profiles", default="arch_profiles", help="folder of arch profiles")
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = ap.parse_args(argv)
    config: dict[str, Any] = {}
    if Path(args.config).exists():
        config = yaml.safe_load(Path(args.config).read_text()) or {}
    profile = None
    prof_path = Path(args.profiles) / f"{config.get('arch', 'gfx90c')}.yaml"
    if prof_path.exists():
        profile = yaml.safe_load(prof_path.read_text())
    rep = report(profile, config.get("tensile") or {})
    print(json.dumps(rep, indent=1) if args.json else format_report(rep))
    return 0

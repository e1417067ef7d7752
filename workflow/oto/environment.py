"""``oto env``: what this machine offers the workflow, and which backend ``auto`` picks.

Reports the GPU (rocminfo / rocm_agent_enumerator, with HSA_OVERRIDE_GFX_VERSION taken into account), the
ROCm/HIP version, Tensile (version, whether it knows the target ISA natively or needs oto's run-time
registration), compilers, the prebuilt client, the clock telemetry the tensile backend would read
(oto.hardware.telemetry), and whether ANTHROPIC_API_KEY is set (never its value).

Which backend ``auto`` picks is :func:`oto.backends.auto_backend`'s rule.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oto.backends import auto_backend
from oto.config import config_block
from oto.hardware.detect import detect_gpu, hip_version
from oto.hardware.telemetry import TelemetrySettings, find_source
from oto.tensile.install import tensile_info


def report(profile: Mapping[str, Any] | None, tensile_cfg: Mapping[str, Any]) -> dict[str, Any]:
    gpu = detect_gpu()
    tensile = tensile_info(tensile_cfg, profile)
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
    source, what = find_source(TelemetrySettings.from_config(tensile_cfg))
    out["telemetry"] = {"source": source.name if source else None, "detail": what}
    if profile is not None:
        out["arch"] = profile["arch"]
        out["auto_backend"], out["auto_backend_reason"] = auto_backend(profile, tensile_cfg)
        if tensile.get("found"):
            out["tensile"]["target_native"] = tensile.get("native", {}).get(profile["arch"], True)
            out["tensile"]["caps_from"] = (profile.get("tensile") or {}).get("caps_from")
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
    if t.get("found") and "arch" not in rep:  # no config naming an arch: nothing to say about one
        lines.append(f"Tensile        {t['version']} ({t['python']})")
    elif t.get("found"):
        arch = rep["arch"]
        native = t.get("native", {}).get(arch, True)
        lines.append(
            f"Tensile        {t['version']} ({t['python']}); {arch}: "
            + (
                "known natively"
                if native
                else f"not known → registered at run time with {t.get('caps_from') or 'its donor'}'s caps"
            )
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
    tel = rep.get("telemetry") or {}
    detail = tel.get("detail") if tel.get("source") else f"none: {tel.get('detail')}"
    lines.append(f"telemetry      {detail}")
    lines.append(f"API key        ANTHROPIC_API_KEY {rep['anthropic_api_key']}")
    if "auto_backend" in rep:
        lines.append(f"backend auto → {rep['auto_backend']} ({rep['auto_backend_reason']})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import argparse
    import sys

    import yaml

    ap = argparse.ArgumentParser(prog="oto env", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--config",
        default="config/config.yaml",
        help="run configuration whose arch and tensile.* settings are checked (default: %(default)s)",
    )
    ap.add_argument(
        "--profiles", default="arch_profiles", help="folder of arch profiles (default: %(default)s)"
    )
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = ap.parse_args(argv)
    config: dict[str, Any] = {}
    if Path(args.config).exists():
        from oto.config import ConfigError, layered_config

        try:  # as Snakemake layers it over config/config.yaml
            config = layered_config([args.config])
        except ConfigError as exc:
            print(f"oto env: {exc}", file=sys.stderr)
            return 2
    profile = None
    prof_path = Path(args.profiles) / f"{config['arch']}.yaml" if config.get("arch") else None
    if prof_path is not None and prof_path.exists():
        profile = yaml.safe_load(prof_path.read_text())
    rep = report(profile, config_block(config, "tensile"))
    print(json.dumps(rep, indent=1) if args.json else format_report(rep))
    return 0

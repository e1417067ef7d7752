"""How well the simulated GPU was checked on real data for a chip, in one line for every report that shows
simulated figures (the acceptance report and the dashboard): rows of the chip's own logic files never fitted,
a tester's races held out of a device's calibration, observations, or nothing at all. The figures live in
``model_checks.json`` (written from bench/sim_fidelity.py's results) and in a calibrated profile's
``calibration.check``."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CHECKS_FILE = Path(__file__).resolve().parent / "model_checks.json"


@functools.cache
def model_checks() -> dict[str, Any]:
    return json.loads(CHECKS_FILE.read_text())


def observations(arch: str) -> list[dict[str, Any]]:
    """The recorded observations of a real device of ``arch`` (model_checks.json), if any."""
    return list(model_checks().get("observations", {}).get(arch, []))


def model_check_line(arch: str, profile: Mapping[str, Any] | None = None) -> str:
    """One sentence: how well the model behind simulated figures for ``arch`` was checked on real data."""
    block = (profile or {}).get("calibration") or {}
    check = block.get("check") or {}
    if block.get("source") == "bundles" and check:
        return (
            f"Model check: this device's chip constants were calibrated on {block['rows']} measured races "
            f"(device {block.get('device', '?')}); on {check.get('held_out_sizes')} sizes it did not fit, it "
            f"orders {_pct(check.get('pair_agreement_after'))} of kernel pairs as measured "
            f"({_pct(check.get('pair_agreement_before'))} before calibration)."
        )
    c = model_checks().get("checks", {}).get(arch)
    if not c:
        return f"Model check: the simulator was never checked against real measurements of {arch}."
    if c.get("rows"):
        return (
            f"Model check ({c['model_version']}): {c['rows']:,} rows of {c['data']}: "
            f"{_pct(c['within_25pct'])} within ±25%, efficiency rank correlation {c['efficiency_rho']:.2f}."
        )
    seen = c.get("observations")
    tail = f": {c['observations_within_25pct']} of {seen} within ±25%" if seen else ""
    return f"Model check ({c['model_version']}): {c['data']}{tail} (bench/RESULTS.md)."


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{100 * float(x):.1f}%"


def model_check_for(arch: str, config: Mapping[str, Any] | None) -> str:
    """:func:`model_check_line` for a run: its device profile (config ``device_profile``) when it names a
    calibrated one, else the arch's figures."""
    from oto.hardware.profile import ProfileError, read_profile_figures

    profile = None
    path = (config or {}).get("device_profile")
    if path:
        try:
            profile = read_profile_figures(path)
        except (ProfileError, OSError):
            profile = None
    return model_check_line(arch, profile)

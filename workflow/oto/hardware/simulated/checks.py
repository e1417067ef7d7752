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

from oto.tensile.solution_fields import isa_tuple

CHECKS_FILE = Path(__file__).resolve().parent / "model_checks.json"


@functools.cache
def model_checks() -> dict[str, Any]:
    return json.loads(CHECKS_FILE.read_text())


def observations(arch: str) -> list[dict[str, Any]]:
    """The recorded observations of a real device of ``arch`` (model_checks.json), if any."""
    return list(model_checks().get("observations", {}).get(arch, []))


def model_check_line(arch: str, profile: Mapping[str, Any] | None = None, relative: str | None = None) -> str:
    """One sentence: how well the model behind simulated figures for ``arch`` was checked on real data;
    where ``arch`` never was, what the check of ``relative`` (the chip whose shipped library the run's deck
    is: gfx1100 for gfx1103) says of the same physics, said to be another chip's."""
    block = (profile or {}).get("calibration") or {}
    check = block.get("check") or {}
    if block.get("source") == "bundles" and check:
        return (
            f"Model check: this device's chip constants were calibrated on {block['rows']} measured races "
            f"(device {block.get('device', '?')}); on {check.get('held_out_sizes')} sizes it did not fit, it "
            f"orders {_pct(check.get('pair_agreement_after'))} of kernel pairs as measured "
            f"({_pct(check.get('pair_agreement_before'))} before calibration)."
        )
    checks = model_checks().get("checks", {})
    c = checks.get(arch)
    if not c:
        never = f"Model check: the simulator was never checked against real measurements of {arch}"
        near = checks.get(relative) if relative and relative != arch else None
        if not near or not near.get("rows"):
            return never + "."
        return (
            f"{never}; its physics were checked on {relative}, another chip ({near['model_version']}: "
            f"{near['rows']:,} rows of {near['data']}: {_pct(near['within_25pct'])} within ±25%, efficiency "
            f"rank correlation {near['efficiency_rho']:.2f}); {arch}'s own constants are assumed, and a chip "
            f"with assumed constants can agree far worse ({assumed_caveat(arch)})."
        )
    if c.get("rows"):
        return (
            f"Model check ({c['model_version']}): {c['rows']:,} rows of {c['data']}: "
            f"{_pct(c['within_25pct'])} within ±25%, efficiency rank correlation {c['efficiency_rho']:.2f}."
        )
    seen = c.get("observations")
    tail = f": {c['observations_within_25pct']} of {seen} within ±25%" if seen else ""
    return f"Model check ({c['model_version']}): {c['data']}{tail} (bench/RESULTS.md)."


def assumed_caveat(arch: str) -> str:
    """What chips of ``arch``'s generation gave with assumed constants on their own files (model_checks.json,
    ``assumed_constants``; every generation's where its own has none)."""
    known = {k: v for k, v in model_checks().get("assumed_constants", {}).items() if k != "about"}
    entries = known.get(f"gfx{isa_tuple(arch)[0]}") or [e for k in sorted(known) for e in known[k]]
    return "; ".join(
        f"{e['chip']}: {_pct(e['within_25pct'])} of {e['rows']:,} rows within ±25%, rank correlation "
        f"{e['efficiency_rho']:.2f}"
        for e in entries
    )


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{100 * float(x):.1f}%"


def model_check_for(arch: str, config: Mapping[str, Any] | None, relative: str | None = None) -> str:
    """:func:`model_check_line` for a run: its device profile (config ``device_profile``) when it names a
    calibrated one, else the arch's figures (``relative``: the arch of the deck's stock library)."""
    from oto.hardware.profile import ProfileError, read_profile_figures

    profile = None
    path = (config or {}).get("device_profile")
    if path:
        try:
            profile = read_profile_figures(path)
        except (ProfileError, OSError):
            profile = None
    return model_check_line(arch, profile, relative)


def final_model_check(final: Mapping[str, Any], arch: str) -> str | None:
    """For a final.yaml of simulated winners, the report's model-check line (the chip's, or the check of the
    chip whose library the deck is: ``shipped_gflops_arch``), which its logic file and the package carry
    too; None for measured or replayed ones."""
    prov = final.get("provenance") or {}
    if prov.get("numbers") != "simulated":
        return None
    return model_check_line(str(prov.get("arch") or arch), None, final.get("shipped_gflops_arch"))

"""What a device profile may change in its arch profile, checked wherever one is read: by the run's plan
(config ``device_profile``), by the tester that writes one (:mod:`oto.fleet.device`) and by the merge that
trusts the numbers measured on one.

A device profile is the arch profile refined for one device: its CUs, engine clock and memory bandwidth
(within the arch profile's ``device_range``), never anything else. A *calibrated* device profile (one with a
``calibration`` block, written by ``oto calibrate --bundles``) also carries the chip constants fitted to the
device's own measurements: its ``timing`` and sustained bandwidth may differ from the arch profile's, within
the bounds a fit keeps them in (``oto.hardware.simulated.performance.chip_bounds``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

# A device profile may differ from its arch profile in these fields only (memory: its bandwidth and usable
# size, never whether it is shared with the CPU).
REFINED = ("name", "compute_units", "clock_mhz", "memory", "device")
REFINED_MEMORY = ("kind", "peak_bandwidth_gbs", "sustained_bandwidth_gbs", "usable_device_memory_bytes")


class DeviceProfileError(ValueError):
    pass


def _range(arch_profile: Mapping, name: str, own: float) -> tuple[float, float]:
    r = (arch_profile.get("device_range") or {}).get(name)
    return (float(r["min"]), float(r["max"])) if r else (own, own)


def check_device_profile(arch_profile: Mapping[str, Any], device: Mapping[str, Any], source: str) -> None:
    """A device profile may refine its arch profile only in CUs, clock and memory bandwidth, within the arch
    profile's ``device_range``; everything else must be the arch profile's. Errors name the file and field."""

    def fail(field_name: str, problem: str) -> None:
        raise DeviceProfileError(f"{source}: field '{field_name}': {problem}")

    if device.get("arch") != arch_profile["arch"]:
        fail("arch", f"{device.get('arch')!r} is not the run's arch {arch_profile['arch']!r}")
    # calibrated for this device (an arch profile's own calibration, gfx906's, is the arch's figures)
    calibrated = isinstance(device.get("calibration"), Mapping) and device.get(
        "calibration"
    ) != arch_profile.get("calibration")
    for key in sorted(set(arch_profile) | set(device)):
        if key in REFINED or key in ("device_range", "timing", "calibration"):
            continue
        if device.get(key) != arch_profile.get(key):
            fail(
                key,
                f"differs from the arch profile ({device.get(key)!r} vs {arch_profile.get(key)!r}); "
                f"a device profile may only refine {', '.join(REFINED[1:4])}",
            )
    if calibrated:
        _check_calibrated(device, fail)
    else:
        _check_timing(arch_profile, device, fail)
    mem, arch_mem = device.get("memory") or {}, arch_profile["memory"]
    for key in sorted(set(arch_mem) | set(mem)):
        if key not in REFINED_MEMORY and mem.get(key) != arch_mem.get(key):
            fail(
                f"memory.{key}", f"differs from the arch profile ({mem.get(key)!r} vs {arch_mem.get(key)!r})"
            )
    checks = (
        ("compute_units", device.get("compute_units"), arch_profile["compute_units"]),
        ("clock_mhz", device.get("clock_mhz"), arch_profile["clock_mhz"]),
        ("peak_bandwidth_gbs", mem.get("peak_bandwidth_gbs"), arch_mem["peak_bandwidth_gbs"]),
    )
    for name, value, own in checks:
        lo, hi = _range(arch_profile, name, own)
        if not isinstance(value, int | float) or not lo <= value <= hi:
            where = name if name != "peak_bandwidth_gbs" else f"memory.{name}"
            fail(where, f"{value!r} is outside the range of {arch_profile['arch']} devices [{lo:g}, {hi:g}]")
    ratio = arch_mem["sustained_bandwidth_gbs"] / arch_mem["peak_bandwidth_gbs"]
    if (
        not calibrated
        and mem.get("sustained_bandwidth_gbs", 0) > mem.get("peak_bandwidth_gbs", 0) * ratio * 1.01
    ):
        fail("memory.sustained_bandwidth_gbs", f"above {ratio:.0%} of the peak, the arch profile's share")


def _check_timing(arch_profile: Mapping[str, Any], device: Mapping[str, Any], fail) -> None:
    """An uncalibrated device's timing is the arch profile's, its sustained clocks at most their share of the
    device's clock."""
    timing, arch_timing = dict(device.get("timing") or {}), dict(arch_profile.get("timing") or {})
    sustained, arch_sustained = (
        timing.pop("sustained_clock_mhz", {}),
        arch_timing.pop("sustained_clock_mhz", {}),
    )
    for key in sorted(set(timing) | set(arch_timing)):
        if timing.get(key) != arch_timing.get(key):
            fail(
                f"timing.{key}",
                f"differs from the arch profile ({timing.get(key)!r} vs {arch_timing.get(key)!r})",
            )
    if set(sustained) != set(arch_sustained):
        fail("timing.sustained_clock_mhz", f"rate classes {sorted(sustained)} are not the arch profile's")
    share = float(device.get("clock_mhz") or 0) / float(arch_profile["clock_mhz"])
    for rate, mhz in sorted(arch_sustained.items()):
        if not isinstance(sustained[rate], int | float) or sustained[rate] > mhz * share * 1.01:
            fail(
                f"timing.sustained_clock_mhz.{rate}",
                f"{sustained[rate]!r} is above the arch profile's share of the device clock "
                f"({mhz * share:.1f})",
            )


def _check_calibrated(device: Mapping[str, Any], fail) -> None:
    """A calibrated device's chip constants lie where a fit may put them (the device's own clock and peak
    bandwidth are the upper bounds)."""
    from oto.hardware.simulated.performance import chip_bounds, chip_constants

    if (device.get("timing") or {}).get("operating_points"):
        fail("timing.operating_points", "a device profile describes one device at one operating point")
    for name, value in chip_constants(device).items():
        lo, hi = chip_bounds(device, name)
        if not lo * 0.999 <= value <= hi * 1.001:
            where = (
                "memory.sustained_bandwidth_gbs" if name == "sustained_bandwidth_gbs" else f"timing.{name}"
            )
            fail(where, f"{value!r} is outside [{lo:g}, {hi:g}], where a calibration may put it")


def profile_hash(profile: Mapping[str, Any]) -> str:
    """sha256 of a profile's canonical JSON (key order and YAML formatting do not matter)."""
    return hashlib.sha256(json.dumps(profile, sort_keys=True, default=str).encode()).hexdigest()

"""The tester's preflight: what this machine offers, in plain words, before a night of tuning.

Each check says what it found and, when something is missing, what to do about it. ``stop`` checks keep the
run from starting (it would fail or measure the wrong thing); ``warn`` checks let it run and say what that
costs; ``ok`` and ``note`` are information. The facts come from :mod:`oto.environment` (GPU, ROCm/HIP,
Tensile, the auto backend), :mod:`oto.fleet.device` (CUs, clocks, memory, carve-out) and the session and
power readers below, which, like the device readers, take a file-system root, a command runner and the
environment so that tests feed them captured outputs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from oto.config import config_with_defaults
from oto.fleet.device import DeviceFacts, Runner, run_command
from oto.hardware.ceilings import theoretical_gflops
from oto.hardware.detect import override_arch
from oto.hardware.profile import has_arch_profile

STATUSES = ("ok", "note", "warn", "stop")
GIB = 1 << 30
DESKTOP_SESSIONS = ("x11", "wayland", "mir")


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | note | warn | stop
    found: str  # what the check saw, one line
    advice: str = ""  # what to do about it, in plain words ("" when nothing)


@dataclass(frozen=True)
class RunChoices:
    """What of the run's config the preflight reads, read once (defaults and docs: the config schema)."""

    backend: str  # config backend: auto, or the one the config forces
    strategy: str  # search.strategy
    agent_provider: str  # agent.provider: anthropic | none
    tensile_isa: str | None  # tensile.isa: the ISA kernels are assembled for (None: the arch)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RunChoices:
        full = config_with_defaults(config)
        return cls(
            backend=str(full["backend"]),
            strategy=str(full["search"]["strategy"]),
            agent_provider=str(full["agent"]["provider"]),
            tensile_isa=full["tensile"]["isa"],
        )


# -- session and power -------------------------------------------------------------------------------------


def session_facts(
    env: Mapping[str, str], run: Runner = run_command, tty: str | None = None
) -> dict[str, Any]:
    """Whether oto runs inside a graphical session or on a text console, and whether a display manager (the
    graphical login) is active on the machine."""
    kind = (env.get("XDG_SESSION_TYPE") or "").lower() or None
    graphical = bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")) or kind in DESKTOP_SESSIONS
    dm = run(["systemctl", "is-active", "display-manager"])
    return {
        "session_type": kind,
        "graphical": graphical,
        "ssh": bool(env.get("SSH_CONNECTION")),
        "tty": tty,
        "display_manager_active": None if dm is None else dm.strip() == "active",
    }


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def power_facts(root: Path = Path("/"), run: Runner = run_command) -> dict[str, Any]:
    """AC or battery, the platform/power profile (ACPI, power-profiles-daemon, Pop!_OS's system76-power) and
    amdgpu's DPM performance level."""
    on_ac = None
    for supply in sorted((root / "sys/class/power_supply").glob("*")):
        if _read(supply / "type") == "Mains":
            online = _read(supply / "online")
            on_ac = bool(on_ac) or online == "1"
    profile, source = None, None
    s76 = run(["system76-power", "profile"])
    if s76 and ":" in s76:
        profile, source = s76.split(":", 1)[1].strip().splitlines()[0].strip().lower(), "system76-power"
    if profile is None:
        ppd = run(["powerprofilesctl", "get"])
        if ppd and ppd.strip():
            profile, source = ppd.strip().lower(), "powerprofilesctl"
    if profile is None:
        acpi = _read(root / "sys/firmware/acpi/platform_profile")
        if acpi:
            profile, source = acpi.lower(), "platform_profile"
    dpm = None
    for card in sorted((root / "sys/class/drm").glob("card[0-9]*")):
        if "-" not in card.name and (level := _read(card / "device/power_dpm_force_performance_level")):
            dpm = level
            break
    return {"on_ac": on_ac, "profile": profile, "profile_source": source, "dpm_level": dpm}


# -- the checks ------------------------------------------------------------------------------------------


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / (1 << 20):.0f} MiB"


def checks(
    *,
    arch: str,
    env_report: Mapping[str, Any],
    facts: DeviceFacts,
    arch_profile: Mapping[str, Any],
    device: Mapping[str, Any] | None,
    session: Mapping[str, Any],
    power: Mapping[str, Any],
    environ: Mapping[str, str],
    choices: RunChoices,
    simulate: bool = False,
) -> list[Check]:
    """Every preflight check, in the order a tester reads them."""
    out: list[Check] = []
    gpu = env_report["gpu"]
    physical = facts.arch or gpu.get("physical")
    backend, why = env_report.get("auto_backend", "sim"), env_report.get("auto_backend_reason", "")
    if choices.backend != "auto":
        backend, why = choices.backend, "set in the config (backend)"
    if simulate:
        backend, why = "sim", "you asked for a simulated run (--simulate)"
    if not physical:
        out.append(
            Check(
                "gpu",
                "warn",
                "no AMD GPU found (no KFD GPU node; rocminfo and rocm_agent_enumerator list none)",
                "oto will use its simulated GPU: fine for trying the command, but its numbers are simulated "
                "and the maintainer's merge only takes measured results. Install the amdgpu driver and ROCm "
                "(docs/tensile.md).",
            )
        )
    elif physical != arch and not simulate:
        out.append(
            Check(
                "gpu",
                "stop",
                f"your GPU is {physical}, this configuration tunes {arch}",
                (
                    f"run again with --arch {physical} (it tunes your GPU with the same settings)"
                    if has_arch_profile(physical)
                    else f"oto has no profile of {physical} (arch_profiles/{physical}.yaml; "
                    "docs/arch_profiles.md says how to describe it)"
                )
                + ", or add --simulate to try the simulated GPU",
            )
        )
    else:
        name = facts.gpu_name or "AMD GPU"
        out.append(
            Check(
                "gpu",
                "ok",
                f"{physical} ({name}), {facts.compute_units or '?'} CUs at up to "
                f"{facts.clock_mhz or '?'} MHz",
            )
        )
    out.append(_override_check(arch, physical, environ, choices, backend))
    hip = env_report.get("hip_version")
    out.append(
        Check("rocm", "ok", f"ROCm/HIP {hip}")
        if hip
        else Check(
            "rocm",
            "warn",
            "ROCm/HIP not found (no hipconfig, no /opt/rocm/.info/version)",
            "without ROCm oto cannot run kernels on the GPU; the run will be simulated. Install ROCm "
            "(docs/tensile.md).",
        )
    )
    tensile = env_report.get("tensile") or {}
    if tensile.get("found"):
        native = tensile.get("native", {}).get(arch, True)
        out.append(
            Check(
                "tensile",
                "ok",
                f"Tensile {tensile.get('version')}; {arch}: "
                + ("known natively" if native else "not known, oto registers it at run time"),
            )
        )
    else:
        out.append(
            Check(
                "tensile",
                "warn",
                f"Tensile not found ({tensile.get('why', 'not probed')})",
                "install Tensile in its own venv and export "
                "OTO_TENSILE_PYTHON=/path/to/tensile-venv/bin/python (docs/tensile.md §1); "
                "without it the run is simulated",
            )
        )
    if backend == "tensile":
        out.append(Check("numbers", "ok", "this run MEASURES on your GPU with Tensile"))
    else:
        out.append(Check("numbers", "note", f"this run is SIMULATED ({why}); the bundle says so"))
    out.append(_session_check(session))
    out.append(_carve_out_check(facts))
    out.extend(_power_checks(power))
    out.append(_memory_check(facts, arch_profile))
    out.append(_device_check(arch_profile, device))
    strategy = choices.strategy
    if environ.get("ANTHROPIC_API_KEY") and choices.agent_provider != "none":
        out.append(
            Check(
                "api_key",
                "ok",
                "ANTHROPIC_API_KEY is set: Claude proposes part of each generation "
                "(the key is read from the environment and never written anywhere)",
            )
        )
    else:
        out.append(
            Check(
                "api_key",
                "note",
                f"no ANTHROPIC_API_KEY: the run uses the {strategy} search strategy "
                "alone, without Claude. That is fine; with a key, Claude adds proposals.",
            )
        )
    return out


def _override_check(
    arch: str, physical: str | None, environ: Mapping[str, str], choices: RunChoices, backend: str
) -> Check:
    value = environ.get("HSA_OVERRIDE_GFX_VERSION")
    if not value:
        return Check(
            "hsa_override",
            "ok",
            f"HSA_OVERRIDE_GFX_VERSION is not set: HIP sees the GPU as {physical or 'what it is'}",
        )
    effective = override_arch(value)
    if effective is None:
        return Check(
            "hsa_override",
            "warn",
            f"HSA_OVERRIDE_GFX_VERSION={value} is not a version like 9.0.0",
            "unset it (unset HSA_OVERRIDE_GFX_VERSION) or correct it",
        )
    isa = choices.tensile_isa or arch
    if effective != isa and backend == "tensile":
        return Check(
            "hsa_override",
            "stop",
            f"HSA_OVERRIDE_GFX_VERSION={value} makes HIP see {effective}, but kernels are built for {isa}",
            "they would not load. For tuning, unset it in this console (unset HSA_OVERRIDE_GFX_VERSION); "
            f"or set tensile: {{isa: {effective}}} in the config to build {effective}'s kernels and tune "
            f"them under the override, where {effective}'s kernels run correctly on this GPU (gfx900's do "
            "on a gfx90c; under 11.0.0 some 780Ms fault or hang: ROCm/rocm-libraries#6320)",
        )
    return Check("hsa_override", "note", f"HSA_OVERRIDE_GFX_VERSION={value}: HIP sees {effective}")


def _session_check(session: Mapping[str, Any]) -> Check:
    if session.get("graphical"):
        return Check(
            "session",
            "warn",
            f"running inside a desktop session ({session.get('session_type') or 'graphical'})",
            "a GPU reset during tuning (it happens when a kernel hangs) kills the desktop and this run with "
            "it, and the desktop shares the GPU, which makes timings noisy. Save your work, press "
            "Ctrl+Alt+F3, log in "
            "on the text console and run the same command there.",
        )
    dm = session.get("display_manager_active")
    where = (
        "over SSH"
        if session.get("ssh")
        else f"on a text console{' ' + session['tty'] if session.get('tty') else ''}"
    )
    if dm:
        return Check(
            "session",
            "note",
            f"running {where}; the graphical login screen is still running",
            "for steadier timings stop it for the night: sudo systemctl stop display-manager "
            "(start it again with sudo systemctl start display-manager, or reboot)",
        )
    return Check("session", "ok", f"running {where}" + (", no desktop running" if dm is False else ""))


def _carve_out_check(facts: DeviceFacts) -> Check:
    vram = facts.carve_out_bytes
    if vram is None:
        return Check("carve_out", "note", "GPU memory carve-out unknown (no amdgpu sysfs)")
    found = f"GPU memory carve-out (UMA frame buffer) {_gib(vram)}" + (
        f", GTT {_gib(facts.gtt_bytes)}" if facts.gtt_bytes else ""
    )
    if vram < GIB:
        return Check(
            "carve_out",
            "warn",
            found,
            "problems needing more GPU memory are skipped (recorded as too_large). If your BIOS offers "
            "'UMA Frame Buffer Size' (or 'iGPU memory'), set it to 2 GB; many laptops do not offer it.",
        )
    return Check("carve_out", "ok", found)


def _power_checks(power: Mapping[str, Any]) -> list[Check]:
    out = []
    if power.get("on_ac") is False:
        out.append(
            Check(
                "power",
                "warn",
                "running on battery",
                "plug in the charger: on battery the GPU clocks down and the night's numbers drift",
            )
        )
    elif power.get("on_ac"):
        out.append(Check("power", "ok", "on mains power"))
    profile = power.get("profile")
    if profile is None:
        out.append(Check("power_profile", "note", "power profile unknown"))
    elif any(w in profile for w in ("battery", "power-saver", "low-power", "quiet", "cool")):
        out.append(
            Check(
                "power_profile",
                "warn",
                f"power profile '{profile}' ({power.get('profile_source')})",
                "it caps the clocks; switch to balanced or performance for the night "
                "(Pop!_OS: system76-power profile performance; elsewhere: powerprofilesctl set performance)",
            )
        )
    else:
        out.append(Check("power_profile", "ok", f"power profile '{profile}' ({power.get('profile_source')})"))
    if power.get("dpm_level") and power["dpm_level"] not in ("auto", "high"):
        out.append(Check("dpm", "note", f"amdgpu power level forced to '{power['dpm_level']}'"))
    return out


def _memory_check(facts: DeviceFacts, arch_profile: Mapping[str, Any]) -> Check:
    if facts.peak_bandwidth_gbs:
        bits = facts.memory_bus_bits or 0
        channels = "dual channel" if bits >= 128 else f"{bits}-bit (single channel: half the bandwidth)"
        status = "ok" if bits >= 128 else "warn"
        return Check(
            "memory",
            status,
            f"memory {facts.memory_kind}, {channels}: {facts.peak_bandwidth_gbs} GB/s "
            f"peak (from {facts.sources.get('memory_mts')})",
            "" if status == "ok" else "a second memory module doubles the GPU's bandwidth",
        )
    return Check(
        "memory",
        "warn",
        f"memory type and speed unknown; assuming the arch profile's {arch_profile['memory']['kind']}",
        "reading them needs administrator rights once: run  "
        "sudo dmidecode -t memory > dmidecode-memory.txt  in "
        "this folder (oto reads the type and speed from it, nothing else), or pass --memory lpddr4x-4266 "
        "(or ddr4-3200) yourself",
    )


def _device_check(arch_profile: Mapping[str, Any], device: Mapping[str, Any] | None) -> Check:
    if device is None:
        return Check(
            "device_profile", "note", f"no device facts: the arch profile ({arch_profile['name']}) is used"
        )
    peak = theoretical_gflops(device, "fp32")
    arch_peak = theoretical_gflops(arch_profile, "fp32")
    return Check(
        "device_profile",
        "ok",
        f"device profile {device['device']['id']}: {device['compute_units']} CUs @ "
        f"{device['clock_mhz']} MHz, "
        f"{device['memory']['peak_bandwidth_gbs']} GB/s: FP32 ceiling {peak:.0f} GFLOPS "
        f"(the {arch_profile['arch']} arch profile: {arch_peak:.0f})",
    )


def blocking(found: list[Check]) -> list[Check]:
    return [c for c in found if c.status == "stop"]


def format_checks(found: list[Check]) -> str:
    mark = {"ok": "ok  ", "note": "note", "warn": "WARN", "stop": "STOP"}
    lines = []
    for c in found:
        lines.append(f"[{mark[c.status]}] {c.name:15s} {c.found}")
        if c.advice:
            lines.append(f"       {'':15s} → {c.advice}")
    stops = blocking(found)
    lines.append("")
    lines.append(
        f"Cannot start: fix the {len(stops)} STOP item(s) above."
        if stops
        else "Ready."
        + (
            " WARN items make the run less useful; the run goes on."
            if any(c.status == "warn" for c in found)
            else ""
        )
    )
    return "\n".join(lines)


def as_records(found: list[Check]) -> list[dict[str, str]]:
    return [asdict(c) for c in found]


def current_tty() -> str | None:
    try:
        return os.ttyname(0) if os.isatty(0) else None
    except OSError:
        return None

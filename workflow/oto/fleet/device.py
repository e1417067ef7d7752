"""The device, not just the arch: what this GPU is (CUs, clocks, memory, carve-out, driver), read from the
kernel's KFD topology and amdgpu sysfs, rocminfo and dmidecode, and the arch profile refined for it.

gfx90c ships with 5 to 8 CUs at 1400-2000 MHz, on DDR4 or LPDDR4x, one or two channels: the arch profile
describes one SKU (the 5600U), a tester's laptop may be another. The *device profile* is the arch profile
with the facts of this device put in (compute units, engine clock, memory bandwidth, usable memory) and a
``device:`` block saying where each fact came from. Ceilings, the simulator and the reports read it like any
profile (config ``device_profile``), and it travels in the tester's bundle, where the merge checks it against
the arch profile's ``device_range`` (:func:`check_device_profile`) before trusting a number measured on it.

Every reader takes the file-system root and a command runner, so tests parse captured files and outputs.
"""

from __future__ import annotations

import copy
import hashlib
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from oto.hardware.device_profile import check_device_profile
from oto.hardware.profile import isa_name, validate_profile

Runner = Callable[[list[str]], "str | None"]
AMD_VENDOR = 0x1002
BUS_BITS_MAX = 128  # every APU oto targets has a 128-bit memory interface (2 x 64-bit DDR4 or 4 x 32 LPDDR4x)
USABLE_SHARE = 0.9  # of the GPU's local memory pool a benchmark may allocate


def run_command(cmd: list[str], timeout: float = 20) -> str | None:
    """stdout of a command, or None when it is missing, fails or hangs."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


@dataclass
class DeviceFacts:
    """What was read about this machine's AMD GPU; None where nothing said. ``sources`` names the origin of
    each fact (kfd, rocminfo, sysfs, dmidecode, tester)."""

    arch: str | None = None  # physical ISA (KFD's gfx_target_version; rocminfo under no override)
    gpu_name: str | None = None
    cpu: str | None = None
    pci_device: str | None = None  # e.g. "1638" (Cezanne)
    compute_units: int | None = None
    clock_mhz: int | None = None  # maximum engine clock
    memory_type: str | None = None  # ddr4, lpddr4, …
    memory_mts: int | None = None  # transfers per second, millions (DDR4-3200: 3200)
    memory_bus_bits: int | None = None  # populated width, ≤ 128
    local_memory_bytes: int | None = None  # the GPU's local pool (KFD), else the carve-out
    carve_out_bytes: int | None = None  # UMA frame buffer (mem_info_vram_total)
    gtt_bytes: int | None = None
    kernel: str | None = None
    driver: str | None = None  # amdgpu: the DKMS module's version, else the kernel's own driver
    rocm: str | None = None
    machine_id: str | None = field(default=None, repr=False)  # hashed into the device id, never stored
    sources: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, value: Any, source: str) -> None:
        """Record a fact unless an earlier (better) source already gave it."""
        if value is not None and getattr(self, name) is None:
            setattr(self, name, value)
            self.sources[name] = source

    @property
    def memory_kind(self) -> str | None:
        if self.memory_type and self.memory_mts:
            return f"{self.memory_type}-{self.memory_mts}"
        return None

    @property
    def peak_bandwidth_gbs(self) -> float | None:
        if not (self.memory_mts and self.memory_bus_bits):
            return None
        return round(self.memory_mts * min(self.memory_bus_bits, BUS_BITS_MAX) / 8 / 1000, 2)

    def device_id(self) -> str:
        """A pseudonymous id, stable across runs on one machine: a hash of /etc/machine-id with the GPU's PCI
        id (the machine id itself never leaves the machine); without a machine id, a hash of the facts."""
        basis = [self.machine_id or "", self.pci_device or "", self.cpu or ""]
        if not self.machine_id:
            basis += [str(self.compute_units), str(self.clock_mhz), str(self.memory_kind)]
        return "d" + hashlib.sha256("\0".join(["oto-device", *basis]).encode()).hexdigest()[:12]

    def public(self) -> dict[str, Any]:
        """The facts as they go into a device profile or a bundle (no machine id)."""
        out = {k: v for k, v in asdict(self).items() if k != "machine_id"}
        out["id"] = self.device_id()
        out["memory_kind"] = self.memory_kind
        out["peak_bandwidth_gbs"] = self.peak_bandwidth_gbs
        return out


# -- parsers (pure: text in, facts out) ----------------------------------------------------------------


def parse_key_values(text: str) -> dict[str, str]:
    """KFD ``properties`` files: one ``name value`` pair per line."""
    out = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2:
            out[parts[0]] = parts[1].strip()
    return out


def gfx_from_target_version(value: int) -> str | None:
    """KFD's gfx_target_version ``90012`` → ``gfx90c`` (major*10000 + minor*100 + stepping)."""
    if value <= 0:
        return None
    major, minor, step = value // 10000, (value // 100) % 100, value % 100
    if minor > 9 or step > 15:
        return None
    return isa_name((major, minor, step))


_AGENT = re.compile(r"^\*{3,}\s*\n\s*Agent\s+\d+\s*\n\*{3,}\s*$", re.M)


def parse_rocminfo(text: str) -> list[dict[str, str]]:
    """The HSA agents of ``rocminfo`` output, each a dict of its top-level ``Field: value`` lines."""
    agents = []
    for chunk in _AGENT.split(text)[1:]:
        agent: dict[str, str] = {}
        for line in chunk.splitlines():
            if not line.startswith("  ") or line.startswith("    "):
                continue  # only the agent's own fields, not pools or ISA sub-blocks
            key, sep, value = line.strip().partition(":")
            if sep and key and key not in agent:
                agent[key.strip()] = value.strip()
        agents.append(agent)
    return agents


def _leading_int(text: str | None) -> int | None:
    m = re.match(r"\s*(\d+)", text or "")
    return int(m[1]) if m else None


def parse_dpm_levels(text: str) -> list[int]:
    """``pp_dpm_sclk`` / ``pp_dpm_mclk``: ``0: 400Mhz *`` lines → clocks in MHz."""
    return [int(m[1]) for m in re.finditer(r"^\s*\d+:\s*(\d+)\s*[Mm][Hh]z", text, re.M)]


def parse_dmidecode_memory(text: str) -> dict[str, Any]:
    """``dmidecode -t 17``: type, configured speed and populated bus width of the memory devices."""
    types, speeds, width = [], [], 0
    for block in re.split(r"\n\s*\n", text):
        if "Memory Device" not in block:
            continue
        fields = dict(
            (k.strip(), v.strip())
            for k, _, v in (line.partition(":") for line in block.splitlines())
            if _ and k.strip()
        )
        size = fields.get("Size", "")
        if not size or size.lower().startswith(("no module", "0", "unknown")):
            continue
        kind = fields.get("Type", "").lower()
        if kind and kind not in ("unknown", "other"):
            types.append(kind)
        speed = _leading_int(fields.get("Configured Memory Speed") or fields.get("Configured Clock Speed"))
        speed = speed or _leading_int(fields.get("Speed"))
        if speed:
            speeds.append(speed)
        width += _leading_int(fields.get("Data Width")) or (64 if kind.startswith("ddr") else 0)
    return {
        "type": max(set(types), key=types.count) if types else None,
        "mts": min(speeds) if speeds else None,  # the slowest module sets the pace
        "bus_bits": min(width, BUS_BITS_MAX) if width else None,
    }


_MEMORY_ARG = re.compile(r"^(?P<type>[a-z0-9]+)-(?P<mts>\d{3,5})(?:/(?P<bits>\d{2,3}))?$")


def parse_memory_arg(text: str) -> dict[str, Any]:
    """The tester's own statement ``ddr4-3200`` or ``lpddr4x-4266/128`` (bus bits; default 128)."""
    m = _MEMORY_ARG.match(text.strip().lower())
    if not m:
        raise ValueError(
            f"memory {text!r}: expected TYPE-SPEED like ddr4-3200 or lpddr4x-4266 (optionally /64)"
        )
    return {"type": m["type"], "mts": int(m["mts"]), "bus_bits": int(m["bits"] or BUS_BITS_MAX)}


# -- readers (file system root + runner) ---------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _kfd_gpu_nodes(root: Path) -> list[dict[str, str]]:
    nodes = []
    for props in sorted((root / "sys/class/kfd/kfd/topology/nodes").glob("*/properties")):
        kv = parse_key_values(_read(props) or "")
        if int(kv.get("simd_count", "0") or 0) > 0 and int(kv.get("vendor_id", "0") or 0) == AMD_VENDOR:
            nodes.append(kv)
    return nodes


def _drm_devices(root: Path) -> list[Path]:
    out = []
    for card in sorted((root / "sys/class/drm").glob("card[0-9]*")):
        dev = card / "device"
        vendor = (_read(dev / "vendor") or "").strip()
        if "-" not in card.name and vendor.lower() == hex(AMD_VENDOR):
            out.append(dev)
    return out


def read_facts(
    root: Path = Path("/"),
    run: Runner = run_command,
    memory: str | None = None,
    memory_info: Path | None = None,
) -> DeviceFacts:
    """Facts of the first AMD GPU, from the best source first: KFD topology (what the kernel sees, no ROCm
    needed), rocminfo, amdgpu sysfs, dmidecode (or its saved output ``memory_info``), then the tester's
    ``memory`` statement for what nothing else said."""
    facts = DeviceFacts()
    for kv in _kfd_gpu_nodes(root)[:1]:
        facts.set("arch", gfx_from_target_version(int(kv.get("gfx_target_version", "0") or 0)), "kfd")
        simds, per_cu = int(kv.get("simd_count", "0")), int(kv.get("simd_per_cu", "0") or 0)
        facts.set("compute_units", simds // per_cu if per_cu else None, "kfd")
        facts.set("clock_mhz", int(kv.get("max_engine_clk_fcompute", "0") or 0) or None, "kfd")
        facts.set(
            "pci_device", f"{int(kv.get('device_id', '0') or 0):04x}" if kv.get("device_id") else None, "kfd"
        )
        facts.set("local_memory_bytes", int(kv.get("local_mem_size", "0") or 0) or None, "kfd")
    text = run(["rocminfo"])
    gpus = [a for a in parse_rocminfo(text or "") if a.get("Device Type") == "GPU"]
    if gpus:
        gpu = gpus[0]
        name = gpu.get("Name", "")
        facts.set("arch", name if re.fullmatch(r"gfx[0-9a-f]{3,4}", name) else None, "rocminfo")
        facts.set("gpu_name", gpu.get("Marketing Name") or None, "rocminfo")
        facts.set("compute_units", _leading_int(gpu.get("Compute Unit")), "rocminfo")
        facts.set("clock_mhz", _leading_int(gpu.get("Max Clock Freq. (MHz)")), "rocminfo")
        chip = re.search(r"0x([0-9a-fA-F]+)", gpu.get("Chip ID", ""))
        facts.set("pci_device", chip[1].lower().rjust(4, "0") if chip else None, "rocminfo")
    for dev in _drm_devices(root)[:1]:
        facts.set(
            "pci_device", (_read(dev / "device") or "").strip().lower().removeprefix("0x") or None, "sysfs"
        )
        sclk = parse_dpm_levels(_read(dev / "pp_dpm_sclk") or "")
        facts.set("clock_mhz", max(sclk) if sclk else None, "sysfs")
        facts.set("carve_out_bytes", _leading_int(_read(dev / "mem_info_vram_total")), "sysfs")
        facts.set("gtt_bytes", _leading_int(_read(dev / "mem_info_gtt_total")), "sysfs")
    dmi = None
    if memory_info is not None and memory_info.is_file():
        dmi, origin = parse_dmidecode_memory(_read(memory_info) or ""), f"dmidecode ({memory_info.name})"
    else:
        out = run(["dmidecode", "-t", "17"])  # root only; None for everybody else
        dmi, origin = (parse_dmidecode_memory(out), "dmidecode") if out else (None, "")
    if memory:
        stated = parse_memory_arg(memory)
        for k in ("type", "mts", "bus_bits"):
            facts.set(f"memory_{k}", stated[k], "tester")
    for k in ("type", "mts", "bus_bits"):
        facts.set(f"memory_{k}", (dmi or {}).get(k), origin)
    cpuinfo = _read(root / "proc/cpuinfo") or ""
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    facts.set("cpu", model[1].strip() if model else None, "cpuinfo")
    facts.set("kernel", (_read(root / "proc/sys/kernel/osrelease") or "").strip() or None, "proc")
    dkms = (_read(root / "sys/module/amdgpu/version") or "").strip()
    if dkms:
        facts.set("driver", f"amdgpu {dkms} (DKMS)", "sysfs")
    elif (root / "sys/module/amdgpu").is_dir() or facts.carve_out_bytes is not None:
        facts.set("driver", f"amdgpu of kernel {facts.kernel or '?'}", "sysfs")
    for rel in ("opt/rocm/.info/version", "opt/rocm/.info/version-dev"):
        facts.set("rocm", (_read(root / rel) or "").strip() or None, rel)
    facts.machine_id = (_read(root / "etc/machine-id") or "").strip() or None
    return facts


# -- the device profile ---------------------------------------------------------------------------------

_NAME_SAFE = re.compile(r"[^A-Za-z0-9 ._()@,/+-]")


def plain(text: str | None, limit: int = 80) -> str | None:
    """A name read from the machine, reduced to plain characters (it ends up in reports and bundles)."""
    if text is None:
        return None
    return " ".join(_NAME_SAFE.sub(" ", str(text)).split())[:limit] or None


def device_profile(arch_profile: Mapping[str, Any], facts: DeviceFacts, source: str) -> dict[str, Any]:
    """The arch profile refined with this device's facts; facts nothing said keep the arch's values.

    ``source`` names the arch profile (recorded with the device block). Raises DeviceProfileError when the
    facts fall outside the arch profile's ``device_range``: a wrong reading must not become a ceiling."""
    prof = copy.deepcopy(dict(arch_profile))
    prof.pop("device_range", None)
    if facts.compute_units:
        prof["compute_units"] = int(facts.compute_units)
    if facts.clock_mhz:
        # the profile's sustained clocks are a share of its peak clock: the device keeps the shares
        share = int(facts.clock_mhz) / float(prof["clock_mhz"])
        prof["clock_mhz"] = int(facts.clock_mhz)
        sustained = (prof.get("timing") or {}).get("sustained_clock_mhz")
        if sustained:
            prof["timing"]["sustained_clock_mhz"] = {
                rate: round(mhz * share, 1) for rate, mhz in sustained.items()
            }
    mem = prof["memory"]
    peak = facts.peak_bandwidth_gbs
    if peak:
        ratio = mem["sustained_bandwidth_gbs"] / mem["peak_bandwidth_gbs"]
        mem.update(
            kind=facts.memory_kind or mem["kind"],
            peak_bandwidth_gbs=peak,
            sustained_bandwidth_gbs=round(peak * ratio, 2),
        )
    pool = facts.local_memory_bytes or facts.carve_out_bytes
    if pool:
        mem["usable_device_memory_bytes"] = min(
            int(mem["usable_device_memory_bytes"]), int(pool * USABLE_SHARE)
        )
    who = plain(facts.cpu) or plain(facts.gpu_name) or "unknown device"
    prof["name"] = plain(
        f"{who}, {prof['compute_units']} CU @ {prof['clock_mhz']} MHz, {mem['kind']}", limit=160
    )
    public = facts.public()
    public["cpu"], public["gpu_name"] = plain(facts.cpu), plain(facts.gpu_name)
    prof["device"] = {
        **{k: v for k, v in public.items() if v is not None and k != "sources"},
        "refines": source,
        "sources": dict(sorted(facts.sources.items())),
    }
    validate_profile(prof, f"device profile of {public['id']}")
    check_device_profile(arch_profile, prof, f"device profile of {public['id']}")
    return prof

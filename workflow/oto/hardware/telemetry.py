"""Clock, temperature and power telemetry of an AMD GPU, read while the benchmark client runs.

Sources, best first (``tensile.telemetry.source: auto`` takes the first that reads and decodes):

* ``gpu_metrics`` — the amdgpu driver's binary metrics table, ``/sys/class/drm/card*/device/gpu_metrics``.
  It starts with ``struct metrics_table_header {u16 structure_size; u8 format_revision; u8
  content_revision}``; the layout of the rest is one of the ``struct gpu_metrics_vX_Y`` of the Linux kernel's
  ``drivers/gpu/drm/amd/include/kgd_pp_interface.h`` (APUs report format 2: Renoir/Cezanne, i.e. gfx90c,
  2.0–2.2; Van Gogh, Yellow Carp, Rembrandt 2.1–2.4; format 3.0 on the newest APUs). The layouts below are
  those C structs as ctypes structures, so padding follows the C rules the driver's compiler applied, and
  a table whose ``structure_size`` differs from its layout's size is refused. Units, per the drivers that fill
  the tables (smu12 renoir_ppt.c, smu11 vangogh_ppt.c, stated in the header from 2.4 on): temperatures in
  centi-degrees Celsius, powers in mW, clocks in MHz; a field the firmware does not provide is 0xFFFF.
  A revision oto has no layout for is recorded as "no telemetry", never guessed.
* ``pp_dpm_sclk`` — the driver's text list of graphics clock levels, the current one marked ``*``.
* ``rocm-smi`` — ``rocm-smi --showclocks --json`` (slow: a process per reading).

:class:`Sampler` reads one source at a fixed rate in a thread while a client call runs; :func:`summarise`
turns the readings of one sweep (one client call) into its clock, temperature and power, rejecting absurd
clocks (0, above 1.5x nominal) with the reason. A sampler that dies mid-run keeps what it read and says why.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from oto.config import config_defaults

SOURCES = ("auto", "gpu_metrics", "pp_dpm_sclk", "rocm-smi", "none")
ABSURD_CLOCK_FACTOR = 1.5  # a clock above 1.5x the nominal one is a unit mix-up or a broken reading
NOT_PROVIDED = 0xFFFF  # what the driver leaves in a u16 field the firmware does not fill


class TelemetryError(RuntimeError):
    """A reading failed; the message says why (file, field, revision)."""


# ---- gpu_metrics layouts (kgd_pp_interface.h) ----

u8, u16, u32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64


class _Header(ctypes.Structure):
    _fields_ = [("structure_size", u16), ("format_revision", u8), ("content_revision", u8)]


_V2_TEMPS = [("temperature_gfx", u16), ("temperature_soc", u16), ("temperature_core", u16 * 8),
             ("temperature_l3", u16 * 2)]  # fmt: skip
_V2_POWER = [("average_socket_power", u16), ("average_cpu_power", u16), ("average_soc_power", u16),
             ("average_gfx_power", u16), ("average_core_power", u16 * 8)]  # fmt: skip
_V2_AVG_CLOCKS = [("average_gfxclk_frequency", u16), ("average_socclk_frequency", u16),
                  ("average_uclk_frequency", u16), ("average_fclk_frequency", u16),
                  ("average_vclk_frequency", u16), ("average_dclk_frequency", u16)]  # fmt: skip
_V2_CUR_CLOCKS = [("current_gfxclk", u16), ("current_socclk", u16), ("current_uclk", u16),
                  ("current_fclk", u16), ("current_vclk", u16), ("current_dclk", u16),
                  ("current_coreclk", u16 * 8), ("current_l3clk", u16 * 2)]  # fmt: skip
_V2_ACTIVITY = [("average_gfx_activity", u16), ("average_mm_activity", u16)]
_V2_1_BODY = [("common_header", _Header), *_V2_TEMPS, *_V2_ACTIVITY, ("system_clock_counter", u64),
              *_V2_POWER, *_V2_AVG_CLOCKS, *_V2_CUR_CLOCKS, ("throttle_status", u32), ("fan_pwm", u16),
              ("padding", u16 * 3)]  # fmt: skip
_V2_AVG_TEMPS = [("average_temperature_gfx", u16), ("average_temperature_soc", u16),
                 ("average_temperature_core", u16 * 8), ("average_temperature_l3", u16 * 2)]  # fmt: skip


class GpuMetricsV2_0(ctypes.Structure):  # noqa: N801 - the kernel's struct names
    _fields_ = [("common_header", _Header), ("system_clock_counter", u64), *_V2_TEMPS, *_V2_ACTIVITY,
                *_V2_POWER, *_V2_AVG_CLOCKS, *_V2_CUR_CLOCKS, ("throttle_status", u32), ("fan_pwm", u16),
                ("padding", u16)]  # fmt: skip


class GpuMetricsV2_1(ctypes.Structure):  # noqa: N801
    _fields_ = _V2_1_BODY


class GpuMetricsV2_2(ctypes.Structure):  # noqa: N801
    _fields_ = [*_V2_1_BODY, ("indep_throttle_status", u64)]


class GpuMetricsV2_3(ctypes.Structure):  # noqa: N801
    _fields_ = [*_V2_1_BODY, ("indep_throttle_status", u64), *_V2_AVG_TEMPS]


class GpuMetricsV2_4(ctypes.Structure):  # noqa: N801
    _fields_ = [*_V2_1_BODY, ("indep_throttle_status", u64), *_V2_AVG_TEMPS,
                ("average_cpu_voltage", u16), ("average_soc_voltage", u16), ("average_gfx_voltage", u16),
                ("average_cpu_current", u16), ("average_soc_current", u16),
                ("average_gfx_current", u16)]  # fmt: skip


class GpuMetricsV3_0(ctypes.Structure):  # noqa: N801
    _fields_ = [("common_header", _Header), ("temperature_gfx", u16), ("temperature_soc", u16),
                ("temperature_core", u16 * 16), ("temperature_skin", u16), ("average_gfx_activity", u16),
                ("average_vcn_activity", u16), ("average_ipu_activity", u16 * 8),
                ("average_core_c0_activity", u16 * 16), ("average_dram_reads", u16),
                ("average_dram_writes", u16), ("average_ipu_reads", u16), ("average_ipu_writes", u16),
                ("system_clock_counter", u64), ("average_socket_power", u32), ("average_ipu_power", u16),
                ("average_apu_power", u32), ("average_gfx_power", u32), ("average_dgpu_power", u32),
                ("average_all_core_power", u32), ("average_core_power", u16 * 16),
                ("average_sys_power", u16), ("stapm_power_limit", u16), ("current_stapm_power_limit", u16),
                ("average_gfxclk_frequency", u16), ("average_socclk_frequency", u16),
                ("average_vpeclk_frequency", u16), ("average_ipuclk_frequency", u16),
                ("average_fclk_frequency", u16), ("average_vclk_frequency", u16),
                ("average_uclk_frequency", u16), ("average_mpipu_frequency", u16),
                ("current_coreclk", u16 * 16), ("current_core_maxfreq", u16), ("current_gfx_maxfreq", u16),
                ("throttle_residency_prochot", u32), ("throttle_residency_spl", u32),
                ("throttle_residency_fppt", u32), ("throttle_residency_sppt", u32),
                ("throttle_residency_thm_core", u32), ("throttle_residency_thm_gfx", u32),
                ("throttle_residency_thm_soc", u32), ("time_filter_alphavalue", u32)]  # fmt: skip


LAYOUTS: dict[tuple[int, int], type[ctypes.Structure]] = {
    (2, 0): GpuMetricsV2_0,
    (2, 1): GpuMetricsV2_1,
    (2, 2): GpuMetricsV2_2,
    (2, 3): GpuMetricsV2_3,
    (2, 4): GpuMetricsV2_4,
    (3, 0): GpuMetricsV3_0,
}


@dataclass(frozen=True)
class Reading:
    """One observation: NaN where the source gives no value."""

    t: float  # time.monotonic() when read
    clock_mhz: float = math.nan  # graphics (core) clock
    temperature_c: float = math.nan
    power_w: float = math.nan


def _value(raw: int, scale: float = 1.0, width: int = 16) -> float:
    return math.nan if raw == (1 << width) - 1 else raw / scale


def decode_gpu_metrics(blob: bytes, where: str = "gpu_metrics") -> dict[str, Any]:
    """The graphics clock (MHz), GPU temperature (°C) and socket power (W) of one gpu_metrics table, with its
    revision. Raises TelemetryError naming ``where`` for a truncated table or a revision without a layout."""
    if len(blob) < ctypes.sizeof(_Header):
        raise TelemetryError(f"{where}: {len(blob)} byte(s), shorter than the 4-byte header (truncated)")
    head = _Header.from_buffer_copy(blob[: ctypes.sizeof(_Header)])
    rev = (int(head.format_revision), int(head.content_revision))
    layout = LAYOUTS.get(rev)
    if layout is None:
        known = ", ".join(f"{a}.{b}" for a, b in LAYOUTS)
        raise TelemetryError(
            f"{where}: format {rev[0]}.{rev[1]} (structure_size {head.structure_size}) has no layout in oto "
            f"(decoded: {known}); no telemetry rather than a guess"
        )
    size = ctypes.sizeof(layout)
    if head.structure_size != size:
        raise TelemetryError(
            f"{where}: format {rev[0]}.{rev[1]} says structure_size {head.structure_size}, the kernel's "
            f"{layout.__name__} is {size} bytes"
        )
    if len(blob) < size:
        raise TelemetryError(f"{where}: {len(blob)} of {size} bytes of format {rev[0]}.{rev[1]} (truncated)")
    m = layout.from_buffer_copy(blob[:size])
    clock = _value(m.average_gfxclk_frequency)
    if math.isnan(clock) and hasattr(m, "current_gfxclk"):
        clock = _value(m.current_gfxclk)
    width = 32 if rev[0] == 3 else 16
    return {
        "format": f"{rev[0]}.{rev[1]}",
        "clock_mhz": clock,
        "temperature_c": _value(m.temperature_gfx, 100.0),  # centi-degrees Celsius
        "power_w": _value(m.average_socket_power, 1000.0, width),  # mW
    }


# ---- sources ----


class Source(Protocol):
    name: str
    where: str

    def read(self) -> Reading: ...


@dataclass
class GpuMetricsSource:
    path: Path
    name: str = "gpu_metrics"

    @property
    def where(self) -> str:
        return str(self.path)

    def read(self) -> Reading:
        try:
            blob = self.path.read_bytes()
        except OSError as exc:
            raise TelemetryError(f"{self.path}: unreadable ({exc.strerror or exc})") from None
        d = decode_gpu_metrics(blob, str(self.path))
        return Reading(time.monotonic(), d["clock_mhz"], d["temperature_c"], d["power_w"])


_LEVEL = re.compile(r"^\s*\d+:\s*(\d+(?:\.\d+)?)\s*mhz\s*\*\s*$", re.IGNORECASE)


@dataclass
class DpmSclkSource:
    path: Path
    name: str = "pp_dpm_sclk"

    @property
    def where(self) -> str:
        return str(self.path)

    def read(self) -> Reading:
        try:
            text = self.path.read_text(errors="replace")
        except OSError as exc:
            raise TelemetryError(f"{self.path}: unreadable ({exc.strerror or exc})") from None
        for line in text.splitlines():
            hit = _LEVEL.match(line)
            if hit:
                return Reading(time.monotonic(), float(hit.group(1)))
        raise TelemetryError(f"{self.path}: no current level (a line 'N: <clock>Mhz *')")


@dataclass
class RocmSmiSource:
    command: tuple[str, ...] = ("rocm-smi", "--showclocks", "--json")
    card: str = "card0"
    name: str = "rocm-smi"

    @property
    def where(self) -> str:
        return " ".join(self.command)

    def read(self) -> Reading:
        try:
            out = subprocess.run(list(self.command), capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TelemetryError(f"{self.where}: {exc}") from None
        try:
            doc = json.loads(out.stdout)
            fields = doc.get(self.card) or next(iter(doc.values()))
            sclk = next(v for k, v in fields.items() if k.lower().startswith("sclk"))
            mhz = float(re.search(r"(\d+(?:\.\d+)?)\s*mhz", str(sclk), re.IGNORECASE).group(1))  # type: ignore[union-attr]
        except (ValueError, StopIteration, AttributeError, TypeError) as exc:
            raise TelemetryError(f"{self.where}: no sclk in its output ({exc})") from None
        return Reading(time.monotonic(), mhz)


@dataclass(frozen=True)
class TelemetrySettings:
    source: str  # one of SOURCES
    rate_hz: float
    sysfs: Path
    card: str | None

    @classmethod
    def from_config(cls, tensile_cfg: Mapping[str, Any] | None) -> TelemetrySettings:
        cfg = {**config_defaults("tensile")["telemetry"], **dict((tensile_cfg or {}).get("telemetry") or {})}
        if cfg["source"] not in SOURCES:
            raise ValueError(
                f"config field 'tensile.telemetry.source': {cfg['source']!r} is not one of "
                f"{', '.join(SOURCES)}"
            )
        if not float(cfg["rate_hz"]) > 0:
            raise ValueError("config field 'tensile.telemetry.rate_hz': must be > 0")
        return cls(str(cfg["source"]), float(cfg["rate_hz"]), Path(cfg["sysfs"]), cfg["card"])


def _amd_cards(sysfs: Path, card: str | None) -> list[Path]:
    """Device folders of the AMD GPUs under ``sysfs`` (vendor 0x1002), card0 first; or the one named."""
    drm = sysfs / "class" / "drm"
    names = [card] if card else sorted(
        (p.name for p in drm.glob("card*") if re.fullmatch(r"card\d+", p.name)), key=lambda n: int(n[4:])
    )  # fmt: skip
    out = []
    for name in names:
        dev = drm / name / "device"
        with contextlib.suppress(OSError):
            if dev.is_dir() and (dev / "vendor").read_text().strip().lower() == "0x1002":
                out.append(dev)
    return out


def find_source(settings: TelemetrySettings) -> tuple[Source | None, str]:
    """The first source that gives a reading now, or None and why none did (every attempt's reason)."""
    if settings.source == "none":
        return None, "tensile.telemetry.source is none"
    wanted = SOURCES[1:-1] if settings.source == "auto" else (settings.source,)
    why: list[str] = []
    cards = _amd_cards(settings.sysfs, settings.card)
    candidates: list[Source] = []
    for name in wanted:
        if name == "rocm-smi":
            if shutil.which("rocm-smi"):
                candidates.append(RocmSmiSource(card=settings.card or "card0"))
            else:
                why.append("rocm-smi: not on PATH")
            continue
        files = [dev / name for dev in cards if (dev / name).exists()]
        if not files:
            where = settings.card or "card*"
            why.append(f"{name}: no {settings.sysfs}/class/drm/{where}/device/{name} of an AMD GPU")
        for f in files:
            candidates.append(GpuMetricsSource(f) if name == "gpu_metrics" else DpmSclkSource(f))
    for src in candidates:
        try:
            src.read()
        except TelemetryError as exc:
            why.append(str(exc))
            continue
        return src, f"{src.name} ({src.where})"
    return None, "; ".join(why) or "no source"


# ---- the sampler ----


@dataclass
class SamplerLog:
    source: str  # "<name> (<where>)" or "" without a source
    readings: list[Reading] = field(default_factory=list)
    died: str = ""  # why the sampler stopped before it was asked to ("" when it did not)
    failed_reads: int = 0


class Sampler:
    """Reads ``source`` every 1/rate_hz seconds in a daemon thread, from :meth:`start` to :meth:`stop` (one
    reading at each end too, so a short client call still gets two). A read that fails ends the sampling:
    what was read before stays, ``died`` says when and why."""

    def __init__(self, source: Source | None, rate_hz: float, label: str = ""):
        self.source, self.period = source, 1.0 / float(rate_hz)
        self.log = SamplerLog(label or (f"{source.name} ({source.where})" if source else ""))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def _read(self) -> bool:
        try:
            self.log.readings.append(self.source.read())  # type: ignore[union-attr]
            return True
        except TelemetryError as exc:
            self.log.failed_reads += 1
            self.log.died = f"sampler died {time.monotonic() - self._t0:.1f} s into the run: {exc}"
            return False
        except Exception as exc:  # a broken source must never take the measurement down
            self.log.died = f"sampler died {time.monotonic() - self._t0:.1f} s into the run: {exc!r}"
            return False

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            if not self._read():
                return

    def start(self) -> Sampler:
        self._t0 = time.monotonic()
        if self.source is not None and self._read():
            self._thread = threading.Thread(target=self._loop, name="oto-telemetry", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> SamplerLog:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5 * self.period, 1.0))
            if not self.log.died:
                self._read()
        return self.log

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass(frozen=True)
class SweepTelemetry:
    """One sweep's telemetry: medians of its sane readings (NaN where none), and why values are missing."""

    clock_mhz: float
    temperature_c: float
    power_w: float
    readings: int
    note: str  # "" when every value is there and nothing was rejected


def summarise(
    log: SamplerLog, t0: float, t1: float, nominal_mhz: float, why_none: str = ""
) -> SweepTelemetry:
    """The readings taken in [t0, t1] reduced to one clock, temperature and power. Clocks that are 0 or above
    1.5x nominal are rejected and counted in the note; so are impossible temperatures and powers."""
    inside = [r for r in log.readings if t0 <= r.t <= t1]
    notes: list[str] = []
    if not log.source:
        return SweepTelemetry(math.nan, math.nan, math.nan, 0, f"no telemetry: {why_none or 'no source'}")
    clocks, bad = [], []
    for r in inside:
        if not math.isfinite(r.clock_mhz):
            continue
        if r.clock_mhz <= 0 or r.clock_mhz > ABSURD_CLOCK_FACTOR * nominal_mhz:
            bad.append(r.clock_mhz)
        else:
            clocks.append(r.clock_mhz)
    if bad:
        notes.append(
            f"{len(bad)} of {len(bad) + len(clocks)} clock reading(s) rejected as absurd (0 or above "
            f"{ABSURD_CLOCK_FACTOR:g}x nominal {nominal_mhz:g} MHz: "
            f"{', '.join(f'{b:g}' for b in bad[:3])} MHz)"
        )
    temps = [r.temperature_c for r in inside if 0 < r.temperature_c < 150]
    powers = [r.power_w for r in inside if 0 <= r.power_w < 1000]
    if not inside:
        notes.append(f"no reading from {log.source} during the sweep")
    elif not clocks and not bad:
        notes.append(f"{log.source} gives no clock")
    if log.died:
        notes.append(log.died)
    return SweepTelemetry(_median(clocks), _median(temps), _median(powers), len(inside), "; ".join(notes))


def _median(values: list[float]) -> float:
    if not values:
        return math.nan
    v = sorted(values)
    n = len(v)
    return (v[(n - 1) // 2] + v[n // 2]) / 2

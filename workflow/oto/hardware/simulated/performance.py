"""The simulated GPU's performance model: a non-MFMA gfx9 GPU running Tensile VALU GEMM kernels (resources,
build outcomes, noise-free timing).

The default backend has no GPU behind it, so every number it produces comes from this model. Each term is a
physical effect of a tiled GEMM on a GCN CU (docs/simulator.md states the formula, the reason and the
calibration of each one). The model is deterministic: the same configuration, size, arch and seed always
give the same true time; only the noise model (:mod:`oto.hardware.simulated.noise`) draws random numbers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from oto.gemm import Family
from oto.tensile.defaults import TENSILE_DEFAULTS
from oto.tensile.params import PARAMS, mi_geometry

MODEL_VERSION = "simgpu-7"

# GCN/Vega facts (Vega ISA guide; per CU unless stated): they hold for every gfx9 chip and are not fitted.
LDS_BYTES_PER_CLK = 128  # 32 banks x 4 bytes
L1_BYTES_PER_CLK = 64  # vector memory path (TA/TD): caps what one CU can pull from L2/DRAM
MAX_WG_PER_CU = 16  # workgroup (barrier) slots per CU
BARRIER_CYCLES = 48  # two s_barrier + waitcnt drains per unrolled iteration
EPILOGUE_CYCLES = 400  # C address set-up, alpha/beta, store issue of one workgroup
VALU_OVERHEAD_INSTR = 4  # loop counter, pointer increments, waitcnt per wave per iteration (asm)
# bf16/int8 operands are unpacked to 32-bit registers (shift/and) before the FP32/int24 MAC: one VALU
# instruction per operand element (no vega10 logic file has these types, so this stays a count, not a fit).
# A chip with v_dot4_i32_i8 (int8 rate DOT4_RATE, gfx906) takes packed Int8x4 operands as they are.
UNPACK_PER_OPERAND = {"bf16": 1.0, "int8": 1.0}
DOT4_RATE = 4
# Tensile writes HPA half MACs as v_dot2_f32_f16 only for kernels with LocalDotLayout > 1 and InnerUnroll 2
# (KernelWriterAssembly, "Only supports LocalDotLayout == 2 for now"); every other HPA kernel issues
# v_mad_mix_f32 / v_fma_mix_f32, one half MAC per lane per clock: the FP32 rate, whatever dot2 offers.
DOT2_INNER_UNROLL = 2
# A WMMA operand is MatrixInstK (16) elements of one row per lane, replicated in both halves of the wave
# (RDNA3 ISA guide, WMMA: lanes 16-31 repeat lanes 0-15): Tensile's MIInputPerThread for WMMA.
MI_INPUT_PER_THREAD = 16
# Share of VALU issue slots Tensile's hand-ordered assembly fills: Vega's 4 VGPR banks and s_waitcnt on LDS
# reads stall some. Fixed, not fitted: it and a chip's sustained clock scale the same VALU time, and the fit
# gives that scale to the clock (docs/simulator.md).
ISSUE_ASM = 0.94
# KernelWriterAssembly's occupancy check (overflow error code 4): vgprPerCU = 65536 on every ISA (a GCN CU's
# 4 x 256 x 64 lanes; an RDNA CU's 2 x 1024 x 32)
TENSILE_VGPRS_PER_CU = 65536
SPILL_OPS_PER_K = 2  # scratch load + store of each spilled VGPR per k step (HIP-source kernels only)
CAMPING_STRIDE = 4096  # a leading dimension of a multiple of 4 KiB maps every column to one DRAM channel
L2_USABLE = 0.75  # share of L2 a GEMM's panels can keep (C, page tables, associativity)
# Share of a last-level cache (RDNA's Infinity Cache) a GEMM's working set can keep: assumed as L2_USABLE.
LLC_USABLE = 0.75
RUGGED_CONFIG = 0.05  # per-configuration unmodelled slowdown, uniform in [0, 5%]
RUGGED_SIZE = 0.02  # per-(configuration, size) unmodelled slowdown, uniform in [0, 2%]

PHYSICS_FILE = Path(__file__).resolve().parent / "physics.json"
# The RDNA ISA families (gfx10, gfx11: wave32, WGPs, WMMA) have physics of their own, fitted on RDNA rows
# (docs/simulator.md, "RDNA physics"); gfx9's stay in PHYSICS_FILE.
PHYSICS_RDNA_FILE = Path(__file__).resolve().parent / "physics-rdna.json"
RDNA_ISA_MAJOR = 10


def is_rdna(profile: Mapping[str, Any]) -> bool:
    """Whether a profile's ISA (``isa`` major version) is an RDNA family (10 and later)."""
    isa = profile.get("isa") or [0]
    return int(isa[0]) >= RDNA_ISA_MAJOR


def physics_file(profile: Mapping[str, Any]) -> Path:
    """The physics a profile's ISA family simulates with: :data:`PHYSICS_RDNA_FILE` for RDNA, else
    :data:`PHYSICS_FILE`."""
    return PHYSICS_RDNA_FILE if is_rdna(profile) else PHYSICS_FILE


@dataclass(frozen=True)
class Physics:
    """The fitted constants of the timing physics: they describe Tensile's VALU kernels on any GCN gfx9 CU,
    not one chip (chip constants are in the arch profile's ``timing`` block). ``oto calibrate`` fits them to
    recorded (solution, size, GFLOPS) rows and writes :data:`PHYSICS_FILE`; docs/simulator.md says what each
    one stands for and the bounds the fit keeps it in (:data:`PHYSICS_BOUNDS`)."""

    # VALU issue slots per MAC instruction relative to one ideal full-rate instruction, per datatype key
    # (A/B and compute type: SS, DD, HH, HS, CC, ZZ). Packing, op_sel shuffles, conversions.
    mac_cost: Mapping[str, float]
    issue_source: float  # share of VALU issue slots hipcc-compiled HIP-source kernels fill (asm: ISSUE_ASM)
    lds_efficiency: float  # share of the LDS peak that fragment reads and tile writes sustain
    lds_broadcast: float  # share of a wave's same-address fragment reads the LDS serves as one broadcast
    lds_overlap: float  # share of the smaller of VALU and LDS time hidden under the larger (with PLR)
    hide_max: float  # best overlap of memory work with VALU/LDS work across waves
    hide_waves: float  # waves per SIMD at which overlap reaches 1 - 1/e of hide_max
    edge_cost_0: float  # whole-kernel slowdown when M is not a multiple of the macro tile's dim 0
    edge_cost_1: float  # the same when N is not a multiple of its dim 1
    tail_cost: float  # extra cost of the K-tail iteration (guarded element loads) relative to a full one
    misaligned_cost: float  # extra memory time when A's or B's contiguous size is not a GLVW multiple
    camping: float  # DRAM efficiency when all workgroups stream one channel (4 KiB strides, StaggerU 0)
    gsu_atomic_cost: float  # extra C traffic of GlobalSplitU's compare-swap retries, per read-modify-write
    lsu_cost: float  # LDS passes of LocalSplitU's reduction per split, relative to an ideal one
    batch_overhead_cycles: float  # per-batch set-up of a workgroup (batch pointers/strides), in clocks
    # C/D traffic of the epilogue relative to ideal stores, per full datatype code (A, C/D and compute type:
    # SSS, HHS, HSS, ...; absent: 1). Fitted per type like mac_cost: the recorded HSS_BH rows write their
    # single-precision D at about a third of the bandwidth HHS_BH's half-precision D gets.
    store_cost: Mapping[str, float]
    source_launch_us: float  # extra launch overhead of a HIP-source kernel over an assembly one
    lds_latency_cycles: float  # issue-to-data latency of an LDS read (exposed when a k step is too short)
    lds_read_cycles: float  # fewest LDS clocks one wave's fragment read takes, however narrow (b128: 8)

    @classmethod
    def load(cls, path: str | Path = PHYSICS_FILE) -> Physics:
        data = json.loads(Path(path).read_text())
        if data.get("model_version") != MODEL_VERSION:
            raise ValueError(
                f"{path}: constants fitted for model {data.get('model_version')!r}, this is {MODEL_VERSION}"
                " (re-run oto calibrate)"
            )
        return cls.from_dict(data["physics"])

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Physics:
        names = {f.name for f in fields(cls)}
        unknown, missing = sorted(set(d) - names), sorted(names - set(d))
        if unknown or missing:
            raise ValueError(f"physics constants: unknown {unknown}, missing {missing}")
        return cls(**{k: (dict(v) if isinstance(v, Mapping) else float(v)) for k, v in d.items()})

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (dict(getattr(self, f.name)) if f.name in DATATYPE_TABLES else getattr(self, f.name))
                for f in fields(self)}  # fmt: skip


# Where the fit may put each constant (physical limits, not guesses of the answer).
PHYSICS_BOUNDS: dict[str, tuple[float, float]] = {
    "mac_cost": (1.0, 4.0),
    "issue_source": (0.3, 1.0),
    "lds_efficiency": (0.3, 1.0),
    "lds_broadcast": (0.0, 1.0),
    "lds_overlap": (0.0, 1.0),
    "hide_max": (0.3, 0.99),
    "hide_waves": (0.2, 8.0),
    "edge_cost_0": (0.0, 1.5),
    "edge_cost_1": (0.0, 1.5),
    "tail_cost": (0.0, 1.0),  # the tail loop is at most one more (guarded) iteration
    "misaligned_cost": (0.0, 1.0),  # a misaligned vector load straddles at most two cache lines
    "camping": (0.3, 1.0),
    "gsu_atomic_cost": (0.0, 4.0),
    "lsu_cost": (0.0, 4.0),
    "batch_overhead_cycles": (0.0, 4000.0),
    "store_cost": (1.0, 6.0),
    "source_launch_us": (0.0, 30.0),
    "lds_latency_cycles": (16.0, 400.0),
    # a wave64 read of 4 B/lane moves 256 B (2 clk at 128 B/clk), of 16 B/lane 1 KiB (8 clk): a narrower read
    # takes at least 2 clk (simgpu-3's sub-dword rule) and at most as long as a 16 B one
    "lds_read_cycles": (2.0, 8.0),
}
DATATYPE_TABLES = ("mac_cost", "store_cost")  # Physics fields that map a datatype key to a cost


def store_key(family: Family) -> str:
    """The key of :attr:`Physics.store_cost`: A, C/D and compute type chars (``HSS`` for HSS_BH)."""
    return family.a.char + family.dest.char + family.compute.char


def datatype_key(family: Family) -> str:
    """The key of :attr:`Physics.mac_cost`: the A/B and compute type chars (``HS`` for HHS_BH and HSS_BH).
    The summation loop's MACs depend on those two only; the C/D type changes the epilogue, not the loop."""
    return family.a.char + family.compute.char


@dataclass(frozen=True)
class OperatingPoint:
    """One of the profile's ``timing.operating_points``: the chip on another board or power limit, as
    multipliers of the profile's own timing figures (which are the default operating point, all 1)."""

    clock: Mapping[str, float]  # sustained clock multiplier per rate class (absent: 1)
    bandwidth: float = 1.0  # of memory.sustained_bandwidth_gbs
    memory_latency: float = 1.0  # of timing.memory_latency_ns
    launch: float = 1.0  # of timing.launch_us

    @classmethod
    def from_profile(cls, p: Mapping[str, Any], name: str | None) -> OperatingPoint:
        """The named operating point of a profile (None or ``default``: the profile's own figures)."""
        if name is None or name == DEFAULT_OPERATING_POINT:
            return cls(clock={})
        points = (p.get("timing") or {}).get("operating_points") or {}
        if name not in points:
            arch = p.get("arch", "the arch profile")
            known = ", ".join(sorted(points)) or "none"
            raise ValueError(
                f"{arch}: field 'timing.operating_points': no operating point {name!r} (declared: {known})"
            )
        op = points[name]
        return cls(
            clock={str(rc): float(v) for rc, v in (op.get("clock") or {}).items()},
            bandwidth=float(op.get("bandwidth", 1.0)),
            memory_latency=float(op.get("memory_latency", 1.0)),
            launch=float(op.get("launch", 1.0)),
        )


DEFAULT_OPERATING_POINT = "default"  # the profile's own timing figures (no entry in operating_points)


@dataclass(frozen=True)
class Chip:
    """The arch profile's ``timing`` block: constants of one chip that the physics cannot derive, at one of
    its operating points (default: the profile's own figures)."""

    launch_us: float  # launch + completion of one kernel as a back-to-back timing loop sees it
    memory_latency_ns: float  # DRAM latency seen by a shader (L2 miss to data)
    sustained_clock_mhz: Mapping[str, float]  # clock held under a long GEMM, per rate class
    llc_latency_ns: float = 0.0  # latency of a load the last-level cache serves (0: no such cache)

    @classmethod
    def from_profile(cls, p: Mapping[str, Any], operating_point: str | None = None) -> Chip:
        t = p.get("timing") or {}
        op = OperatingPoint.from_profile(p, operating_point)
        peak = float(p["clock_mhz"])
        clocks = {
            rc: float((t.get("sustained_clock_mhz") or {}).get(rc, peak)) * op.clock.get(rc, 1.0)
            for rc in p["rates"]
        }
        launch = float(t.get("launch_us", _timing_defaults()["launch_us"]))
        latency = float(t.get("memory_latency_ns", _timing_defaults()["memory_latency_ns"]))
        llc = (p.get("memory") or {}).get("last_level_cache")
        llc_latency = float(t.get("llc_latency_ns", latency)) if llc else 0.0
        return cls(
            launch_us=launch * op.launch,
            memory_latency_ns=latency * op.memory_latency,
            sustained_clock_mhz=clocks,
            llc_latency_ns=llc_latency * op.memory_latency,
        )


# The chip constants: the per-device figures `oto calibrate --chip` fits with the physics held
# (docs/simulator.md, "A chip's own constants"; the arch profile schema describes each field). Name -> where
# it lives in the profile; ``sustained_clock_mhz.<rate class>`` stands for one entry per rate class.
CHIP_CONSTANTS = {
    "launch_us": "timing.launch_us",
    "memory_latency_ns": "timing.memory_latency_ns",
    "sustained_bandwidth_gbs": "memory.sustained_bandwidth_gbs",
    "sustained_clock_mhz": "timing.sustained_clock_mhz",
    # only a profile with a memory.last_level_cache has these two
    "llc_latency_ns": "timing.llc_latency_ns",
    "llc_bandwidth_gbs": "memory.last_level_cache.sustained_bandwidth_gbs",
}
# Where a fit may put them. A GCN load that misses the L2 waits several hundred ns (micro-benchmarks of
# Vega 10 give ~500-700 ns), so DRAM latency stays above 300 ns; a clock or bandwidth is at most the
# datasheet peak (the roofline holds) and above 0.3 of it (lower, a fit has found a missing term, not a chip).
TIMING_BOUNDS = {"launch_us": (0.5, 50.0), "memory_latency_ns": (300.0, 2000.0)}
# A last-level cache hit: at least an L2 miss's fabric round trip (assumed 100 ns), at most a DRAM access.
LLC_LATENCY_BOUNDS = (100.0, 2000.0)
PEAK_SHARE_BOUNDS = (0.3, 1.0)


def chip_constants(profile: Mapping[str, Any]) -> dict[str, float]:
    """The chip constants of a profile as the simulated GPU reads them (absent ones at their defaults):
    launch, DRAM latency, sustained bandwidth and the sustained clock of every rate class of ``rates``."""
    chip = Chip.from_profile(profile)
    out = {
        "launch_us": chip.launch_us,
        "memory_latency_ns": chip.memory_latency_ns,
        "sustained_bandwidth_gbs": float(profile["memory"]["sustained_bandwidth_gbs"]),
    }
    out.update({f"sustained_clock_mhz.{rc}": v for rc, v in sorted(chip.sustained_clock_mhz.items())})
    llc = profile["memory"].get("last_level_cache")
    if llc:
        out["llc_latency_ns"] = chip.llc_latency_ns
        out["llc_bandwidth_gbs"] = float(llc["sustained_bandwidth_gbs"])
    return out


def chip_bounds(profile: Mapping[str, Any], name: str) -> tuple[float, float]:
    """Where a fit may put the chip constant ``name`` (a key of :func:`chip_constants`)."""
    lo, hi = PEAK_SHARE_BOUNDS
    if name.startswith("sustained_clock_mhz."):
        peak = float(profile["clock_mhz"])
        return lo * peak, hi * peak
    if name == "sustained_bandwidth_gbs":
        peak = float(profile["memory"]["peak_bandwidth_gbs"])
        return lo * peak, hi * peak
    if name == "llc_bandwidth_gbs":  # between the DRAM's peak and the cache's own
        return float(profile["memory"]["peak_bandwidth_gbs"]), float(
            profile["memory"]["last_level_cache"]["peak_bandwidth_gbs"]
        )
    if name == "llc_latency_ns":
        return LLC_LATENCY_BOUNDS
    return TIMING_BOUNDS[name]


# What chip_version reads of a profile: a stage that resolves the simulated backend for its provenance
# declares these (oto.backends.sim.SimBackend.PROVENANCE_FIELDS), or its profile view refuses the read
CHIP_VERSION_FIELDS = ("timing", "memory.sustained_bandwidth_gbs", "memory.last_level_cache", "calibration")


def chip_version(profile: Mapping[str, Any], hidden: Mapping[str, Any] | None = None) -> str:
    """Identity of the chip a simulated GPU runs, 12 hex digits: a hash of the profile's chip constants as
    written (``CHIP_VERSION_FIELDS``: the ``timing`` block with its operating points,
    ``memory.sustained_bandwidth_gbs``, an RDNA card's ``memory.last_level_cache``), the id of the calibration
    they come from, if any, and of a hidden device's constants (``sim.chip``). A simulated backend's
    provenance carries it, so records of two calibrations never count as the same experiment."""
    doc = {
        "timing": profile.get("timing") or {},
        "sustained_bandwidth_gbs": profile["memory"]["sustained_bandwidth_gbs"],
        **({"last_level_cache": llc} if (llc := profile["memory"].get("last_level_cache")) else {}),
        "calibration": (profile.get("calibration") or {}).get("id"),
        "hidden": dict(hidden or {}),
    }
    return hashlib.sha256(json.dumps(_plain(doc), sort_keys=True).encode()).hexdigest()[:12]


def _plain(value: Any) -> Any:
    """Numbers as one form (1800 and 1800.0 alike), mappings as plain dicts: equal figures hash alike,
    whether they come from a stage's profile view or the file."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return float(value)


def with_chip(profile: Mapping[str, Any], constants: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``profile`` with the given chip constants (``launch_us``, ``memory_latency_ns``,
    ``sustained_bandwidth_gbs``, ``sustained_clock_mhz: {rate class: MHz}``) in place of its own."""
    out = {**profile, "timing": dict(profile.get("timing") or {}), "memory": dict(profile["memory"])}
    for name, value in constants.items():
        if name == "sustained_bandwidth_gbs":
            out["memory"]["sustained_bandwidth_gbs"] = float(value)
        elif name == "sustained_clock_mhz":
            clocks = dict(out["timing"].get("sustained_clock_mhz") or {})
            clocks.update({rc: float(v) for rc, v in value.items()})
            out["timing"]["sustained_clock_mhz"] = clocks
        elif name in ("launch_us", "memory_latency_ns", "llc_latency_ns"):
            out["timing"][name] = float(value)
        elif name == "llc_bandwidth_gbs":
            out["memory"]["last_level_cache"] = {
                **out["memory"]["last_level_cache"],
                "sustained_bandwidth_gbs": float(value),
            }
        else:
            raise ValueError(f"not a chip constant: {name!r} (known: {', '.join(CHIP_CONSTANTS)})")
    return out


@functools.cache
def _timing_defaults() -> dict[str, float]:
    """The arch profile schema's defaults of the `timing` block (for profiles handed over as raw mappings)."""
    from oto.hardware.profile import load_schema

    props = load_schema()["properties"]["timing"]["properties"]
    return {k: float(v["default"]) for k, v in props.items() if isinstance(v.get("default"), int | float)}


@dataclass(frozen=True)
class Arch:
    """The fields of an arch profile the model reads (see arch_profiles/*.yaml)."""

    name: str
    cus: int
    simds: int
    lanes: int
    wave: int
    clock_mhz: float
    rates: Mapping[str, float]
    lds_per_cu: int
    max_lds_wg: int
    vgprs_max: int
    vgpr_budget: int
    vgpr_granule: int
    sgprs_max: int
    sgprs_per_simd: int
    max_waves: int
    max_wg_size: int
    l2_bytes: int
    sustained_gbs: float
    usable_bytes: int
    sgpr_granule: int = 16
    # RDNA's work-group processor: CUs that share one LDS (1: no WGP, a GCN CU is its own unit) and its LDS
    wgp_cus: int = 1
    wgp_lds: int = 0
    dual_issue: Mapping[str, float] = field(default_factory=dict)  # rate class -> factor only VOPD reaches
    wmma_rates: Mapping[str, float] = field(default_factory=dict)  # rate class -> rate of the WMMA path
    dots: frozenset[str] = frozenset()  # the ISA's dot-product instructions
    # a last-level cache between L2 and DRAM (RDNA's Infinity Cache; 0: none) and the bandwidth it sustains
    llc_bytes: int = 0
    llc_gbs: float = 0.0

    # The profile fields read below: a change to any other field leaves the simulated GPU as it was.
    PROFILE_FIELDS = (
        "arch", "compute_units", "simds_per_cu", "lanes_per_simd", "wavefront_size", "clock_mhz", "rates",
        "lds_bytes_per_cu", "max_lds_per_workgroup", "vgprs_per_lane_max", "vgpr_budget_per_simd",
        "vgpr_alloc_granule", "sgprs_max", "sgprs_per_simd", "sgpr_alloc_granule", "max_waves_per_simd",
        "max_workgroup_size", "l2_bytes", "memory.sustained_bandwidth_gbs",
        "memory.usable_device_memory_bytes", "timing", "workgroup_processor", "dual_issue", "wmma.rates",
        "dot_instructions", "memory.last_level_cache", "isa",
    )  # fmt: skip

    @classmethod
    def from_profile(cls, p: Mapping[str, Any], operating_point: str | None = None) -> Arch:
        bandwidth = OperatingPoint.from_profile(p, operating_point).bandwidth
        try:
            mem = p["memory"]
            wgp = p.get("workgroup_processor") or {}
            llc = mem.get("last_level_cache") or {}
            return cls(
                name=str(p["arch"] if "arch" in p else p.get("name", "unnamed")),
                cus=int(p["compute_units"]),
                simds=int(p["simds_per_cu"]),
                lanes=int(p["lanes_per_simd"]),
                wave=int(p["wavefront_size"]),
                clock_mhz=float(p["clock_mhz"]),
                rates=dict(p["rates"]),
                lds_per_cu=int(p["lds_bytes_per_cu"]),
                max_lds_wg=int(p["max_lds_per_workgroup"]),
                vgprs_max=int(p["vgprs_per_lane_max"]),
                vgpr_budget=int(p.get("vgpr_budget_per_simd", p["vgprs_per_lane_max"])),
                vgpr_granule=int(p.get("vgpr_alloc_granule", 4)),
                sgprs_max=int(p["sgprs_max"]),
                sgprs_per_simd=int(p.get("sgprs_per_simd", 800)),
                max_waves=int(p["max_waves_per_simd"]),
                max_wg_size=int(p["max_workgroup_size"]),
                l2_bytes=int(p["l2_bytes"]),
                sustained_gbs=float(mem["sustained_bandwidth_gbs"]) * bandwidth,
                usable_bytes=int(mem["usable_device_memory_bytes"]),
                sgpr_granule=int(p.get("sgpr_alloc_granule", 16)),
                wgp_cus=int(wgp.get("compute_units", 1)),
                wgp_lds=int(wgp.get("lds_bytes", p["lds_bytes_per_cu"])),
                dual_issue={str(k): float(v) for k, v in (p.get("dual_issue") or {}).items()},
                wmma_rates={str(k): float(v) for k, v in ((p.get("wmma") or {}).get("rates") or {}).items()},
                dots=frozenset(p.get("dot_instructions") or ()),
                llc_bytes=int(llc.get("bytes", 0)),
                llc_gbs=float(llc.get("sustained_bandwidth_gbs", 0.0)) * bandwidth,
            )
        except KeyError as e:
            raise ValueError(f"arch profile lacks field {e.args[0]!r} needed by the simulator") from None

    @property
    def lanes_per_cu(self) -> int:
        return self.simds * self.lanes

    # The unit that holds a workgroup. Tensile's kernels run in WGP mode on RDNA (its kernel descriptors
    # leave .amdhsa_workgroup_processor_mode at the assembler's GFX10+ default, and WMMA kernels require it:
    # Solution "WMMA only suppport on WGP mode"): a workgroup's waves may run on any SIMD of the WGP's CUs
    # and the WGP's LDS is shared by the workgroups of all of them, so the model's unit is the WGP, with
    # every per-CU resource times its CUs. On GCN the unit is the CU (wgp_cus 1).
    @property
    def units(self) -> int:
        return max(1, self.cus // self.wgp_cus)

    @property
    def unit_simds(self) -> int:
        return self.simds * self.wgp_cus

    @property
    def unit_lds(self) -> int:
        return self.wgp_lds if self.wgp_cus > 1 else self.lds_per_cu

    def vgpr_file(self, wave: int) -> tuple[int, int]:
        """(VGPRs per lane of one SIMD, allocation granule) for waves of ``wave`` lanes: the profile's
        figures are for its own wavefront size, and the register file's bytes are fixed (LLVM: wave64 on
        GFX10+ has half the VGPRs per lane of wave32, in blocks of half as many)."""
        scale = self.wave / wave
        return int(self.vgpr_budget * scale), max(1, int(self.vgpr_granule * scale))

    def peak_gflops(self, rate_class: str) -> float:
        return self.cus * self.lanes_per_cu * 2 * self.clock_mhz / 1000.0 * self.rates[rate_class]


def mac_rate(arch: Arch, family: Family, params: Mapping[str, Any]) -> float:
    """MACs per lane per clock the kernel's summation loop issues (relative to one FP32 FMA).

    A matrix-instruction kernel (``MatrixInstruction``, RDNA3's WMMA) runs at the profile's ``wmma.rates``
    of its class. A VALU kernel runs at the rate of the instructions Tensile writes for it
    (:func:`valu_rate`), except that a dot-product path is taken only by the kernels Tensile writes with
    it: HPA half reaches v_dot2_f32_f16 with LocalDotLayout > 1 and InnerUnroll 2 (KernelWriterAssembly),
    int8 (I8, one value per element) v_dot4_i32_i8 with LocalDotLayout 4 (MAC_I8_HPA's FMA_I8_HPA_DOT4;
    Tensile requires InnerUnroll = LocalDotLayout); every other HPA kernel issues v_mad_mix_f32, every other
    int8 one v_mad_i32_i24, at the FP32 rate."""
    if is_matrix_kernel(params):
        return float(arch.wmma_rates.get(family.rate_class) or valu_rate(arch, family.rate_class))
    rate = valu_rate(arch, family.rate_class)
    ldl = int(params.get("LocalDotLayout") or 1)
    if family.rate_class == "fp16_hpa":
        if not (ldl > 1 and int(params["InnerUnroll"]) == DOT2_INNER_UNROLL):
            rate = min(rate, valu_rate(arch, "fp32"))
    elif family.rate_class == "int8" and family.a.packing == 1 and ldl != DOT4_LAYOUT:
        rate = min(rate, valu_rate(arch, "fp32"))
    return rate


# MACs per lane per clock of each rate class's VALU path relative to single-issue FP32, where the profile's
# peak rate is a matrix path (RDNA3: rates.fp16_* and int8 are WMMA's): v_pk_fma_f16 packs two half FMAs;
# v_dot2_f32_f16 and v_dot4_i32_i8 (where the ISA has them, dot_instructions) two and four MACs; bf16 has no
# VALU dot path Tensile uses (its VALU kernels convert to FP32).
VALU_PACKING = {"fp16_packed": 2.0}
VALU_DOT = {"fp16_hpa": (2.0, ("v_dot2_f32_f16", "v_dot2c_f32_f16")),
            "int8": (4.0, ("v_dot4_i32_i8", "v_dot4c_i32_i8", "v_dot4_i32_iu8"))}  # fmt: skip
DOT4_LAYOUT = 4


def valu_rate(arch: Arch, rate_class: str) -> float:
    """The rate of a rate class's fastest VALU path as Tensile issues it: the profile's peak rate without
    its dual-issue factor (Tensile's kernels issue no VOPD pairs: ceilings.realistic_rate), or, where that
    peak is the WMMA path, the VALU instructions' own rate (:data:`VALU_PACKING`, :data:`VALU_DOT`)."""
    peak = float(arch.rates[rate_class])
    if arch.wmma_rates.get(rate_class) != peak:
        return peak / arch.dual_issue.get(rate_class, 1.0)
    single = float(arch.rates["fp32"]) / arch.dual_issue.get("fp32", 1.0)
    if rate_class in VALU_DOT:
        factor, instructions = VALU_DOT[rate_class]
        return single * (factor if arch.dots & set(instructions) else 1.0)
    return single * VALU_PACKING.get(rate_class, 1.0)


def is_matrix_kernel(params: Mapping[str, Any]) -> bool:
    """A kernel of matrix instructions (Tensile's MatrixInstruction set: on RDNA3, WMMA)."""
    return bool(params.get("MatrixInstruction"))


def as_family(family: Family | str) -> Family:
    return family if isinstance(family, Family) else Family.parse(family)


def with_defaults(params: Mapping[str, Any]) -> dict[str, Any]:
    """Fill oto's defaults and normalise list/bool forms without judging legality (that is legality.py's
    job), so shipped solutions with values outside PARAMS can still be timed."""
    out: dict[str, Any] = {}
    for name, p in PARAMS.items():
        v = params.get(name, p.default)
        if v is None:
            v = p.default
        if isinstance(v, list | tuple):
            v = [int(x) for x in v]
            if name == "WorkGroup" and len(v) == 2:
                v.append(1)
        elif isinstance(v, bool):
            v = int(v)
        out[name] = v
    # The knobs only some ISAs have (wave32, WMMA, dot layouts) and the parameters of a kernel's LDS layout
    # the model reads: kept only when they are not Tensile's default, so a kernel without them (every gfx9
    # kernel) keeps its identity and its per-configuration terms.
    # LocalReadVectorWidth is read of matrix kernels only, and a pad interval of 0 is the default's one pad
    # per line: gfx9 files of Tensile's later generations that spell them out keep their identity too.
    mi = bool(params.get("MatrixInstruction"))
    for name in ISA_KNOBS:
        v = params.get(name)
        if v is None or (name == "LocalReadVectorWidth" and not mi):
            continue
        v = [int(x) for x in v] if isinstance(v, list | tuple) else int(v)
        if name.startswith("LdsBlockSizePerPad") and v <= 0:
            continue
        if v != _normal(TENSILE_DEFAULTS[name]):
            out[name] = v
    return out


# Read from a kernel beyond PARAMS (oto.tensile.params.ISA_PARAMS and a few of EXTRA_PARAMS): its wave size,
# its matrix instruction, its dot-product layout, and how its tiles sit in LDS.
ISA_KNOBS = (
    "LocalDotLayout", "WavefrontSize", "MatrixInstruction", "TransposeLDS", "UnrollMajorLDSA",
    "UnrollMajorLDSB", "LocalReadVectorWidth", "LdsBlockSizePerPadA", "LdsBlockSizePerPadB",
)  # fmt: skip


def _normal(v: Any) -> Any:
    return [int(x) for x in v] if isinstance(v, list | tuple) else int(v)


def config_key(family: Family, params: Mapping[str, Any], arch: str, seed: int) -> int:
    """64-bit identity of (configuration, family, arch, seed): keys the deterministic per-config terms."""
    return _key(family, with_defaults(params), arch, seed)


def _key(family: Family, p: Mapping[str, Any], arch: str, seed: int) -> int:
    text = json.dumps([p, family.code, arch, seed], sort_keys=True, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def _unit(key: int, salt: int) -> float:
    """Deterministic uniform [0, 1) from a key and a salt (splitmix64 finaliser)."""
    return float(_mix(np.uint64(key) ^ np.uint64(salt))) / 2.0**64


def _mix(x: np.ndarray | np.uint64) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = np.asarray(x, dtype=np.uint64)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


@dataclass(frozen=True)
class Geometry:
    """Derived shape of one kernel (Tensile's derived parameters the model needs)."""

    tt0: int  # Tensile's ThreadTile0/1: C elements per thread (a matrix kernel's accumulators per lane)
    tt1: int
    wg0: int  # Tensile's SubGroup0/1: threads along each tile dimension (WorkGroup[0:2] for VALU kernels)
    wg1: int
    lsu: int
    mt0: int
    mt1: int
    du: int
    threads: int
    waves: int
    vw: int
    glvw_a: int
    glvw_b: int
    plr: int
    pgr: int
    gsu: int
    iu: int
    asm: bool
    tlu_a: bool
    tlu_b: bool
    pad_a: int
    pad_b: int
    loads: int  # global load instructions per thread per iteration (A + B)
    wave: int = 64  # the kernel's wavefront size (Tensile's WavefrontSize)
    # A matrix-instruction kernel (RDNA3's WMMA): its wave tile (blocks of MatrixInstM x MatrixInstN per wave
    # along each dimension) and the instruction's M, N
    mi: bool = False
    wt0: int = 0
    wt1: int = 0
    mi_m: int = 0
    mi_n: int = 0
    unroll_major_a: bool = False  # the tile sits in LDS with the unroll dimension contiguous
    unroll_major_b: bool = False
    read_vw: int = 0  # elements one local read takes per lane (LocalReadVectorWidth; VALU: VectorWidth)
    pad_block_a: int = 0  # elements between two pads (LdsBlockSizePerPad; 0: one pad per line)
    pad_block_b: int = 0


def kernel_wave(p: Mapping[str, Any]) -> int:
    """The kernel's wavefront size: its WavefrontSize, Tensile's default 64 when it has none."""
    return int(p.get("WavefrontSize") or TENSILE_DEFAULTS["WavefrontSize"])


def geometry(family: Family, p: Mapping[str, Any], pattern: str) -> Geometry:
    """The kernel's geometry from its knobs (as :func:`with_defaults` gives them)."""
    wave = kernel_wave(p)
    wg0, wg1, lsu = p["WorkGroup"]
    du = int(p["DepthU"])
    threads = wg0 * wg1 * lsu
    mi = is_matrix_kernel(p)
    if mi:  # Tensile reads ThreadTile/WorkGroup of a matrix kernel as its wave tile and wave group
        d = mi_geometry({**p, "WavefrontSize": wave})
        tt0, tt1, wg0, wg1 = d["ThreadTile0"], d["ThreadTile1"], d["SubGroup0"], d["SubGroup1"]
        mt0, mt1 = d["MacroTile0"], d["MacroTile1"]
        (wt0, wt1), (mi_m, mi_n) = d["MIWaveTile"], d["MIBlock"][:2]
    else:
        tt0, tt1 = p["ThreadTile"]
        mt0, mt1 = tt0 * wg0, tt1 * wg1
        wt0 = wt1 = mi_m = mi_n = 0
    vw = int(p["VectorWidth"])
    grvw = int(p["GlobalReadVectorWidth"])
    grvw = vw if grvw == -1 else grvw

    def glvw(mt: int) -> int:
        # Tensile shrinks the load vector when one pass of the workgroup would over-fetch the tile.
        g = grvw
        while g > 1 and mt * du < threads * g:
            g //= 2
        return max(1, g)

    ga, gb = glvw(mt0), glvw(mt1)
    if family.initial_strides_ab:  # a run-time element stride: every element is its own load
        ga = gb = 1
    tlu_a, tlu_b = pattern[0] == "N", pattern[1] == "T"
    # Tensile's UnrollMajorLDS: TransposeLDS stores a tensor read along the unroll dimension as it is
    transpose = bool(p.get("TransposeLDS", 0))
    um_a = bool(p.get("UnrollMajorLDSA", 0)) or (transpose and not tlu_a)
    um_b = bool(p.get("UnrollMajorLDSB", 0)) or (transpose and not tlu_b)
    pads = []
    for key, tlu in (("LdsPadA", tlu_a), ("LdsPadB", tlu_b)):
        pad = int(p[key])
        pads.append((0 if tlu else vw) if pad == -1 else pad)
    blocks = [max(0, int(p.get(f"LdsBlockSizePerPad{t}", -1))) // family.a.bytes for t in "AB"]
    lrvw = int(p.get("LocalReadVectorWidth", -1))
    # Tensile's LoopIters (Solution: LoopUnroll / InnerUnroll, over MatrixInstK for a matrix kernel): PLR
    # reads at most LoopIters - 1 steps ahead, and a register set is allocated per step read ahead
    mi_k = int(p["MatrixInstruction"][2]) if mi else 1
    loops = max(1, du // lsu // int(p["InnerUnroll"]) // mi_k)
    loads = math.ceil(mt0 * du / (threads * ga)) + math.ceil(mt1 * du / (threads * gb))
    return Geometry(
        tt0, tt1, wg0, wg1, lsu, mt0, mt1, du, threads, math.ceil(threads / wave), vw, ga, gb,
        plr=min(int(p["PrefetchLocalRead"]), loops - 1), pgr=int(p["PrefetchGlobalRead"]),
        gsu=int(p["GlobalSplitU"]), iu=int(p["InnerUnroll"]), asm=p["KernelLanguage"] == "Assembly",
        tlu_a=tlu_a, tlu_b=tlu_b, pad_a=pads[0], pad_b=pads[1], loads=loads, wave=wave, mi=mi, wt0=wt0,
        wt1=wt1, mi_m=mi_m, mi_n=mi_n, unroll_major_a=um_a, unroll_major_b=um_b,
        read_vw=lrvw if lrvw > 0 else vw, pad_block_a=blocks[0], pad_block_b=blocks[1],
    )  # fmt: skip


def _lds_elements(mt: int, du: int, pad: int, align: int | None, interval: int = 0) -> int:
    """Tensile's getLdsNumElements: the tile plus one pad per ``interval`` elements (LdsBlockSizePerPad),
    else per line (a MacroTile-long row; ``du``-long for an unroll-major tile: pass ``interval=du``)."""
    n = mt * du
    n += (n // (interval or mt)) * pad
    return -(-n // align) * align if align else n


class SimGPU:
    """The deterministic part of the simulated GPU for one arch profile.

    ``seed`` picks the virtual chip: it enters the per-configuration ruggedness and validation-failure hash,
    so the landscape is fixed for a seed and differs between seeds. ``operating_point`` names one of the
    profile's ``timing.operating_points`` (None: the profile's own timing figures).
    """

    def __init__(
        self,
        profile: Mapping[str, Any],
        seed: int = 0,
        physics: Physics | None = None,
        chip: Chip | None = None,
        operating_point: str | None = None,
    ):
        self.arch = Arch.from_profile(profile, operating_point)
        self.chip = chip if chip is not None else Chip.from_profile(profile, operating_point)
        self.physics = physics if physics is not None else _default_physics(physics_file(profile))
        self.seed = int(seed)
        self.operating_point = operating_point or DEFAULT_OPERATING_POINT
        self._profile = profile

    @property
    def operating_points(self) -> tuple[str, ...]:
        """Names of the operating points the profile declares besides its own figures."""
        return tuple(sorted((self._profile.get("timing") or {}).get("operating_points") or {}))

    def at(self, operating_point: str | None) -> SimGPU:
        """The same simulated GPU (profile, physics, seed) at another of the profile's operating points."""
        return SimGPU(self._profile, self.seed, self.physics, operating_point=operating_point)

    # ---------------------------------------------------------------- resources and build
    def resources(
        self, family: Family | str, params: Mapping[str, Any], pattern: str = "NN"
    ) -> dict[str, int]:
        """VGPRs, SGPRs and LDS bytes of the kernel, as KernelWriterAssembly would allocate them."""
        f, p = as_family(family), with_defaults(params)
        return self._resources(f, p, geometry(f, p, pattern))

    def _resources(self, f: Family, p: Mapping[str, Any], g: Geometry) -> dict[str, int]:
        r_in, r_c = f.a.bytes / 4, f.compute.bytes / 4
        acc = g.tt0 * g.tt1 * r_c  # C accumulators
        # A/B fragments, one set per prefetched read: a thread tile's row and column, or a matrix kernel's
        # MIInputPerThread (the instruction's K) elements per block of its wave tile
        per_k = (g.wt0 + g.wt1) * MI_INPUT_PER_THREAD if g.mi else g.tt0 + g.tt1
        frag = per_k * r_in * (1 + g.plr) * g.iu
        g2l = (g.mt0 + g.mt1) * g.du / g.threads * r_in * (2 if g.pgr == 2 else 1)  # global->LDS staging
        addr = 5 + g.loads  # kernel args, serial ids, one buffer offset per load (fit to §6.4: exact)
        atomics = 4 if g.gsu > 1 else 0  # compare-swap old/new values
        vgpr = math.ceil(acc + frag + g2l + addr + atomics)
        if not g.asm:
            vgpr = math.ceil(vgpr * 1.1)  # hipcc keeps more temporaries alive
        # SGPRs: kernel args and loop state; alpha/beta width; WGM, StaggerU, GSU, PGR2 add bookkeeping.
        ab_regs = 2 * math.ceil(f.compute.bytes / 4 if not f.hpa else 1)
        sgpr = 56 + ab_regs + 3 * (p["WorkGroupMapping"] > 1) + 2 * (p["StaggerU"] > 0)
        sgpr += 6 * (g.gsu > 1) + 4 * (g.pgr == 2) + 2 * (g.lsu > 1)
        return {"vgpr": vgpr, "sgpr": sgpr, "lds_bytes": self._lds_bytes(f, p, g)}

    def _lds_bytes(self, f: Family, p: Mapping[str, Any], g: Geometry) -> int:
        bpe = f.a.bytes
        align = max(1, 256 // bpe)
        ia = g.pad_block_a or (g.du if g.unroll_major_a else g.mt0)
        ib = g.pad_block_b or (g.du if g.unroll_major_b else g.mt1)
        a_al = _lds_elements(g.mt0, g.du, g.pad_a, align, ia)
        b_al = _lds_elements(g.mt1, g.du, g.pad_b, align, ib)
        b = _lds_elements(g.mt1, g.du, g.pad_b, None, ib)
        single = a_al + b
        double = (1 << (a_al + b_al - 1).bit_length()) + a_al + b if g.pgr else single
        one = int(p["1LDSBuffer"])
        if one == -1:
            one = int(double * bpe > self.arch.max_lds_wg)
        ab = single if (one == 1 or not g.pgr) else double
        reduction = (f.compute.bytes // bpe) * g.lsu * g.mt0 * g.mt1 if g.lsu > 1 else 0
        floor = self.arch.max_lds_wg // 40 // f.dest.bytes  # Tensile's MaxOccupancy (40) floor
        return max(ab, reduction, floor) * bpe

    def build_outcome(
        self, family: Family | str, params: Mapping[str, Any], pattern: str = "NN"
    ) -> tuple[str, str, dict[str, int]]:
        """(status, reason, resources): status is one of backends.base.BUILD_CLASSES."""
        f, p = as_family(family), with_defaults(params)
        a = self.arch
        g = geometry(f, p, pattern)
        res = self._resources(f, p, g)
        if g.threads > a.max_wg_size:
            return "rejected", f"NumThreads {g.threads} > max workgroup size {a.max_wg_size}", res
        if g.threads % g.wave:
            return "rejected", f"NumThreads {g.threads} is not a multiple of the wavefront ({g.wave})", res
        if res["lds_bytes"] > a.max_lds_wg:
            return "rejected", f"Kernel Uses {res['lds_bytes']} > {a.max_lds_wg} bytes of LDS", res
        if g.asm:  # hipcc spills to scratch instead of failing; only the asm writer overflows
            v = res["vgpr"]
            if v > a.vgprs_max:
                return (
                    "register_overflow",
                    f"overflowed resources. errorCode=1, msg='too many vgprs', vgprs={v}",
                    res,
                )
            per_thread = TENSILE_VGPRS_PER_CU // g.threads
            if v > per_thread:
                return (
                    "register_overflow",
                    f"overflowed resources. errorCode=4, msg='reduce occupancy: vgprs={v} > "
                    f"{TENSILE_VGPRS_PER_CU}/NumThreads={per_thread}'",
                    res,
                )
            if res["sgpr"] > a.sgprs_max:
                return (
                    "register_overflow",
                    f"overflowed resources. errorCode=2, msg='too many sgprs', sgprs={res['sgpr']}",
                    res,
                )
        return "ok", "", res

    def fails_validation(self, family: Family | str, params: Mapping[str, Any], rate: float) -> bool:
        """Deterministic: a fraction ``rate`` of configurations compute wrong results (at every size)."""
        f = as_family(family)
        return _unit(config_key(f, params, self.arch.name, self.seed), 0x5A11D) < rate

    # ---------------------------------------------------------------- timing
    def peak_gflops(self, family: Family | str) -> float:
        return self.arch.peak_gflops(as_family(family).rate_class)

    def problem_bytes(self, family: Family | str, m, n, batch, k) -> np.ndarray:
        """Device memory the problem needs: A, B, C and D buffers."""
        f = as_family(family)
        m, n, batch, k = _arrays(m, n, batch, k)
        return batch * ((m * k + k * n) * f.a.bytes + 2 * m * n * f.dest.bytes)

    def bound_time_us(self, family: Family | str, m, n, batch, k) -> np.ndarray:
        """Roofline lower bound: peak compute or compulsory bytes at sustained bandwidth, the slower one."""
        f = as_family(family)
        m, n, batch, k = _arrays(m, n, batch, k)
        flops = f.flops_per_mac * m * n * batch * k
        compute = flops / (self.peak_gflops(f) * 1e3)
        traffic = self.problem_bytes(f, m, n, batch, k) / (self.arch.sustained_gbs * 1e3)
        return np.maximum(compute, traffic)

    def occupancy(self, family: Family | str, params: Mapping[str, Any], pattern: str = "NN") -> int:
        """Workgroups one unit (a CU; on RDNA a WGP, :attr:`Arch.units`) holds at once: the tightest of VGPRs,
        SGPRs, LDS, wave slots and WG slots."""
        f, p = as_family(family), with_defaults(params)
        g = geometry(f, p, pattern)
        return self._occupancy(g, self._resources(f, p, g))

    def _occupancy(self, g: Geometry, res: Mapping[str, int]) -> int:
        a = self.arch
        budget, granule = a.vgpr_file(g.wave)
        vg = -(-min(res["vgpr"], a.vgprs_max) // granule) * granule
        w_vgpr = min(a.max_waves, budget // vg)
        sg = a.sgpr_granule
        w_sgpr = min(a.max_waves, a.sgprs_per_simd // (-(-res["sgpr"] // sg) * sg))
        # The dispatcher places waves round-robin over the SIMDs, so workgroups of fewer waves than SIMDs
        # fill all of them (simgpu-1 put each on one SIMD and so made 64-thread workgroups 4x rarer).
        simds = a.unit_simds
        limits = [
            w_vgpr * simds // g.waves,
            w_sgpr * simds // g.waves,
            a.unit_lds // max(1, res["lds_bytes"]),
            a.max_waves * simds // g.waves,
            MAX_WG_PER_CU * a.wgp_cus,
        ]
        return max(1, min(limits))

    def breakdown(
        self, family: Family | str, params: Mapping[str, Any], m, n, batch, k, pattern: str = "NN"
    ) -> dict[str, np.ndarray]:
        """Every term of the timing model, vectorised over sizes (see docs/simulator.md)."""
        f, p = as_family(family), with_defaults(params)
        a, ph, chip = self.arch, self.physics, self.chip
        g = geometry(f, p, pattern)
        res = self._resources(f, p, g)
        occ = self._occupancy(g, res)
        m, n, batch, k = _arrays(m, n, batch, k)
        eb, eb_out, eb_c = f.a.bytes, f.dest.bytes, f.compute.bytes
        rate = mac_rate(a, f, p)
        clock_mhz = chip.sustained_clock_mhz[f.rate_class]
        fmas = f.flops_per_mac // 2  # real FMAs per MAC (4 for complex, 4 int8 ones for Int8x4)
        cyc = g.wave / a.lanes  # clocks one VALU instruction occupies its SIMD
        simds, scale = a.unit_simds, a.wgp_cus  # the unit (CU, or RDNA's WGP: Arch.units) and its CUs

        # Tile, split and wave quantisation: the busiest unit does ceil(WGs / units) workgroups.
        tiles0, tiles1 = np.ceil(m / g.mt0), np.ceil(n / g.mt1)
        wgs = tiles0 * tiles1 * batch * g.gsu
        k_split = np.ceil(k / g.gsu)
        iters = np.maximum(1.0, np.ceil(k_split / g.du))
        # The last iteration loads guarded elements (Tensile's LoopTail); a K below DepthU runs the tail loop
        # alone, as one iteration (so a deeper K is never cheaper).
        tail = ((k_split % g.du) > 0) & (k_split > g.du)
        wg_cu = np.ceil(wgs / a.units)
        resident = np.minimum(occ, wg_cu)
        res_waves = resident * g.waves
        simd_util = res_waves / (simds * np.ceil(res_waves / simds))
        waves_per_simd = res_waves / simds

        # VALU cycles of one workgroup-iteration, on the whole CU.
        macs_thread = g.tt0 * g.tt1 * (g.du / g.lsu) * fmas  # real FMAs per thread per iteration
        mac_cyc = cyc * macs_thread / rate * ph.mac_cost.get(datatype_key(f), 1.0)
        extra = VALU_OVERHEAD_INSTR + g.loads
        # Matrix instructions and v_dot4 take packed operands; other bf16/int8 MACs unpack them first.
        if not (g.mi or (f.rate_class == "int8" and rate >= DOT4_RATE)):
            unpack = UNPACK_PER_OPERAND.get(f.rate_class, 0.0) * f.a.packing
            extra += unpack * (g.tt0 + g.tt1) * g.du / g.lsu
        if not g.asm and res["vgpr"] > a.vgprs_max:  # hipcc spills: a scratch load + store per k step
            extra += SPILL_OPS_PER_K * (res["vgpr"] - a.vgprs_max) * g.du / g.lsu
        issue = ISSUE_ASM if g.asm else ph.issue_source
        valu = g.waves * (mac_cyc + cyc * extra) / issue / simds / simd_util

        # LDS cycles: fragment reads (sub-dword reads lose bandwidth; lanes of a wave that read the same
        # address are served by one broadcast), tile writes (a transposed, unpadded write of a non-TLU tensor
        # serialises on banks when its row stride is a multiple of 128 bytes).
        # A matrix kernel's lane reads one row of each block of its wave tile, K elements deep, and the two
        # halves of a wave32 read the same rows (WMMA replicates its operands): MatrixInstM (N) distinct rows.
        if g.mi:
            lanes0, lanes1, per_a, per_b = g.mi_m, g.mi_n, g.wt0, g.wt1
        else:  # distinct dim-0 (dim-1) thread indices in one wave (dim 0 is fastest)
            lanes0, lanes1 = min(g.wg0, g.wave), min(g.wg1, max(1, g.wave // g.wg0))
            per_a, per_b = g.tt0, g.tt1
        share_a = 1 - ph.lds_broadcast * (1 - lanes0 / g.wave)  # share of A reads that cost bandwidth
        share_b = 1 - ph.lds_broadcast * (1 - lanes1 / g.wave)

        # A wave's fragment read moves VW elements per lane (a matrix kernel: LocalReadVectorWidth from an
        # unroll-major tile, else one element at a time); reads narrower than 16 B/lane take at least
        # lds_read_cycles (address processing per instruction), so they use less of the LDS bandwidth.
        def read_eff(width: int) -> float:
            read_clk = g.wave * min(16, width * eb) / LDS_BYTES_PER_CLK
            return read_clk / max(read_clk, ph.lds_read_cycles)

        if g.mi:  # per lane and block: one row, MatrixInstK deep
            width_a, width_b = (g.read_vw if um else 1 for um in (g.unroll_major_a, g.unroll_major_b))
            rows = g.threads / g.lsu * g.du * eb  # bytes of one element per thread over the iteration
            read_bytes = rows * (per_a * share_a / read_eff(width_a) + per_b * share_b / read_eff(width_b))
        else:  # each thread reads its thread tile's row of A and column of B per k
            read_bytes = (g.mt0 * g.wg1 * share_a + g.mt1 * g.wg0 * share_b) * g.du * eb / read_eff(g.vw)

        def conflict(transposed: bool, line: int, pad: int, glvw: int) -> float:
            # a tile written to LDS along another dimension than it is read from memory scatters each load
            # vector; unpadded, on one bank when its LDS line is a multiple of 128 bytes
            if not transposed or glvw == 1:
                return 1.0
            if pad == 0:
                return float(glvw) if (line * eb) % 128 == 0 else 1.0 + (glvw - 1) / 4
            return 1.0 if pad >= glvw else 1.0 + (glvw - 1) / 8

        # VALU tiles sit in LDS tile-major, so the one read along the unroll dimension (non-TLU) is written
        # transposed; an unroll-major tile (a matrix kernel's TransposeLDS) the other way round.
        write_bytes = (
            (
                g.mt0 * conflict(g.tlu_a == g.unroll_major_a, g.du if g.unroll_major_a else g.mt0, g.pad_a,
                                 g.glvw_a)
                + g.mt1 * conflict(g.tlu_b == g.unroll_major_b, g.du if g.unroll_major_b else g.mt1, g.pad_b,
                                   g.glvw_b)
            )
            * g.du
            * eb
        )  # fmt: skip
        lds = (read_bytes + write_bytes) / (LDS_BYTES_PER_CLK * scale * ph.lds_efficiency)
        if not g.asm:
            lds = lds / issue

        # DRAM traffic. A is re-read once per group of N-tiles that run together (WorkGroupMapping bands of
        # concurrent workgroups share it in L2), B once per group of M-tiles; panels that fit in L2 are reused
        # across later workgroups too. C and D move in the epilogue (below).
        conc = np.minimum(wgs, a.units * occ)
        g1 = np.minimum(tiles1, p["WorkGroupMapping"])
        g0 = np.clip(np.ceil(conc / g1), 1, tiles0)
        l2 = L2_USABLE * a.l2_bytes
        band = (g0 * g.mt0 + g1 * g.mt1) * k_split * eb
        fit_band = np.clip(l2 / band, 0, 1) ** 2
        fit_all = np.clip(l2 / ((m + n) * k * eb), 0, 1) ** 2
        reuse_a = g1 + (tiles1 - g1) * fit_all
        reuse_b = g0 + (tiles0 - g0) * np.maximum(fit_band, fit_all)
        a_bytes = m * k * eb * tiles1 / reuse_a
        b_bytes = n * k * eb * tiles0 / reuse_b
        dram = batch * (a_bytes + b_bytes)
        # Coalescing: sub-dword global loads waste DRAM bursts; 4 KiB leading strides camp on one channel
        # unless StaggerU staggers the start of each workgroup's summation loop; a contiguous size that is
        # not a multiple of the load vector splits loads across cache lines.
        glvw_bytes = min(g.glvw_a, g.glvw_b) * eb
        bw_eff = min(1.0, 0.7 + 0.1 * math.log2(max(1, glvw_bytes)))
        ld_a, ld_b = (m if pattern[0] == "N" else k), (k if pattern[1] == "N" else n)
        camping = ((ld_a * eb) % CAMPING_STRIDE == 0) | ((ld_b * eb) % CAMPING_STRIDE == 0)
        bw_eff = bw_eff * np.where(camping & (p["StaggerU"] == 0), ph.camping, 1.0)
        misaligned = ((ld_a % g.glvw_a) != 0) | ((ld_b % g.glvw_b) != 0)
        bw_eff = bw_eff / np.where(misaligned, 1 + ph.misaligned_cost, 1.0)
        clock_hz = clock_mhz * 1e6
        active = np.minimum(a.units, wgs)
        # A last-level cache (RDNA's Infinity Cache) keeps the share of the working set it holds: Tensile's
        # client runs each problem back to back, so those bytes come at the cache's bandwidth and latency.
        sustained_gbs, latency_ns = a.sustained_gbs, chip.memory_latency_ns
        if a.llc_bytes:
            working_set = batch * ((m + n) * k * eb + 2 * m * n * eb_out)
            hit = np.clip(LLC_USABLE * a.llc_bytes / working_set, 0.0, 1.0)
            sustained_gbs = 1.0 / (hit / a.llc_gbs + (1 - hit) / a.sustained_gbs)
            latency_ns = hit * chip.llc_latency_ns + (1 - hit) * chip.memory_latency_ns
        cu_share = sustained_gbs * 1e9 / active / clock_hz  # B/clk of DRAM bandwidth per busy unit
        cu_bw = np.minimum(L1_BYTES_PER_CLK * scale, cu_share * bw_eff)
        mem = dram / (wgs * iters) / cu_bw
        # Overlap: with more resident waves (and local-read prefetch) VALU, LDS and memory work of different
        # waves overlap; the remainder serialises. A bigger thread tile gives each wave more independent FMAs
        # to issue while its own loads are in flight (instruction-level parallelism counts like waves).
        ilp = math.sqrt(g.tt0 * g.tt1 * fmas / 16)
        w_eff = waves_per_simd * ilp * (1.0 if g.plr >= 1 else 0.6)
        hide = ph.hide_max * (1 - np.exp(-w_eff / ph.hide_waves))
        # VALU and LDS are separate pipes that Tensile's schedule (local reads prefetched ahead of the MACs
        # that use them) overlaps even with one wave per SIMD; memory overlaps only as far as waves hide it.
        overlap_lds = ph.lds_overlap * (1.0 if g.plr >= 1 else 0.5)
        alu = np.maximum(valu, lds) + (1 - overlap_lds) * np.minimum(valu, lds)
        top = np.maximum(alu, mem)
        c = top + (1 - hide) * np.minimum(alu, mem)

        # Latency chain of one workgroup: a global load prefetched PGR iterations ahead hides behind that
        # much work; resident workgroups fill each other's stalls (throughput = min(1/c, R/chain)).
        lat = latency_ns * clock_mhz / 1e3
        exposed = np.maximum(0.0, lat - g.pgr * c)
        one_buffer = int(p["1LDSBuffer"]) == 1 and g.pgr
        # Each k step's MACs wait for that step's LDS reads, issued 1 + PLR steps ahead: a wave whose steps
        # are shorter than the LDS latency stalls on it (small thread tiles, few waves per SIMD to hide it).
        # (a matrix kernel's step is its instruction's K: one local read per block and MatrixInstK)
        k_unit = MI_INPUT_PER_THREAD if g.mi else 1
        k_step = cyc * g.tt0 * g.tt1 * k_unit * fmas / rate * ph.mac_cost.get(datatype_key(f), 1.0) / issue
        waves_simd_wg = max(1.0, g.waves / simds)  # one workgroup's waves sharing a SIMD
        lds_stall = max(0.0, ph.lds_latency_cycles - (1 + g.plr) * k_step * waves_simd_wg)
        lds_exposed = lds_stall * g.du / k_unit / g.lsu / g.iu
        chain = c + exposed + lds_exposed + BARRIER_CYCLES * (1.5 if one_buffer else 1.0) / g.iu
        t_iter = np.maximum(c, chain / resident)
        # Sizes that are not tile multiples: the partial tile's lanes run anyway (tiles are rounded up above;
        # Tensile's ShiftPtr keeps the edge loads in bounds without branches), edge_cost_* is any whole-kernel
        # extra on top (the fit finds none); the K tail costs tail_cost iterations per workgroup.
        edge = 1 + ph.edge_cost_0 * ((m % g.mt0) > 0) + ph.edge_cost_1 * ((n % g.mt1) > 0)
        loop = wg_cu * (iters + ph.tail_cost * tail) * t_iter * edge
        rounds = np.ceil(wg_cu / resident)
        setup = lat + np.where(batch > 1, ph.batch_overhead_cycles, 0.0)
        prologue = setup * (1 + (rounds - 1) * (1 - hide))
        # Epilogue: each workgroup reads its C tile (beta) and writes D after its summation loop. The
        # resident workgroups of a round finish together, so one round's C/D traffic at the CU's share of
        # the bandwidth is exposed; later rounds overlap other workgroups' loops as far as waves hide it.
        # With GSU > 1 each split adds its partial tile to D in the compute type with compare-swap loops
        # (a read-modify-write, plus the retries of contended lines: gsu_atomic_cost).
        store = ph.store_cost.get(store_key(f), 1.0)
        if g.gsu == 1:
            cd_bytes = 2 * g.mt0 * g.mt1 * eb_out * store
        else:
            cd_bytes = 2 * g.mt0 * g.mt1 * eb_c * (1 + ph.gsu_atomic_cost) * store
        store_eff = min(1.0, 0.7 + 0.1 * math.log2(g.vw * eb_out))
        cd_bw = np.minimum(L1_BYTES_PER_CLK * scale, cu_share * store_eff)
        epi_round = EPILOGUE_CYCLES + resident * cd_bytes / cd_bw
        epilogue = epi_round * (1 + (rounds - 1) * (1 - hide))
        reduction = (
            (ph.lsu_cost * 2 * g.mt0 * g.mt1 * g.lsu * eb_c / LDS_BYTES_PER_CLK / scale + BARRIER_CYCLES)
            * wg_cu
            if g.lsu > 1
            else 0
        )
        # Nothing beats the CU's share of the bandwidth for all its bytes (A/B, C/D and GSU traffic).
        streamed = (dram / wgs / cu_bw + cd_bytes / cd_bw) * wg_cu
        cycles = np.maximum(loop + prologue + epilogue + reduction, streamed)
        if g.gsu > 1:  # the beta pass over C/D, a kernel of its own launched first, streams at full bandwidth
            cycles = cycles + batch * 2 * m * n * eb_out / (sustained_gbs * 1e9 / clock_hz)

        key = _key(f, p, a.name, self.seed)
        rugged = (1 + RUGGED_CONFIG * _unit(key, 0xC0F)) * (1 + RUGGED_SIZE * _size_unit(key, m, n, batch, k))
        launch = chip.launch_us * (2 if g.gsu > 1 else 1)  # GSU > 1 launches the beta-scaling kernel first
        if not g.asm:
            launch += ph.source_launch_us
        time_us = launch + cycles / clock_mhz * rugged
        busy = np.maximum(valu, np.maximum(lds, mem))
        return {
            "time_us": time_us,
            "launch_us": np.full_like(time_us, launch),
            "cycles": cycles,
            "clock_mhz": np.full_like(time_us, clock_mhz),
            "valu_cycles": valu,
            "lds_cycles": lds,
            "mem_cycles": mem,
            "hide": hide,
            "exposed_latency": exposed,
            "lds_stall_cycles": np.full_like(time_us, lds_exposed),
            "dram_bytes": dram + wgs * cd_bytes + (batch * 2 * m * n * eb_out if g.gsu > 1 else 0),
            "workgroups": wgs,
            "wg_per_cu": wg_cu,
            "resident": resident,
            "occupancy": np.full_like(time_us, occ),
            "rugged": rugged,
            # Share of the busy time the shader clock drives (memory-bound kernels follow the DRAM clock).
            "alu_fraction": np.maximum(valu, lds) / busy,
        }

    def true_time_us(
        self, family: Family | str, params: Mapping[str, Any], m, n, batch, k, pattern: str = "NN"
    ) -> np.ndarray:
        """Noise-free time of one launch in microseconds (arrays of sizes broadcast together)."""
        return self.breakdown(family, params, m, n, batch, k, pattern)["time_us"]


def _arrays(*xs) -> list[np.ndarray]:
    arrs = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in xs))
    if any(np.any(x < 1) for x in arrs):
        raise ValueError("GEMM sizes m, n, batch, k must all be >= 1")
    return arrs


def _size_unit(key: int, m, n, batch, k) -> np.ndarray:
    h = np.uint64(key)
    for x in (m, n, batch, k):
        h = _mix(h ^ np.asarray(x, dtype=np.uint64))
    return h.astype(np.float64) / 2.0**64


@functools.cache
def _default_physics(path: Path = PHYSICS_FILE) -> Physics:
    """A shipped fit (read once per process: the files are package data and never change at run time)."""
    return Physics.load(path)

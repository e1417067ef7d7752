"""Performance ceilings of an arch profile: theoretical peaks per datatype and a roofline per problem size.

Selection compares kernels against the roofline (``pct_ceiling``): no kernel beats the peak of its rate class
or moves its compulsory bytes faster than the sustained memory bandwidth.

Every ceiling comes as two figures (``ceilings.yaml``): the **theoretical** one, the chip's peak at its peak
clock by its fastest instruction path (AMD's published peak: RDNA3's dual issue and WMMA included), and the
**realistic** one, what the kernels oto tunes can reach: the instructions Tensile's kernels issue (one VALU
instruction per clock, no VOPD dual issue; WMMA and dot products where the ISA has them) at the clock a long
GEMM holds (``timing.sustained_clock_mhz``, else the peak clock), and the sustained memory bandwidth. The
realistic figures explain a kernel's gap to the peak; they are not a bound a measurement is checked against.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from oto.gemm import Family

# The 13 family codes of rocBLAS's vega10 deck, then strided families we also ceiling for completeness.
VEGA10_FAMILIES = (
    "SB", "DB", "HB", "HHS_BH", "HSS_BH", "SB_GB", "DB_GB", "HB_GB", "HHS_BH_GB", "CB_GB", "ZB_GB", "SBIc",
    "SBIIc",
)  # fmt: skip
EXTRA_FAMILIES = ("CB", "ZB", "BBS_BH", "I8II_BH")
# Every family ceilings.yaml gives: those above and each plain one's `_GB` form (the RDNA decks' BBS_BH_GB and
# I8II_BH_GB, a workload's HSS_BH_GB), so the report finds a ceiling for every family a deck can hold.
CEILING_FAMILIES = tuple(
    dict.fromkeys(
        [*VEGA10_FAMILIES, *EXTRA_FAMILIES]
        + [f"{c}_GB" for c in (*VEGA10_FAMILIES, *EXTRA_FAMILIES) if "_GB" not in c and not c.endswith("c")]
    )
)

# Workload classes reported in ceilings.yaml, each named by a representative family (which fixes its rate
# class and whether it is complex).
WORKLOADS = {
    "fp32": "SB",
    "bf16": "BBS_BH",
    "complex_fp32": "CB",
    "fp16_hpa": "HHS_BH",
    "fp16_packed": "HB",
    "fp64": "DB",
    "complex_fp64": "ZB",
    "int8": "I8II_BH",
}
EXAMPLE_FAMILIES = ("SB", "DB", "HB", "HHS_BH")

# The arch-profile fields each figure is derived from (oto.run.profile_views: what each stage depends on).
# "{rate_class}" is the rate class of the library a job works on.
PEAK_FIELDS = ("compute_units", "simds_per_cu", "lanes_per_simd", "clock_mhz", "rates.{rate_class}")
ROOFLINE_FIELDS = (*PEAK_FIELDS, "memory.sustained_bandwidth_gbs")
CEILING_FIELDS = (
    "arch", "compute_units", "simds_per_cu", "lanes_per_simd", "clock_mhz", "rates", "dual_issue", "wmma",
    "dot_instructions", "timing.sustained_clock_mhz", "memory.kind", "memory.shared_with_cpu",
    "memory.peak_bandwidth_gbs", "memory.sustained_bandwidth_gbs", "timing.launch_us",
)  # fmt: skip
EXAMPLE_SIZES = tuple(2**e for e in range(6, 14))  # 64 .. 8192


def _family(family: Family | str) -> Family:
    return family if isinstance(family, Family) else Family.parse(family)


def _lane_flops_per_clock(profile: Mapping) -> int:
    """FP32 flops per clock of the whole GPU: every lane retires one FMA (2 flops) per clock."""
    return profile["compute_units"] * profile["simds_per_cu"] * profile["lanes_per_simd"] * 2


def theoretical_gflops(profile: Mapping, rate_class: str) -> float:
    """Peak GFLOPS (GOPS for integers) of one rate class: CUs * SIMDs * lanes * 2 * GHz * rate."""
    rates = profile["rates"]
    if rate_class not in rates:
        raise ValueError(f"unknown rate class {rate_class!r}; the profile has {sorted(rates)}")
    return _lane_flops_per_clock(profile) * profile["clock_mhz"] / 1000.0 * rates[rate_class]


def sustained_clock_mhz(profile: Mapping, rate_class: str) -> float:
    """The clock a long GEMM of the rate class holds (``timing.sustained_clock_mhz``), else the peak clock."""
    sustained = (profile.get("timing") or {}).get("sustained_clock_mhz") or {}
    return float(sustained.get(rate_class, profile["clock_mhz"]))


def realistic_rate(profile: Mapping, rate_class: str) -> float:
    """The rate of the instructions Tensile's kernels issue: the peak rate without its dual-issue factor."""
    return profile["rates"][rate_class] / (profile.get("dual_issue") or {}).get(rate_class, 1)


def realistic_gflops(profile: Mapping, rate_class: str) -> float:
    """What tuned kernels can reach in one rate class: :func:`realistic_rate` at the sustained clock."""
    if rate_class not in profile["rates"]:
        raise ValueError(f"unknown rate class {rate_class!r}; the profile has {sorted(profile['rates'])}")
    clock_mhz = sustained_clock_mhz(profile, rate_class)  # the same arithmetic as theoretical_gflops
    return _lane_flops_per_clock(profile) * clock_mhz / 1000.0 * realistic_rate(profile, rate_class)


def _path(profile: Mapping, rate_class: str) -> str:
    """The instruction path behind a rate class's peak, as the profile states it."""
    wmma = (profile.get("wmma") or {}).get("rates") or {}
    dots = set(profile.get("dot_instructions") or ())
    if wmma.get(rate_class) == profile["rates"][rate_class]:
        return "WMMA (v_wmma_*, wave32)"
    if rate_class in (profile.get("dual_issue") or {}):
        return "dual issue (VOPD / one-pass wave64)"
    if (
        rate_class == "fp16_hpa"
        and {"v_dot2_f32_f16", "v_dot2c_f32_f16"} & dots
        and profile["rates"][rate_class] > 1
    ):
        return "v_dot2_f32_f16"
    if (
        rate_class == "int8"
        and {"v_dot4_i32_i8", "v_dot4_i32_iu8"} & dots
        and profile["rates"][rate_class] > 1
    ):
        return "v_dot4_i32_i8"
    return "VALU"


def _realistic_why(profile: Mapping, rate_class: str) -> str:
    factor = (profile.get("dual_issue") or {}).get(rate_class, 1)
    clock = sustained_clock_mhz(profile, rate_class)
    held = (profile.get("timing") or {}).get("sustained_clock_mhz") or {}
    where = (
        "timing.sustained_clock_mhz" if rate_class in held else "no sustained clock in the profile: the peak"
    )
    issue = (
        f"the peak's dual issue (x{factor:g}) is out of reach: Tensile's kernels issue no VOPD pairs"
        if factor != 1
        else f"the peak's path ({_path(profile, rate_class)}) is one Tensile's kernels use"
    )
    return f"{issue}; at {clock:g} MHz ({where})"


def family_peak_gflops(profile: Mapping, family: Family | str) -> float:
    # A complex MAC is 4 real FMAs and we count it as 8 flops, so complex families peak at their base rate.
    return theoretical_gflops(profile, _family(family).rate_class)


def gemm_bytes(family: Family | str, m, n, batch, k):
    """Compulsory DRAM traffic: A and B read once, C read (beta) and D written once."""
    f = _family(family)
    m, n, batch, k = (np.asarray(x, dtype=np.float64) for x in (m, n, batch, k))
    return batch * ((m * k + k * n) * f.a.bytes + m * n * f.dest.bytes * 2)


def roofline_gflops(profile: Mapping, family: Family | str, m, n, batch, k):
    """Attainable GFLOPS of one problem: min(peak, flops / compulsory bytes * sustained bandwidth).

    Accepts scalars (returns a float) or numpy-broadcastable arrays (returns an array).
    """
    f = _family(family)
    sizes = [np.asarray(x, dtype=np.float64) for x in (m, n, batch, k)]
    if any(np.any(s < 1) for s in sizes):
        raise ValueError("GEMM sizes m, n, batch, k must all be >= 1")
    flops = f.flops_per_mac * sizes[0] * sizes[1] * sizes[2] * sizes[3]
    intensity = flops / gemm_bytes(f, *sizes)
    # GB/s * flops/byte = GFLOP/s.
    ceiling = np.minimum(
        family_peak_gflops(profile, f), intensity * profile["memory"]["sustained_bandwidth_gbs"]
    )
    return float(ceiling) if ceiling.ndim == 0 else ceiling


def ridge_point(profile: Mapping, rate_class: str) -> float:
    """Arithmetic intensity (flops per byte) above which a problem is compute-bound."""
    return theoretical_gflops(profile, rate_class) / profile["memory"]["sustained_bandwidth_gbs"]


def _formula(profile: Mapping, family: Family) -> str:
    rate = profile["rates"][family.rate_class]
    integer = family.rate_class.startswith("int")
    unit, per_mac = ("GOPS", "2 ops/MAC") if integer else ("GFLOPS", "2 flops/FMA")
    note = " (complex MAC = 4 FMAs counted as 8 flops)" if family.a.complex else ""
    return (
        f"{profile['compute_units']} CU x {profile['simds_per_cu']} SIMD x {profile['lanes_per_simd']} lanes"
        f" x {per_mac} x {profile['clock_mhz'] / 1000:g} GHz x rate {rate:g} ({family.rate_class})"
        f" = {family_peak_gflops(profile, family):.1f} {unit}{note}"
    )


def ceilings_document(profile: Mapping, profile_source: str | Path | None = None) -> dict:
    """Content of ``results/<arch>/ceilings.yaml``; a given profile file is recorded with its sha256."""
    source = None
    if profile_source is not None:
        path = Path(profile_source)
        source = {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}

    theoretical, realistic = {}, {}
    for workload, code in WORKLOADS.items():
        f = Family.parse(code)
        unit = "GOPS" if f.rate_class.startswith("int") else "GFLOPS"
        theoretical[workload] = {
            "gflops": round(family_peak_gflops(profile, f), 3),
            "unit": unit,
            "rate_class": f.rate_class,
            "formula": _formula(profile, f),
            "path": _path(profile, f.rate_class),
        }
        realistic[workload] = {
            "gflops": round(realistic_gflops(profile, f.rate_class), 3),
            "unit": unit,
            "rate_class": f.rate_class,
            "formula": (
                f"{profile['compute_units']} CU x {profile['simds_per_cu']} SIMD x "
                f"{profile['lanes_per_simd']} lanes x 2 x "
                f"{sustained_clock_mhz(profile, f.rate_class) / 1000:g} GHz x rate "
                f"{realistic_rate(profile, f.rate_class):g}"
            ),
            "why": _realistic_why(profile, f.rate_class),
        }

    families = {}
    for code in CEILING_FAMILIES:
        f = Family.parse(code)
        families[code] = {
            "rate_class": f.rate_class,
            "workload": f.workload,
            "theoretical_gflops": round(family_peak_gflops(profile, f), 3),
            "realistic_gflops": round(realistic_gflops(profile, f.rate_class), 3),
        }

    memory = profile["memory"]
    roofline = {
        "sustained_bandwidth_gbs": memory["sustained_bandwidth_gbs"],
        "peak_bandwidth_gbs": memory["peak_bandwidth_gbs"],
        "traffic_model": "batch*(m*k + k*n)*bytes(A/B) + 2*batch*m*n*bytes(D): A, B, C read once, D written",
        "ridge_point_flops_per_byte": {rc: round(ridge_point(profile, rc), 3) for rc in profile["rates"]},
        # Every launch costs this before any work: the reports' realistic roofline of a size is
        # flops / (launch + flops / min(peak, intensity x bandwidth)) (oto.reporting.figures.with_roofline).
        "launch_us": (profile.get("timing") or {}).get("launch_us"),
    }

    examples = {}
    sizes = np.array(EXAMPLE_SIZES, dtype=np.float64)
    for code in EXAMPLE_FAMILIES:
        peak = family_peak_gflops(profile, code)
        ceiling = roofline_gflops(profile, code, sizes, sizes, 1, sizes)
        examples[code] = [
            {
                "size": [int(s), int(s), 1, int(s)],
                "gflops": round(float(c), 3),
                "pct_peak": round(100.0 * float(c) / peak, 2),
                "bound": "compute" if c >= peak else "memory",
            }
            for s, c in zip(sizes, ceiling, strict=True)
        ]

    bandwidth = {
        "theoretical_gbs": memory["peak_bandwidth_gbs"],
        "realistic_gbs": memory["sustained_bandwidth_gbs"],
        "why": (
            f"theoretical: the {memory['kind']} interface's peak; realistic: what a streaming GPU kernel "
            + ("sustains on memory it shares with the CPU" if memory["shared_with_cpu"] else "sustains")
            + " (memory.sustained_bandwidth_gbs, the roofline's slope)"
        ),
    }
    return {
        "arch": profile["arch"],
        "profile": source,
        "theoretical": theoretical,
        "realistic": realistic,
        "bandwidth": bandwidth,
        "families": families,
        "roofline": roofline,
        "examples": examples,
    }

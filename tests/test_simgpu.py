"""The simulated GPU: resources vs measured kernels, build outcomes, timing physics, calibration, noise."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from oto.gemm import Library
from oto.hardware.simulated.noise import NoiseModel
from oto.hardware.simulated.performance import SimGPU
from oto.tensile.params import PARAMS

try:
    from oto.tensile import legality
except ImportError:  # the legality validator is written in parallel; fall back to the rules below
    legality = None

REPO = Path(__file__).resolve().parents[1]


def gfx90c_like() -> dict:
    return {
        "arch": "gfx90c",
        "compute_units": 7,
        "simds_per_cu": 4,
        "lanes_per_simd": 16,
        "wavefront_size": 64,
        "clock_mhz": 1800,
        "rates": {
            "fp32": 1,
            "fp64": 0.0625,
            "fp16_packed": 2,
            "fp16_hpa": 1,
            "bf16": 1,
            "int8": 1,
            "int32": 0.25,
        },
        "has_mfma": False,
        "lds_bytes_per_cu": 65536,
        "max_lds_per_workgroup": 65536,
        "vgprs_per_lane_max": 256,
        "sgprs_max": 102,
        "max_waves_per_simd": 10,
        "max_workgroup_size": 1024,
        "l2_bytes": 1 << 20,
        "memory": {
            "peak_bandwidth_gbs": 51.2,
            "sustained_bandwidth_gbs": 35.0,
            "shared_with_cpu": True,
            "usable_device_memory_bytes": 3 << 29,
        },
    }


@pytest.fixture(scope="module")
def sim() -> SimGPU:
    return SimGPU(gfx90c_like())


@pytest.fixture(scope="module")
def spaces(sim):
    """search_space per (family without _GB, pattern), computed once per module."""
    cache: dict[tuple[str, str], list[dict]] = {}

    def get(lib: Library) -> list[dict]:
        key = (lib.family.code.removesuffix("_GB"), lib.pattern)
        if key not in cache:
            cache[key] = search_space(Library.build(*key), sim, gfx90c_like())
        return cache[key]

    return get


# ------------------------------------------------------------------ resources and build outcomes
# tensile.md §6.4: generated gfx90c kernels (SGEMM NT, VW4) and the MT64x64x8 DGEMM of §8.
MEASURED = [
    ("SB", (8, 8), (16, 16, 1), 16, 4, 121, 32768),
    ("SB", (8, 8), (16, 16, 1), 8, 4, 111, 16384),
    ("SB", (8, 8), (8, 8, 1), 16, 4, 141, 16384),
    ("SB", (8, 8), (8, 8, 1), 8, 4, 121, 8192),
    ("SB", (4, 4), (16, 16, 1), 16, 4, 47, 16384),
    ("SB", (4, 4), (8, 8, 1), 16, 4, 57, 8192),
    ("SB", (4, 4), (8, 8, 1), 8, 4, 47, 4096),
    ("DB", (4, 4), (16, 16, 1), 8, 2, 79, 16384),
]


@pytest.mark.parametrize(("fam", "tt", "wg", "du", "vw", "vgpr", "lds"), MEASURED)
def test_resources_match_measured_kernels(sim, fam, tt, wg, du, vw, vgpr, lds):
    r = sim.resources(fam, {"ThreadTile": tt, "WorkGroup": wg, "DepthU": du, "VectorWidth": vw}, "NT")
    assert abs(r["vgpr"] - vgpr) <= 0.15 * vgpr
    assert r["lds_bytes"] == lds
    assert 60 <= r["sgpr"] <= 70  # measured 63 (SGEMM) and 65 (DGEMM)


def test_resources_grow_with_prefetch_and_padding(sim):
    base = {"ThreadTile": (8, 8), "WorkGroup": (16, 16, 1), "DepthU": 16, "VectorWidth": 4}
    r0 = sim.resources("SB", base)
    assert sim.resources("SB", {**base, "PrefetchGlobalRead": 2})["vgpr"] > r0["vgpr"]
    assert sim.resources("SB", {**base, "PrefetchLocalRead": 2})["vgpr"] > r0["vgpr"]
    assert sim.resources("SB", {**base, "PrefetchGlobalRead": 0})["lds_bytes"] < r0["lds_bytes"]
    assert sim.resources("SB", {**base, "1LDSBuffer": 1})["lds_bytes"] < r0["lds_bytes"]
    assert sim.resources("SB", {**base, "LdsPadB": 4})["lds_bytes"] > r0["lds_bytes"]
    lsu = sim.resources(
        "SB", {"ThreadTile": (4, 4), "WorkGroup": (16, 16, 4), "DepthU": 16, "VectorWidth": 4}
    )
    assert lsu["lds_bytes"] == 4 * 64 * 64 * 4  # LSU reduction buffer dominates


@pytest.mark.parametrize(
    ("params", "status", "words"),
    [
        ({"ThreadTile": (16, 16), "WorkGroup": (16, 16, 1)}, "register_overflow", "errorCode=1"),
        ({"ThreadTile": (8, 8), "WorkGroup": (32, 32, 1)}, "register_overflow", "errorCode=4"),
        ({"ThreadTile": (8, 8), "WorkGroup": (16, 16, 1), "DepthU": 64}, "rejected", "bytes of LDS"),
        ({"ThreadTile": (4, 4), "WorkGroup": (64, 32, 1)}, "rejected", "max workgroup size"),
        ({"ThreadTile": (4, 4), "WorkGroup": (8, 12, 1)}, "rejected", "multiple of the wavefront"),
        ({"ThreadTile": (8, 8), "WorkGroup": (16, 16, 1), "DepthU": 16}, "ok", ""),
    ],
)
def test_build_outcomes(sim, params, status, words):
    got, reason, res = sim.build_outcome("SB", params)
    assert got == status
    assert words in reason
    assert set(res) == {"vgpr", "sgpr", "lds_bytes"}


def test_source_kernels_spill_instead_of_overflowing(sim):
    p = {"ThreadTile": (16, 16), "WorkGroup": (16, 16, 1), "KernelLanguage": "Source"}
    status, _, res = sim.build_outcome("SB", p)
    assert status == "ok" and res["vgpr"] > 256
    fits = {**p, "ThreadTile": (8, 8)}
    size = (4096, 4096, 1, 1024)
    # the 256x256 tile does 4x the work per workgroup but the spills make it slower overall
    assert sim.true_time_us("SB", p, *size) > 1.2 * sim.true_time_us("SB", fits, *size)


# ------------------------------------------------------------------ timing physics
CONFIGS = [
    {"ThreadTile": (8, 8), "WorkGroup": (16, 16, 1), "DepthU": 16, "VectorWidth": 4},
    {"ThreadTile": (4, 4), "WorkGroup": (16, 16, 1), "DepthU": 16, "VectorWidth": 4, "GlobalSplitU": 4},
    {"ThreadTile": (2, 2), "WorkGroup": (8, 8, 1), "DepthU": 8, "VectorWidth": 2, "KernelLanguage": "Source"},
    {"ThreadTile": (4, 8), "WorkGroup": (16, 8, 2), "DepthU": 32, "VectorWidth": 4, "PrefetchGlobalRead": 0},
]


@pytest.mark.parametrize("fam", ["SB", "DB", "HB", "HHS_BH", "CB_GB", "ZB_GB"])
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_time_never_below_roofline_and_grows_with_problem(sim, fam, cfg):
    p = CONFIGS[cfg]
    rng = np.random.default_rng(cfg)
    m, n, k = (rng.integers(1, 5000, 300) for _ in range(3))
    b = rng.integers(1, 9, 300)
    t = sim.true_time_us(fam, p, m, n, b, k)
    assert np.all(t >= sim.bound_time_us(fam, m, n, b, k))
    assert np.all(t >= 5.0)  # launch overhead
    # Doubling any dimension of a problem never makes it faster (beyond the few-% ruggedness).
    for dim in range(4):
        grown = [m, n, b, k]
        grown[dim] = grown[dim] * 2
        assert np.all(sim.true_time_us(fam, p, *grown) >= 0.97 * t)
    big = sim.true_time_us(fam, p, 4096, 4096, 1, 4096)
    assert big > 20 * sim.true_time_us(fam, p, 512, 512, 1, 512)


def test_ruggedness_is_stable_and_seeded():
    p = CONFIGS[0]
    a, b, c = SimGPU(gfx90c_like()), SimGPU(gfx90c_like()), SimGPU(gfx90c_like(), seed=7)
    sizes = (np.arange(100, 3000, 97),) * 3 + (1,)
    ta = a.true_time_us("SB", p, *sizes[:2], 1, sizes[2])
    assert np.array_equal(ta, b.true_time_us("SB", p, *sizes[:2], 1, sizes[2]))
    tc = c.true_time_us("SB", p, *sizes[:2], 1, sizes[2])
    assert not np.array_equal(ta, tc)
    assert np.all(np.abs(tc / ta - 1) < 0.08)


def test_physical_effects_point_the_right_way(sim):
    big = (4096, 4096, 1, 4096)
    base = {"ThreadTile": (8, 8), "WorkGroup": (16, 16, 1), "DepthU": 16, "VectorWidth": 4}
    t = float(sim.true_time_us("SB", base, *big))
    # assembly beats HIP source: the calibration on real gfx900 rows puts hipcc's issue rate at about half
    # of Tensile's assembly (Physics.issue_source), so the gap is large but bounded
    src = float(sim.true_time_us("SB", {**base, "KernelLanguage": "Source", "PrefetchGlobalRead": 1}, *big))
    assert 1.3 < src / t < 2.5
    # register blocking: a 2x2 thread tile is LDS-bound
    small = {"ThreadTile": (2, 2), "WorkGroup": (16, 16, 1), "DepthU": 16, "VectorWidth": 2}
    assert sim.true_time_us("SB", small, *big) > 1.3 * t
    # no global prefetch exposes DRAM latency (resident workgroups may still hide it: 618 of the 3066 shipped
    # vega10 solutions have PGR off)
    assert (
        sim.breakdown("SB", {**base, "PrefetchGlobalRead": 0}, *big)["exposed_latency"]
        > sim.breakdown("SB", base, *big)["exposed_latency"]
    )
    # GSU helps a small-MN, deep-K problem and hurts a big one
    skinny = (128, 128, 1, 65536)
    gsu = {"ThreadTile": (4, 4), "WorkGroup": (16, 16, 1), "DepthU": 16, "VectorWidth": 4}
    # (simgpu-3: 0.53x; the split's latency and second launch are calibrated on real gfx900 rows)
    assert sim.true_time_us("SB", {**gsu, "GlobalSplitU": 8}, *skinny) < 0.75 * sim.true_time_us(
        "SB", gsu, *skinny
    )
    # on a big problem the split only adds its beta pass, the read-modify-write of each partial tile and a
    # second launch (simgpu-2 lost this: it had the compare-swap traffic at zero and nothing else)
    assert sim.true_time_us("SB", {**base, "GlobalSplitU": 8}, *big) > 1.03 * t
    # 4 KiB leading dimensions camp on one DRAM channel unless StaggerU staggers the loads
    mem_bound = {"ThreadTile": (2, 2), "WorkGroup": (16, 16, 1), "DepthU": 8, "VectorWidth": 2}
    bd_on = sim.breakdown("SB", mem_bound, 4096, 4096, 1, 64)
    bd_off = sim.breakdown("SB", {**mem_bound, "StaggerU": 0}, 4096, 4096, 1, 64)
    assert bd_off["mem_cycles"] > bd_on["mem_cycles"]
    # WorkGroupMapping 1 re-reads A far more often on a big problem
    assert (
        sim.breakdown("SB", {**base, "WorkGroupMapping": 1}, *big)["dram_bytes"]
        > sim.breakdown("SB", base, *big)["dram_bytes"]
    )
    # padding the transposed (non-TLU) tensor removes LDS bank conflicts
    assert (
        sim.breakdown("SB", {**base, "LdsPadB": 4}, *big)["lds_cycles"]
        < sim.breakdown("SB", base, *big)["lds_cycles"]
    )
    # a partial tile costs a full one: 4097 pays for 4160
    assert sim.true_time_us("SB", base, 4097, 4096, 1, 4096) > 1.01 * t
    # workgroups of fewer waves than SIMDs are spread over the SIMDs, not stacked on one (64-thread
    # workgroups: 4x the VGPR-limited count of a 256-thread one, up to the 16 workgroup slots)
    one_wave = {"ThreadTile": (4, 4), "WorkGroup": (8, 8, 1), "DepthU": 8, "VectorWidth": 4}
    four_waves = {**one_wave, "WorkGroup": (16, 16, 1)}
    assert sim.occupancy("SB", one_wave) == min(16, 4 * sim.occupancy("SB", four_waves))
    # a size that needs the K tail costs more than its tile-aligned neighbour of the same work
    assert sim.true_time_us("SB", base, 4096, 4096, 1, 56) > sim.true_time_us("SB", base, 4096, 4096, 1, 64)
    # HSS_BH runs HHS_BH's summation loop (the MAC cost is keyed by A/B and compute type), so a deep-K
    # problem costs the same; its single-precision D costs the epilogue twice the bytes at the fitted store
    # cost, so a rank-1 update (K = 1, all epilogue) is several times slower
    hpa = {**base, "VectorWidth": 2}
    deep = sim.true_time_us("HSS_BH", hpa, *big) / sim.true_time_us("HHS_BH", hpa, *big)
    assert deep == pytest.approx(1.0, abs=0.08)
    rank1 = (4096, 4096, 1, 1)
    assert sim.true_time_us("HSS_BH", hpa, *rank1) > 2.5 * sim.true_time_us("HHS_BH", hpa, *rank1)
    # a HIP-source kernel pays the fitted extra launch overhead
    src_p = {**base, "KernelLanguage": "Source"}
    assert (
        sim.breakdown("SB", src_p, 64, 64, 1, 64)["launch_us"]
        > sim.breakdown("SB", base, 64, 64, 1, 64)["launch_us"] + 1.0
    )
    # a 2x2 thread tile's k step is shorter than the LDS read latency: without local-read prefetch a
    # one-wave workgroup stalls on every step, with PLR it stalls less
    one = {"ThreadTile": (2, 2), "WorkGroup": (8, 8, 1), "DepthU": 32, "VectorWidth": 2}
    stall = sim.breakdown("SB", {**one, "PrefetchLocalRead": 0}, 256, 256, 1, 4096)["lds_stall_cycles"]
    assert stall > sim.breakdown("SB", one, 256, 256, 1, 4096)["lds_stall_cycles"] > 0
    assert sim.breakdown("SB", base, *big)["lds_stall_cycles"] == 0  # an 8x8 tile hides it
    # FP64 is compute-bound where FP32 is not
    assert sim.breakdown("DB", base, *big)["alu_fraction"] == pytest.approx(1.0)


# ------------------------------------------------------------------ calibration
def _legal(lib: Library, p: dict, profile: dict) -> bool:
    if legality is not None:
        return legality.check(lib, p, legality.Limits.from_profile(profile)).valid
    tt, wg = p["ThreadTile"], p["WorkGroup"]
    mt0, mt1 = tt[0] * wg[0], tt[1] * wg[1]
    threads = wg[0] * wg[1] * wg[2]
    vw = p["VectorWidth"]
    return (
        tt[0] % vw == 0
        and tt[1] % vw == 0
        and mt0 * mt1 >= threads
        and (wg[2] == 1 or (threads % mt0 == 0 and (mt0 * mt1) % threads == 0))
        and (lib.family.a.char != "H" or vw >= 2)
        and all((mt * p["DepthU"]) % (threads * vw) == 0 for mt in (mt0, mt1))
    )


def search_space(lib: Library, sim: SimGPU, profile: dict) -> list[dict]:
    """A reasonable tuning search: a grid over the knobs that matter, every value taken from PARAMS."""
    tts = [t for t in PARAMS["ThreadTile"].values if set(t) <= {2, 4, 8}]
    wgs = [w for w in PARAMS["WorkGroup"].values if w[0] in (8, 16, 32) and w[1] in (8, 16, 32) and w[2] <= 2]
    out = []
    vws = (1,) if lib.family.a.bytes >= 16 else (2, 4, 8)  # VW * bytes must fit a 16-byte load
    for tt, wg, du, pgr, vw in itertools.product(tts, wgs, (8, 16, 32), (1, 2), vws):
        if vw * lib.family.a.bytes > 16 or (lib.family.a.bytes > 4 and vw > 2):
            continue
        p = {"ThreadTile": tt, "WorkGroup": wg, "DepthU": du, "PrefetchGlobalRead": pgr, "VectorWidth": vw}
        p.update(LdsPadA=-1, LdsPadB=-1)
        if _legal(lib, p, profile) and sim.build_outcome(lib.family, p, lib.pattern)[0] == "ok":
            out.append(p)
    return out


def best_time(sim: SimGPU, lib: Library, space: list[dict], m, n, b, k) -> np.ndarray:
    best = np.full(np.broadcast(m, n, b, k).shape, np.inf)
    for p in space:
        best = np.minimum(best, sim.true_time_us(lib.family, p, m, n, b, k, lib.pattern))
    return best


@pytest.mark.parametrize(
    ("fam", "lo", "hi"),
    [
        # Ranges from the real gfx900 rows of the first measurement campaign (the chip the profile describes;
        # calibration.CAMPAIGNS): the best shipped kernels at big sizes reach SGEMM 81-88%, HHS_BH 84-94%,
        # packed FP16 78-83% of peak; no legacy row measures a big DGEMM (the prototype's gfx90c: DD 91.3%).
        # HSS_BH runs HHS_BH's summation loop (simgpu-2 asserted 0.40-0.60: that was the second campaign's
        # slower board, not HSS physics). For a profile without a timing block (sustained clock = peak).
        # The prototype's gfx90c packed FP16 (~55%) is compared in bench/RESULTS.md, not asserted.
        ("DB", 0.85, 0.95),
        ("HHS_BH", 0.80, 0.92),
        ("HSS_BH", 0.80, 0.92),
        ("HB", 0.75, 0.88),
        ("SB", 0.75, 0.90),
    ],
)
def test_best_reachable_efficiency_matches_calibration(sim, spaces, fam, lo, hi):
    lib = Library.build(fam, "NN")
    space = spaces(lib)
    assert len(space) > 200
    size = (4096, 4096, 1, 4096)
    best = float(best_time(sim, lib, space, *size)[()])
    gflops = lib.family.flops_per_mac * math.prod(size) / best / 1e3
    assert lo <= gflops / sim.peak_gflops(lib.family) <= hi


def _shipped(path: Path) -> tuple[Library, list[dict], list[tuple[tuple[int, ...], int]]]:
    doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    lib = Library.parse(path.stem.removeprefix("vega10_"))
    sols = [{k: s[k] for k in PARAMS if k in s} for s in doc[5]]
    rows = [(tuple(r[0][:4]), r[1][0]) for r in doc[7]]
    return lib, sols, rows


def test_shipped_vega10_solutions_land_at_plausible_efficiency(sim, vega10_dir):
    """Kernels tuned for a 64-CU HBM2 dGPU run below the gfx90c roofline: mostly 20-80% at big sizes."""
    effs, medians = [], {}
    for name in ("Alik_Bjlk_SB", "Alik_Bljk_HHS_BH", "Ailk_Bjlk_HB", "Alik_Bljk_CB_GB"):
        lib, sols, rows = _shipped(vega10_dir / f"vega10_Cijk_{name}.yaml")
        fam_effs = []
        for size, idx in rows:
            if lib.family.flops_per_mac * math.prod(size) < 2e9:
                continue
            t = sim.true_time_us(lib.family, sols[idx], *size, lib.pattern)
            fam_effs.append(float(sim.bound_time_us(lib.family, *size) / t))
        medians[name] = np.median(fam_effs)
        effs += fam_effs
    effs = np.array(effs)
    assert len(effs) > 500
    assert effs.max() <= 1.0
    assert np.mean((effs >= 0.2) & (effs <= 0.8)) > 0.5
    assert all(0.3 <= med <= 0.85 for med in medians.values()), medians


def test_tuned_beats_shipped_by_a_plausible_margin(sim, spaces, vega10_dir):
    """On each 125-size vega10 deck the searched best never breaks the roofline, the median gain is modest
    and some sizes gain a lot (the prototype saw up to 2.7x against the shipped kernels on some families)."""
    top = {}
    for name in (
        "Ailk_Bljk_SB_GB",
        "Ailk_Bljk_HB_GB",
        "Ailk_Bljk_HHS_BH_GB",
        "Ailk_Bljk_DB_GB",
        "Ailk_Bljk_CB_GB",
    ):
        lib, sols, rows = _shipped(vega10_dir / f"vega10_Cijk_{name}.yaml")
        sizes = np.array([r[0] for r in rows], dtype=float).T
        shipped = np.array([sim.true_time_us(lib.family, sols[i], *s, lib.pattern)[()] for s, i in rows])
        best = best_time(sim, lib, spaces(lib), *sizes)
        assert np.all(best >= sim.bound_time_us(lib.family, *sizes))
        speedup = shipped / best
        assert 1.0 <= np.median(speedup) <= 1.6, name  # most shipped choices stay reasonable
        top[name] = speedup.max()
    # every family has sizes with real headroom (simgpu-4: HB_GB's largest gain is 1.29x, the others 1.5-2.5x)
    assert all(1.25 <= s <= 8.0 for s in top.values()), top
    assert max(top.values()) >= 2.0, top


# ------------------------------------------------------------------ noise
def test_noise_is_reproducible_per_stream():
    true = np.full(2000, 100.0)
    alu, runs = np.ones(2000), np.ones(2000, bool)
    a = NoiseModel(3, "SB/gen0").run(true, alu, runs, 50.0)[0]
    b = NoiseModel(3, "SB/gen0").run(true, alu, runs, 50.0)[0]
    c = NoiseModel(3, "SB/gen1").run(true, alu, runs, 50.0)[0]
    d = NoiseModel(4, "SB/gen0").run(true, alu, runs, 50.0)[0]
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)
    assert not np.allclose(a, d)


def test_drift_is_bounded_slow_and_alu_sensitive():
    nm = NoiseModel(1, "x", drift=0.25, drift_period_s=600)
    t = np.linspace(0, 20 * 600e6, 200_001)
    f = nm.drift_factor(t)
    # Throttling only: never faster than the boost clock, ±25% around the mean 1/(1-0.25).
    mean = 1 / (1 - 0.25)
    assert f.min() >= 1.0 - 1e-12 and f.max() <= mean * 1.25 + 1e-12
    assert f.max() / f.min() > 1.4  # it really moves
    assert np.max(np.abs(np.diff(f))) < 0.01  # smooth: < 1% per 60 ms step
    mem = nm.drift_factor(t, alu_fraction=0.0)
    assert mem.min() >= 1.0 - 1e-12
    assert np.ptp(mem) < 0.35 * np.ptp(f)


def test_jitter_outliers_and_hangs_have_their_rates():
    n = 20_000
    true = np.full(n, 1000.0)
    quiet = NoiseModel(5, "j", drift=0.0, jitter=0.03, outlier_rate=0.0, hang_rate=0.0)
    t, hung, _ = quiet.run(true, np.ones(n), np.ones(n, bool), 0.0)
    assert not hung.any()
    assert np.std(np.log(t / true)) == pytest.approx(0.03, rel=0.1)
    assert quiet.clock_us == pytest.approx(t.sum())
    noisy = NoiseModel(5, "j", drift=0.0, jitter=0.01, outlier_rate=0.05, hang_rate=0.01, timeout_us=1e5)
    t, hung, _ = noisy.run(true, np.ones(n), np.ones(n, bool), 10.0)
    assert hung.mean() == pytest.approx(0.01, abs=0.004)
    assert np.all(np.isnan(t[hung]))
    slow = t[~hung] > 1.5 * true[~hung]
    assert slow.mean() == pytest.approx(0.05, abs=0.008)
    assert np.all(t[~hung][slow] <= 4.2 * 1000 * 1.1)


def test_real_gfx90c_profile_loads_into_the_model():
    arch = pytest.importorskip("oto.hardware.profile")
    path = REPO / "arch_profiles" / "gfx90c.yaml"
    if not path.is_file():
        pytest.skip("arch_profiles/gfx90c.yaml not present")
    gpu = SimGPU(arch.load_profile(path))
    assert gpu.peak_gflops("SB") == pytest.approx(1612.8)
    p = {"ThreadTile": (8, 8), "WorkGroup": (16, 16, 1), "DepthU": 16, "VectorWidth": 4}
    t = gpu.true_time_us("SB", p, 2048, 2048, 1, 2048)
    assert 0.4 < gpu.bound_time_us("SB", 2048, 2048, 1, 2048) / t < 0.9


# ------------------------------------------------------------------ RDNA: wave32, the WGP, WMMA
# A navi31 HB winner (WMMA, wave32) and a navi21 SGEMM winner (VALU, wave32), knobs as their logic files give.
WMMA_HB = {
    "KernelLanguage": "Assembly", "ThreadTile": [4, 64], "WorkGroup": [32, 4, 1], "DepthU": 16,
    "VectorWidth": 2, "GlobalReadVectorWidth": 8, "PrefetchGlobalRead": 1, "PrefetchLocalRead": 1,
    "LdsPadA": 0, "LdsPadB": 8,
    "WorkGroupMapping": 4, "WavefrontSize": 32, "MatrixInstruction": [16, 16, 16, 1], "TransposeLDS": 1,
    "UnrollMajorLDSB": True, "LocalReadVectorWidth": 16, "LdsBlockSizePerPadB": 128,
}  # fmt: skip
VALU_SB32 = {
    "KernelLanguage": "Assembly", "ThreadTile": [8, 8], "WorkGroup": [16, 8, 1], "DepthU": 8,
    "VectorWidth": 4, "GlobalReadVectorWidth": 4, "PrefetchGlobalRead": 1, "PrefetchLocalRead": 1,
    "WorkGroupMapping": 8,
    "WavefrontSize": 32, "LocalReadVectorWidth": 4,
}  # fmt: skip


@pytest.fixture(scope="module")
def gfx1103_profile() -> dict:
    from oto.hardware.profile import load_profile

    return dict(load_profile(REPO / "arch_profiles" / "gfx1103.yaml"))


@pytest.fixture(scope="module")
def gfx1103(gfx1103_profile) -> SimGPU:
    return SimGPU(gfx1103_profile)


def test_gfx9_kernels_keep_their_identity_when_isa_knobs_are_at_tensile_defaults():
    from oto.hardware.simulated.performance import config_key, with_defaults

    p = {"ThreadTile": (8, 8), "WorkGroup": (16, 16, 1), "DepthU": 16, "VectorWidth": 4}
    # as vega10's _GB files spell them out
    explicit = {
        **p,
        "WavefrontSize": 64,
        "MatrixInstruction": [],
        "TransposeLDS": 0,
        "LocalDotLayout": 1,
        "LocalReadVectorWidth": 4,
        "LdsBlockSizePerPadA": 0,
        "LdsBlockSizePerPadB": 0,
    }
    assert with_defaults(explicit) == with_defaults(p)
    sb = Library.build("SB", "NT").family
    assert config_key(sb, explicit, "gfx90c", 0) == config_key(sb, p, "gfx90c", 0)


def test_rdna_rates_follow_the_instructions_tensile_writes(gfx1103):
    from oto.gemm import Family
    from oto.hardware.simulated.performance import mac_rate, with_defaults

    a = gfx1103.arch
    assert mac_rate(a, Family.parse("SB"), with_defaults(VALU_SB32)) == 1.0  # no VOPD dual issue
    assert mac_rate(a, Family.parse("HB"), with_defaults(WMMA_HB)) == 4.0  # wmma.rates.fp16_packed
    valu_hb = {k: v for k, v in WMMA_HB.items() if k not in ("MatrixInstruction", "TransposeLDS")}
    assert mac_rate(a, Family.parse("HB"), with_defaults(valu_hb)) == 2.0  # v_pk_fma_f16
    hpa = {**VALU_SB32, "LocalDotLayout": 2, "InnerUnroll": 2}
    assert mac_rate(a, Family.parse("HHS_BH"), with_defaults(hpa)) == 2.0  # v_dot2_f32_f16
    assert mac_rate(a, Family.parse("HHS_BH"), with_defaults(VALU_SB32)) == 1.0  # v_fma_mix_f32


def test_rdna_kernels_build_and_run_on_the_wgp(gfx1103, gfx1103_profile):
    assert gfx1103.build_outcome("SB", VALU_SB32, "NT")[0] == "ok"
    assert gfx1103.build_outcome("HB", WMMA_HB, "NN")[0] == "ok"
    # the unit that holds workgroups is the WGP: twice a CU's SIMDs, LDS and workgroup slots
    cu_mode = SimGPU({**gfx1103_profile, "workgroup_processor": {}})
    assert gfx1103.occupancy("SB", VALU_SB32, "NT") == 2 * cu_mode.occupancy("SB", VALU_SB32, "NT")
    wave64 = {**VALU_SB32, "WavefrontSize": 64}
    assert gfx1103.build_outcome("SB", {**VALU_SB32, "WorkGroup": [16, 2, 1]}, "NT")[0] == "ok"
    assert gfx1103.build_outcome("SB", {**wave64, "WorkGroup": [16, 2, 1]}, "NT")[0] == "rejected"
    n = 4096
    t_wmma = gfx1103.true_time_us("HB", WMMA_HB, n, n, 1, n)
    t_valu = gfx1103.true_time_us("SB", VALU_SB32, n, n, 1, n)
    peak_hb, peak_sb = gfx1103.peak_gflops("HB"), gfx1103.peak_gflops("SB")
    eff_wmma = 2 * n**3 / t_wmma / 1e3 / peak_hb
    eff_valu = 2 * n**3 / t_valu / 1e3 / peak_sb
    assert t_wmma < t_valu  # the matrix path is faster than FP32 VALU ...
    assert 0.1 < eff_wmma < 1.0 and 0.1 < eff_valu <= 0.5  # ... and FP32 reaches half the dual-issue peak

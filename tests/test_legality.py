from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from oto.gemm import Library
from oto.tensile.legality import TENSILE_DEFAULTS, Limits, check, check_raw
from oto.tensile.params import PARAMS, CandidateError, canonical

SGEMM_NT = Library.build("SB", "NT")
# The knobs of the golden benchmark config (tensile-golden/benchmark/sgemm_nt_gfx90c_tiny.yaml).
GOLDEN_KNOBS = {
    "KernelLanguage": "Assembly",
    "DepthU": 8,
    "VectorWidth": -1,
    "PrefetchGlobalRead": 1,
    "PrefetchLocalRead": 1,
    "GlobalSplitU": 1,
}
DERIVED_KEYS = (
    "MacroTile0",
    "MacroTile1",
    "NumThreads",
    "LdsNumElements",
    "GlobalLoadVectorWidthA",
    "GlobalLoadVectorWidthB",
    "NumLoadsA",
    "NumLoadsB",
    "LoopUnroll",
    "NumLoadsCoalescedA",
    "NumLoadsCoalescedB",
    "NumLoadsPerpendicularA",
    "NumLoadsPerpendicularB",
    "LSCA",
    "LSPA",
    "LSCB",
    "LSPB",
    "LVCA",
    "LVPA",
    "LVCB",
    "LVPB",
    "LdsOffsetB",
    "LdsOffsetA_Blk",
    "LdsNumElementsAlignedA",
    "LdsNumElementsAlignedB",
    "NumElementsPerThread",
    "GlobalWriteVectorWidth",
    "DepthU",
)
# Messages real Tensile 4.44 gives the shipped vega10 solutions it flags (Solution() run on all 3,066).
VAW_GUARD = (
    "VectorAtomicWidth should not be larger than max(=1)",
    "Rejecting (GlobalSplitU=1 or MultipleBuffer) and VectorAtomicWidth>min(=1) to avoid duplicate kernels.",
)
GLVW_GOTCHA = re.compile(r"^GlobalLoadVectorWidth[AB] \d+ must be == VectorWidth \d+ or == 1$")


def sgemm(tt, wg, **kw):
    return {**GOLDEN_KNOBS, "ThreadTile": list(tt), "WorkGroup": list(wg), **kw}


# ---- worked examples (tensile.md §6.5 and the golden benchmark run) ----


def test_golden_fork_matches_real_tensile(golden_dir: Path):
    log = (golden_dir / "benchmark" / "tensile-stdout-stderr.log").read_text()
    logged = [line[len("reject: ") :] for line in log.splitlines() if line.startswith("reject: ")]
    # VectorWidth -1 (auto) is Tensile's default but not a PARAMS value, hence check_raw.
    v = check_raw(SGEMM_NT, sgemm((4, 4), (16, 16, 1)))
    assert not v.valid
    assert (
        list(v.reasons)
        == logged
        == [
            "GlobalLoadVectorWidthA 2 must be == VectorWidth 4 or == 1",
            "GlobalLoadVectorWidthB 2 must be == VectorWidth 4 or == 1",
        ]
    )
    final = yaml.load(
        (
            golden_dir / "benchmark/out/1_BenchmarkProblems/Cijk_Ailk_Bjlk_SB_00/Data/00_Final.yaml"
        ).read_text(),
        Loader=yaml.CSafeLoader,
    )
    survivors = final[2:]
    assert len(survivors) == 3
    for sol in survivors:
        v = check_raw(SGEMM_NT, sgemm(sol["ThreadTile"], sol["WorkGroup"]))
        assert v.valid, v.reasons
        for key in (
            "MacroTile0",
            "MacroTile1",
            "NumThreads",
            "LdsNumElements",
            "GlobalLoadVectorWidthA",
            "GlobalLoadVectorWidthB",
            "NumLoadsA",
            "NumLoadsB",
            "LoopIters",
            "VectorWidth",
            "DepthU",
        ):
            assert v.derived[key] == sol[key], key


def test_tt8x8_wg16x16_du16():
    v = check(SGEMM_NT, sgemm((8, 8), (16, 16, 1), DepthU=16, VectorWidth=4))
    assert v.valid, v.reasons
    assert (v.derived["MacroTile0"], v.derived["MacroTile1"]) == (128, 128)
    assert v.derived["LdsNumElements"] == 8192 and v.derived["lds_bytes"] == 32768
    assert v.derived["GlobalLoadVectorWidthA"] == 4 and v.derived["NumThreads"] == 256


def test_vector_width_resolution():
    assert check_raw(SGEMM_NT, sgemm((8, 8), (8, 8, 1))).derived["VectorWidth"] == 4
    assert check_raw(SGEMM_NT, sgemm((6, 4), (8, 8, 1), DepthU=16)).derived["VectorWidth"] == 2
    hgemm = check_raw(Library.build("HB", "NN"), sgemm((8, 8), (16, 16, 1), DepthU=16))
    assert hgemm.valid and hgemm.derived["VectorWidth"] == 8


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        (
            sgemm((6, 4), (16, 16, 1), VectorWidth=4),
            "ThreadTile0 6 or ThreadTile1 4 not a multiple of VectorWidth 4",
        ),
        (sgemm((32, 4), (8, 8, 1)), "Invalid value for ThreadTile"),
        (sgemm((4, 4), (4, 4, 1)), "size of WorkGroup 16 should be multiple of WavefrontSize 64"),
        (sgemm((8, 8), (16, 16, 1), DepthU=64), "Kernel Uses 131072 > 65536 bytes of LDS"),
        (
            sgemm((2, 2), (4, 16, 1), VectorWidth=1, DepthU=16, GlobalReadVectorWidth=1, MacroTileShapeMax=2),
            "rejecting MacroTile Shape 8:32 for Min:Max 1:2",
        ),
        (
            sgemm((8, 8), (8, 8, 1), VectorWidth=4, GlobalReadVectorWidth=8),
            "GlobalLoadVectorWidthA * DataType.numBytes() > 16",
        ),
        (
            sgemm((1, 1), (16, 16, 4), VectorWidth=1),
            "NumElementsPerWorkGroup 256 < NumThreads 1024; reduce LocalSplitU",
        ),
        (
            sgemm((4, 4), (16, 16, 1), DepthU=16, **{"1LDSBuffer": 1}),
            "1LDSBuffer only support SIA2 or SIA3, or SIA1 without SLW",
        ),
        (sgemm((4, 4), (16, 16, 1), DepthU=4, InnerUnroll=8), "LoopIters need to greater than 0"),
        (
            sgemm((8, 8), (8, 8, 4), DepthU=4, VectorWidth=1, GlobalReadVectorWidth=1, PrefetchLocalRead=3),
            "Reject since PrefetchLocalRead 3 >= 2x LoopIters 1",
        ),
        (
            sgemm((4, 4), (16, 16, 1), DepthU=24, VectorWidth=4),
            "totalElements 1536 % (NumThreads * grvw) 1024 != 0",
        ),
    ],
)
def test_rejections_in_tensile_words(params, reason):
    v = check_raw(SGEMM_NT, params)
    assert not v.valid
    assert reason in v.reasons, v.reasons


def test_no_valid_depthu_closes_the_list():
    v = check_raw(SGEMM_NT, sgemm((4, 4), (16, 16, 1), DepthU=24, VectorWidth=4))
    assert v.reasons[-1] == "No valid DepthU found"


def test_lds_limit_and_prefetch():
    big = sgemm((8, 8), (16, 16, 1), DepthU=64, VectorWidth=4)
    assert check(SGEMM_NT, {**big, "PrefetchGlobalRead": 0}).derived["lds_bytes"] == 65536
    assert check(SGEMM_NT, {**big, "PrefetchGlobalRead": 0}).valid
    small = check(SGEMM_NT, big, Limits(lds_bytes=32768))
    assert "Kernel Uses 131072 > 32768 bytes of LDS" in small.reasons
    # LSU>1 needs a reduction buffer of LSU*MT0*MT1 compute elements when that is the largest of the three.
    lsu = check(SGEMM_NT, sgemm((8, 8), (8, 8, 4), DepthU=16, VectorWidth=4))
    assert lsu.valid and lsu.derived["LdsNumElements"] == 4 * 64 * 64


def test_auto_pad_and_source_pad_rule():
    # -1 pads, by VW, only a tensor whose unroll dim is the contiguous one (B of an NN problem: Bljk).
    nn = sgemm((4, 4), (16, 16, 1), DepthU=16, VectorWidth=4, LdsPadA=-1, LdsPadB=-1)
    v = check(Library.build("SB", "NN"), nn)
    assert v.valid and (v.derived["LdsPadA"], v.derived["LdsPadB"]) == (0, 4)
    assert v.derived["LdsNumElementsAlignedB"] == 64 * 16 + 16 * 4
    src = sgemm((4, 4), (16, 16, 1), DepthU=16, VectorWidth=4, KernelLanguage="Source", LdsPadA=2, LdsPadB=0)
    assert check(SGEMM_NT, src).reasons == ("Source KernelLanguage only supports LdsPadA == LdsPadB",)


@pytest.mark.parametrize(
    ("library", "changes", "reason"),
    [
        ("SB", {"KernelLanguage": "Source", "PrefetchGlobalRead": 2}, "Source kernel does not support PGR2"),
        ("SB", {"KernelLanguage": "Source", "InnerUnroll": 2}, "InnerUnroll only supported on assembly"),
        ("HB", {"GlobalSplitU": 2}, "Assembly GSU half requires AF0EM>=2 (for atomics on edge tiles)"),
        (
            "HSS_BH",
            {"GlobalSplitU": 2},
            "GlobalSplitU only compatible with single, or asm and (half or mixed) precision, "
            "or EnableMatrixInstruction",
        ),
        ("HB", {"VectorWidth": 1, "GlobalReadVectorWidth": 2}, "VectorWidth must be >= 2 for half"),
        ("DB", {"DepthU": 64}, "StaggerUStride=256 is less than size of DepthU=64 * BytesPerElement=8"),
    ],
)
def test_type_dependent_rules(library, changes, reason):
    base = sgemm((4, 4), (16, 16, 1), DepthU=16, VectorWidth=2)
    v = check(Library.build(library, "NN"), {**base, **changes})
    assert reason in v.reasons, v.reasons


@pytest.mark.parametrize("family", ["SB", "DB", "HHS_BH", "CB_GB"])
def test_split_u_allowed(family):
    params = sgemm((4, 4), (16, 16, 1), DepthU=16, VectorWidth=2, GlobalSplitU=4)
    if family == "CB_GB":  # complex single has no GSU path on VALU
        assert not check(Library.build(family, "NN"), params).valid
    else:
        assert check(Library.build(family, "NN"), params).valid


def test_vgpr_lower_bound_under_measured_counts():
    # VGPRs of the gfx90c SGEMM NT kernels Tensile generated (research/tensile.md §6.4): a lower bound.
    measured = {
        ((8, 8), (16, 16), 16): 121,
        ((8, 8), (16, 16), 8): 111,
        ((8, 8), (8, 8), 16): 141,
        ((8, 8), (8, 8), 8): 121,
        ((4, 4), (16, 16), 16): 47,
        ((4, 4), (8, 8), 16): 57,
        ((4, 4), (8, 8), 8): 47,
    }
    for (tt, wg, du), vgprs in measured.items():
        v = check(SGEMM_NT, sgemm(tt, (*wg, 1), DepthU=du, VectorWidth=4))
        assert v.valid and 0 < v.derived["vgpr_lower_bound"] <= vgprs
    huge = sgemm((16, 16), (8, 8, 1), DepthU=16, VectorWidth=4)
    assert any("VGPRs" in r for r in check(SGEMM_NT, huge).reasons)
    assert check(SGEMM_NT, {**huge, "KernelLanguage": "Source"}).valid  # hipcc spills instead


def test_limits_and_errors():
    lim = Limits.from_profile(
        {"max_lds_per_workgroup": 32768, "wavefront_size": 64, "vgprs_per_lane_max": 128}
    )
    assert lim == Limits(lds_bytes=32768, vgprs_max=128)
    assert Limits.from_profile({}) == Limits()
    v = check(SGEMM_NT, {"Bogus": 1})
    assert not v.valid and "unknown Tensile parameter" in v.reasons[0]
    with pytest.raises(CandidateError):
        canonical({"ThreadTile": [32, 4]})
    assert not check(SGEMM_NT, sgemm((32, 4), (8, 8, 1))).valid
    assert "not modelled" in check_raw(SGEMM_NT, {"Bogus": 1}).reasons[0]
    assert not check(SGEMM_NT, sgemm((4, 4), (16, 16, 1)), Limits(max_workgroup_size=128)).valid


# ---- the 3,066 shipped vega10 solutions ----


@pytest.fixture(scope="session")
def shipped(vega10_dir: Path) -> list[tuple[Library, dict]]:
    out = []
    for path in sorted(vega10_dir.glob("vega10_*.yaml")):
        doc = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
        library = Library.parse(path.stem.removeprefix("vega10_"))
        out += [(library, sol) for sol in doc[5]]
    return out


def own_values(sol: dict, drop: tuple[str, ...] = ()) -> dict:
    return {k: v for k, v in sol.items() if k in TENSILE_DEFAULTS and k not in drop}


def test_shipped_solutions_own_values(shipped):
    assert len(shipped) == 3066
    t0 = time.perf_counter()
    verdicts = [check_raw(lib, own_values(sol)) for lib, sol in shipped]
    elapsed = time.perf_counter() - t0
    invalid = [(lib, sol, v) for (lib, sol), v in zip(shipped, verdicts, strict=True) if not v.valid]
    kinds = Counter("vaw" if v.reasons == VAW_GUARD else "glvw" for _, _, v in invalid)
    print(
        f"\nshipped: {len(shipped)} checked in {elapsed:.2f}s, "
        f"invalid under Tensile 4.44 rules: {dict(kinds)}"
    )
    # Real Tensile 4.44 Solution() flags exactly these (TensileCreateLibrary builds them anyway): 801 HHS/HSS
    # solutions store VectorAtomicWidth 2, which 4.44 allows only for a 2-byte compute type, and 9 hit the
    # GLVW != VW shift-pointer rule.
    assert kinds == {"vaw": 801, "glvw": 9}
    for lib, sol, v in invalid:
        if v.reasons == VAW_GUARD:
            fam = lib.family
            assert (fam.a.char, fam.compute.char, sol["VectorAtomicWidth"]) == ("H", "S", 2)
            assert check_raw(lib, own_values(sol, drop=("VectorAtomicWidth",))).valid
        else:
            assert all(GLVW_GOTCHA.match(r) for r in v.reasons), v.reasons
    assert elapsed < 5


def test_shipped_derived_values_agree(shipped):
    agree, disagree = Counter(), []
    for lib, sol in shipped:
        derived = check_raw(lib, own_values(sol)).derived
        for key in DERIVED_KEYS:
            if key in sol and key in derived:
                if derived[key] == sol[key]:
                    agree[key] += 1
                else:
                    disagree.append((lib.name, sol["SolutionNameMin"], key, sol[key], derived[key]))
    print(f"\nderived agreement: {sum(agree.values())} values, {len(disagree)} disagreements; {dict(agree)}")
    assert not disagree, disagree[:10]
    assert agree["MacroTile0"] == agree["LdsNumElements"] == agree["GlobalLoadVectorWidthA"] == 3066
    assert agree["NumLoadsA"] == sum("NumLoadsA" in sol for _, sol in shipped)


def test_shipped_solutions_as_candidates(shipped):
    """Only the PARAMS knobs, everything else at Tensile's defaults (what a proposer can express)."""
    skipped, invalid, checked = Counter(), Counter(), 0
    for lib, sol in shipped:
        knobs = {k: sol[k] for k in PARAMS if k in sol}
        try:
            canonical(knobs)
        except CandidateError as e:
            skipped[str(e).split("=")[0]] += 1
            continue
        v = check(lib, knobs)
        checked += 1
        if not v.valid:
            invalid[v.reasons[0]] += 1
            # Every such rejection comes from a non-PARAMS default that differs from the solution's own value.
            assert not check_raw(lib, own_values(sol, drop=("VectorAtomicWidth",))).reasons or any(
                GLVW_GOTCHA.match(r) for r in v.reasons
            )
    print(f"\nas candidates: skipped {dict(skipped)}; invalid with defaults {sum(invalid.values())}:")
    for reason, n in invalid.most_common():
        print(f"  {n:5d}  {reason}")
    # Every shipped solution is expressible in PARAMS and checked; the 165 that are illegal with the other
    # parameters at Tensile's defaults (GSU algorithm, fractional loads, GLVW) are each explained above.
    assert checked == len(shipped) == 3066 and not skipped
    assert sum(invalid.values()) == 165, dict(invalid)


def test_golden_tcl_names_agree(golden_dir: Path, vega10_dir: Path):
    """Kernel names TensileCreateLibrary 4.44 wrote for gfx90c encode GLVW/VW/NLC it derived."""
    pairs = {"HHS_BH_NT": "Cijk_Ailk_Bjlk_HHS_BH", "HB_TN": "Cijk_Alik_Bljk_HB", "DB_NN": "Cijk_Ailk_Bljk_DB"}
    checked = 0
    for folder, name in pairs.items():
        lib = Library.parse(name)
        sols = yaml.load((vega10_dir / f"vega10_{name}.yaml").read_text(), Loader=yaml.CSafeLoader)[5]
        out = yaml.load(
            (golden_dir / f"tcl/gfx90c-merged-yaml/{folder}/TensileLibrary.yaml").read_text(),
            Loader=yaml.CSafeLoader,
        )["solutions"]
        for entry in out:
            derived = check_raw(lib, own_values(sols[entry["index"]])).derived
            mt = re.search(r"_MT(\d+)x(\d+)x(\d+)_", entry["name"])
            assert (derived["MacroTile0"], derived["MacroTile1"], derived["DepthU"]) == tuple(
                map(int, mt.groups())
            )
            for token, key in (
                ("GLVWA", "GlobalLoadVectorWidthA"),
                ("GLVWB", "GlobalLoadVectorWidthB"),
                ("_VW", "VectorWidth"),
                ("NLCA", "NumLoadsCoalescedA"),
                ("NLCB", "NumLoadsCoalescedB"),
            ):
                m = re.search(token + r"(\d+)(?:_|$)", entry["name"])
                if m:
                    assert derived[key] == int(m.group(1)), (entry["name"], key)
                    checked += 1
    assert checked > 300


def test_limits_from_arch_profiles():
    profiles = sorted((Path(__file__).resolve().parents[1] / "arch_profiles").glob("*.yaml"))
    if not profiles:
        pytest.skip("no arch profiles yet")
    for path in profiles:
        profile = yaml.safe_load(path.read_text())
        lim = Limits.from_profile(profile)
        assert lim.lds_bytes == profile.get("max_lds_per_workgroup", 65536)
        assert lim.wavefront_size == profile.get("wavefront_size", 64)
        if not lim.has_mfma:  # every shipped-deck SGEMM kernel fits a gfx9 profile's limits
            assert check(SGEMM_NT, sgemm((8, 8), (16, 16, 1), DepthU=16, VectorWidth=4), lim).valid


def test_resolving_never_changes_a_verdict_and_merges_what_tensile_merges():
    """legality.resolve puts a candidate in Tensile's resolved form (the id's input): the verdict is the
    same before and after, resolving is idempotent, and the forms Tensile builds as one kernel meet."""
    import random

    from oto.gemm import PATTERNS
    from oto.tensile import legality

    rng = random.Random(5)
    for _ in range(600):
        lib = Library.build(
            rng.choice(["SB", "DB", "HB", "HHS_BH", "HSS_BH", "ZB_GB"]), rng.choice(list(PATTERNS))
        )
        c = canonical({k: rng.choice(p.values) for k, p in PARAMS.items()})
        r = legality.resolve(lib, c)
        assert legality.check(lib, c).valid == legality.check(lib, r).valid, (lib.name, c)
        assert legality.resolve(lib, r) == r
    sb = Library.parse("Cijk_Ailk_Bljk_SB")  # NN: A is read along the tile (TLU), B is not
    base = canonical({"ThreadTile": [4, 4], "WorkGroup": [16, 16, 1], "DepthU": 16, "VectorWidth": 4})
    src = {**base, "KernelLanguage": "Source"}
    assert legality.resolve(sb, {**src, "LdsPadA": -1, "LdsPadB": -1}) == legality.resolve(sb, src)
    auto = legality.resolve(sb, {**base, "LdsPadA": -1, "LdsPadB": -1})
    assert (auto["LdsPadA"], auto["LdsPadB"]) == (0, 4)
    assert legality.resolve(sb, {**base, "1LDSBuffer": -1})["1LDSBuffer"] == 0
    # an extra that changes nothing is dropped; one that does is kept
    assert legality.resolve(sb, {**base, "GlobalSplitUAlgorithm": "MultipleBuffer"}) == base
    assert (
        legality.resolve(sb, {**base, "GlobalSplitU": 2, "GlobalSplitUAlgorithm": "MultipleBuffer"})[
            "GlobalSplitUAlgorithm"
        ]
        == "MultipleBuffer"
    )

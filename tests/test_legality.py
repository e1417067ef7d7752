from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from oto.gemm import Family, Library
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


def test_the_limits_without_a_profile_are_gfx90cs_own():
    """``Limits()`` (legality where no profile is given: tests, tools) is gfx90c's; the figures live in its
    profile, and its fields' defaults in the profile schema: this keeps the copy from drifting."""
    import json

    from oto.hardware.profile import load_profile

    root = Path(__file__).resolve().parents[1]
    assert Limits() == Limits.from_profile(load_profile(root / "arch_profiles" / "gfx90c.yaml"))
    schema = json.loads((root / "workflow" / "oto" / "schemas" / "arch_profile.schema.json").read_text())
    assert Limits().max_workgroup_size == schema["properties"]["max_workgroup_size"]["default"]
    caps_from = schema["properties"]["tensile"]["properties"]["caps_from"]["default"]
    assert "gfx" + "".join(map(str, Limits().caps_from)) == caps_from
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
        assert lim.isa == tuple(profile["isa"])
        assert lim.caps.has_wave32 == (32 in profile.get("wavefront_sizes", [64]))
        # every shipped-deck SGEMM kernel (wave64 VALU) fits every profile's limits
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


def test_the_memo_answers_as_a_fresh_derivation():
    """check() and resolve() remember their answers per process (a job judges the same shipped solutions
    several times): each answer equals a fresh derivation's, whatever was asked before, configurations one
    knob apart and one configuration under two limits included; changing a returned form changes no later
    answer."""
    import random

    from oto.tensile import legality

    legality._checked.clear()
    legality._resolved.clear()
    big = sgemm((8, 8), (16, 16, 1), DepthU=64, VectorWidth=4)
    one_knob = {**big, "PrefetchGlobalRead": 0}  # 65536 bytes of LDS instead of 131072
    small = Limits(lds_bytes=32768)
    for _ in range(2):  # the second round answers from the memo
        assert not check(SGEMM_NT, big).valid and check(SGEMM_NT, one_knob).valid
        assert check(SGEMM_NT, one_knob).derived["lds_bytes"] == 65536
        assert "Kernel Uses 65536 > 32768 bytes of LDS" in check(SGEMM_NT, one_knob, small).reasons
        assert check(SGEMM_NT, one_knob, Limits()).valid
        assert legality.resolve(SGEMM_NT, one_knob)["PrefetchGlobalRead"] == 0
        assert legality.resolve(SGEMM_NT, big)["PrefetchGlobalRead"] == 1
    assert len(legality._checked) == 3 and len(legality._resolved) == 2  # no limits: Limits()
    # equal but not identical inputs stay apart (True for 1, a tuple for a list): each its own answer
    as_bool, as_tuple = {**one_knob, "PrefetchGlobalRead": False}, {**one_knob, "ThreadTile": (8, 8)}
    assert legality._memo_key(SGEMM_NT, as_bool, None) != legality._memo_key(SGEMM_NT, one_knob, None)
    assert legality._memo_key(SGEMM_NT, as_tuple, None) != legality._memo_key(SGEMM_NT, one_knob, None)
    assert check(SGEMM_NT, as_bool) == check_raw(SGEMM_NT, canonical(as_bool))
    form = legality.resolve(SGEMM_NT, one_knob)
    form["ThreadTile"].append(99)
    form["DepthU"] = 8
    assert legality.resolve(SGEMM_NT, one_knob) == legality._resolve(SGEMM_NT, one_knob, None)
    rng = random.Random(7)
    libs = [Library.build("SB", "NT"), Library.build("HHS_BH", "NN")]
    pool = [canonical({k: rng.choice(p.values) for k, p in PARAMS.items()}) for _ in range(60)]
    pool += [{**c, "DepthU": d} for c in pool[:20] for d in (8, 16)]  # neighbours one knob apart
    for _ in range(400):
        lib, c = rng.choice(libs), rng.choice(pool)
        fresh = check_raw(lib, canonical(c))
        assert check(lib, c) == fresh, (lib.name, c)
        try:
            want = legality._resolve(lib, c, None)
        except CandidateError:
            continue
        assert legality.resolve(lib, c) == want, (lib.name, c)


# ---- RDNA: gfx10.3 (wave32, dot-product layouts) and gfx11 (WMMA) ----

GFX1035 = Limits(isa=(10, 3, 5), caps_from=(10, 3, 0))
GFX1103 = Limits(isa=(11, 0, 3), caps_from=(11, 0, 2))
# A WMMA kernel of navi31's kind: [16, 16, 16, 1], wave tile 4 x 4, 2 x 2 waves (MT 128). Without local-read
# prefetch: with PrefetchLocalRead 1 real Tensile 4.44 allocates it 299 VGPRs (test_wmma_vgpr_lower_bound).
WMMA_HGEMM = {
    "KernelLanguage": "Assembly",
    "MatrixInstruction": [16, 16, 16, 1],
    "WavefrontSize": 32,
    "ThreadTile": [4, 64],
    "WorkGroup": [32, 4, 1],
    "DepthU": 32,
    "VectorWidth": 4,
    "GlobalReadVectorWidth": 8,
    "LocalReadVectorWidth": 16,
    "SourceSwap": 1,
    "TransposeLDS": 1,
    "WaveSeparateGlobalReadA": 1,
    "WaveSeparateGlobalReadB": 1,
    "PrefetchGlobalRead": 1,
    "PrefetchLocalRead": 0,
}


def test_isa_rule_families_and_unknown_isas():
    from oto.tensile.isa import UnknownIsa, isa_caps

    assert GFX1103.caps.has_wmma and GFX1103.caps.has_wave32 and not GFX1103.caps.has_mfma
    assert GFX1035.caps.has_wave32 and not GFX1035.caps.has_wmma and GFX1035.caps.v_dot4_i32_i8
    assert Limits().caps.wavefront_sizes == (64,) and isa_caps((9, 0, 6)).has_ecc_half
    for isa, donor, field in (
        ((12, 0, 0), None, "isa"),  # gfx12: not modelled
        ((9, 0, 8), None, "isa"),  # MFMA: not modelled
        ((10, 1, 0), None, "isa"),  # RDNA1: not modelled
        ((11, 0, 3), None, "tensile.caps_from"),  # Tensile has no caps of its own for gfx1103
        ((11, 0, 3), (10, 3, 0), "tensile.caps_from"),  # a donor of another family
    ):
        with pytest.raises(UnknownIsa) as info:
            isa_caps(isa, donor)
        assert info.value.field == field, (isa, donor)


def test_wave32_thread_counts():
    # 32 threads make a workgroup on RDNA (wave32), not on gfx9, and wave32 needs an assembly kernel.
    small = sgemm((4, 4), (8, 4, 1), DepthU=16, VectorWidth=4, WavefrontSize=32)
    assert check_raw(SGEMM_NT, small, GFX1035).valid
    v = check_raw(SGEMM_NT, small, Limits())
    assert "WavefrontSize=32 not supported for ISA (9, 0, 12)" in v.reasons
    assert not check_raw(SGEMM_NT, {**small, "WavefrontSize": 64}, GFX1035).valid  # 32 % 64
    src = check_raw(SGEMM_NT, {**small, "KernelLanguage": "Source"}, GFX1035)
    assert "WavefrontSize=32 not yet supported for source kernels." in src.reasons
    # A HIP-source kernel has Tensile's ISA (0, 0, 0): no wave32 either
    assert "WavefrontSize=32 not supported for ISA (0, 0, 0)" in src.reasons


def test_wmma_kernel_geometry_and_rules():
    hhs = Library.build("HHS_BH", "TN")
    v = check_raw(hhs, WMMA_HGEMM, GFX1103)
    assert v.valid, v.reasons
    assert (v.derived["MacroTile0"], v.derived["MacroTile1"], v.derived["NumThreads"]) == (128, 128, 128)
    assert v.derived["MIInputPerThread"] == 16 and v.derived["LoopIters"] == 2
    # WMMA needs wave32, half/bf16/int8 data and an ISA that has it
    assert (
        "WMMA only suppport on WGP mode, wave size = 32"
        in check_raw(hhs, {**WMMA_HGEMM, "WavefrontSize": 64}, GFX1103).reasons
    )
    sgemm_wmma = check_raw(Library.build("SB", "TN"), WMMA_HGEMM, GFX1103)
    assert "WMMA only supports half, bf16 and i8 types" in sgemm_wmma.reasons
    assert "isa (10, 3, 5) doesn't support matrix instruction" in check_raw(hhs, WMMA_HGEMM, GFX1035).reasons
    assert "isa (9, 0, 12) doesn't support matrix instruction" in check_raw(hhs, WMMA_HGEMM).reasons
    # the thread tile of a WMMA kernel is [MIWaveTile0, MIWaveTile1 * 16]
    assert (
        "invalid ThreadTile1 8 for MatrixInstM 16"
        in check_raw(hhs, {**WMMA_HGEMM, "ThreadTile": [4, 8]}, GFX1103).reasons
    )
    # WMMA writes one element per register: without SourceSwap the store width must be 1
    plain = {k: v for k, v in WMMA_HGEMM.items() if k != "SourceSwap"}
    assert (
        "MFMA non-SourceSwap mode doesn't support miovw(1) with svw(4)"
        in check_raw(hhs, plain, GFX1103).reasons
    )
    assert check_raw(hhs, {**plain, "StoreVectorWidth": 1, "VectorWidth": 1}, GFX1103).valid
    # ScheduleIterAlg 2 sets InnerUnroll = DepthU / 16, PrefetchLocalRead 1 and one LDS buffer (two A/B
    # fragments then: over the VGPR budget, as real Tensile found, test_wmma_vgpr_lower_bound)
    sia2 = check_raw(hhs, {**WMMA_HGEMM, "ScheduleIterAlg": 2, "PrefetchLocalRead": 3}, GFX1103)
    assert sia2.derived["1LDSBuffer"] == 1 and sia2.derived["LoopIters"] == 1  # DepthU 32 / (16 x 2)
    assert sia2.reasons == ("needs at least 288 VGPRs > 256 (KernelWriterAssembly overflowedResources)",)


def test_wmma_vgpr_lower_bound():
    """WMMA kernels accumulate in architected VGPRs (MIArchVgpr): KernelWriterAssembly's "total vgpr: N not in
    [0, 256]" counts for them too. Measured with real Tensile 4.44.0 (a164ed70) for gfx1103 (gfx1102's caps):
    the kernels over 256 are rejected with a bound at or under Tensile's count, the ones it built are not."""
    hhs = Library.build("HHS_BH", "TN")
    sia2 = {**WMMA_HGEMM, "ScheduleIterAlg": 2, "PrefetchLocalRead": 3}
    plain = {k: v for k, v in WMMA_HGEMM.items() if k != "SourceSwap"}
    built = {
        "PLR0": (hhs, WMMA_HGEMM),
        "PLR0 no SourceSwap": (hhs, {**plain, "StoreVectorWidth": 1, "VectorWidth": 1}),
    }
    surrogate = {  # two gfx1103 HB candidates of a simulated run (bench/tensile_conformance.py)
        "KernelLanguage": "Assembly", "ThreadTile": [4, 128], "WorkGroup": [32, 4, 1], "DepthU": 16,
        "VectorWidth": 2, "GlobalReadVectorWidth": 4, "PrefetchGlobalRead": 1, "PrefetchLocalRead": 1,
        "WorkGroupMapping": 4, "1LDSBuffer": 1, "WavefrontSize": 32, "MatrixInstruction": [16, 16, 16, 1],
        "SourceSwap": 1, "WaveSeparateGlobalReadA": 1, "WaveSeparateGlobalReadB": 1, "ScheduleIterAlg": 2,
    }  # fmt: skip
    surrogate_tn = {
        **{k: v for k, v in surrogate.items() if k != "ScheduleIterAlg"},
        "GlobalReadVectorWidth": 8, "LdsPadA": 8, "WorkGroupMapping": 8, "1LDSBuffer": 0, "TransposeLDS": 1,
    }  # fmt: skip
    overflowed = {  # Tensile's total VGPRs
        "PLR1": (hhs, {**WMMA_HGEMM, "PrefetchLocalRead": 1}, 299),
        "SIA2": (hhs, sia2, 299),
        "MT128x256 HB": (Library.parse("Cijk_Ailk_Bjlk_HB"), surrogate, 397),
        "MT128x256 HB TransposeLDS": (Library.parse("Cijk_Alik_Bjlk_HB"), surrogate_tn, 391),
    }
    for name, (lib, params) in built.items():
        v = check_raw(lib, params, GFX1103)
        assert v.valid and 0 < v.derived["vgpr_lower_bound"] <= 256, (name, v.reasons)
    for name, (lib, params, vgprs) in overflowed.items():
        v = check_raw(lib, params, GFX1103)
        assert not v.valid and 256 < v.derived["vgpr_lower_bound"] <= vgprs, (name, v.reasons)
        assert all("VGPRs" in r for r in v.reasons), (name, v.reasons)


def test_gfx11_lifts_the_b128_local_read_limit_only_for_assembly():
    # ldsPaddingAuto rejects local reads wider than 128 bits unless the ISA has WMMA (Tensile's own quirk)
    dgemm = sgemm((4, 4), (16, 16, 1), DepthU=16, VectorWidth=2, LocalReadVectorWidth=4)
    b128 = "LocalReadVectorWidth=%u results in attemping to read LDS larger than b128, reject"
    lib = Library.build("DB", "NN")
    assert b128 in check_raw(lib, dgemm, GFX1035).reasons
    assert b128 not in check_raw(lib, dgemm, GFX1103).reasons
    assert b128 in check_raw(lib, {**dgemm, "KernelLanguage": "Source"}, GFX1103).reasons


def test_local_dot_layout_is_the_dot_product_path():
    hhs, i8 = Library.build("HHS_BH", "NN"), Library.build("I8II_BH", "NN")
    dot2 = sgemm((8, 8), (16, 16, 1), DepthU=16, VectorWidth=4, LocalDotLayout=2, InnerUnroll=2)
    assert check_raw(hhs, dot2, GFX1035).valid
    assert (
        "only support LocalDotLayout = InnerUnroll when LocalDotLayout > 1"
        in check_raw(hhs, {**dot2, "InnerUnroll": 1}, GFX1035).reasons
    )
    assert (
        "doesn't support non HPA FP16 with LocalDotLayout == 2"
        in check_raw(Library.build("HB", "NN"), dot2, GFX1035).reasons
    )
    assert "Only support Int8 HPA and LocalDotLayout 4" in check_raw(i8, dot2, GFX1035).reasons


def test_atomic_add_split_u_follows_the_isa():
    params = sgemm((4, 4), (16, 16, 1), DepthU=16, VectorWidth=4, GlobalSplitU=2, GlobalSplitUAtomicAdd=True)
    gfx9 = check_raw(SGEMM_NT, params).reasons
    assert "GlobalSplitUAtomicAdd is not supported by this arch" in gfx9
    gfx11 = check_raw(SGEMM_NT, params, GFX1103).reasons
    assert "GlobalSplitUAtomicAdd is not supported by this arch" not in gfx11
    # Tensile reads VectorAtomicWidth before resolving its -1 default
    assert gfx11 == ("GlobalSplitUAtomicAdd only compatible with VectorAtomicWidth=1",)
    assert check_raw(SGEMM_NT, {**params, "VectorAtomicWidth": 1}, GFX1103).valid


def test_ecc_half_rules_of_gfx906():
    gfx906 = Limits(isa=(9, 0, 6), caps_from=(9, 0, 6))
    hb = sgemm((4, 4), (16, 16, 1), DepthU=16, VectorWidth=2)
    reasons = check_raw(Library.build("HB", "NN"), hb, gfx906).reasons
    assert "Archs with HasEccHalf require AF0EM%2==0 except for HPA kernels" in reasons
    assert check_raw(Library.build("HB", "NN"), {**hb, "AssertFree0ElementMultiple": 2}, gfx906).valid
    assert check_raw(Library.build("HB", "NN"), hb).valid  # gfx900 has no ECC-half rules


def test_rdna_space_and_candidate_forms():
    from oto.tensile import legality
    from oto.tensile.params import PARAMS, candidate_id, space_params

    assert space_params(Limits().caps) is PARAMS  # gfx9: the space (and every id) as before
    rdna2, rdna3 = space_params(GFX1035.caps), space_params(GFX1103.caps)
    assert {"WavefrontSize", "LocalDotLayout"} <= set(rdna2) and "MatrixInstruction" not in rdna2
    assert {"MatrixInstruction", "SourceSwap", "TransposeLDS"} <= set(rdna3)
    assert (8, 4, 1) in rdna2["WorkGroup"].values and (8, 4, 1) not in PARAMS["WorkGroup"].values
    assert (4, 64) in rdna3["ThreadTile"].values and rdna3["LocalDotLayout"].values == (1, 2)
    # per library: only the knobs its data may use (WMMA: half, bf16, int8; dot layouts: HPA half, int8)
    sb, hhs = (
        space_params(GFX1103.caps, Family.parse("SB")),
        space_params(GFX1103.caps, Family.parse("HHS_BH")),
    )
    assert "MatrixInstruction" not in sb and "LocalDotLayout" not in sb and "WavefrontSize" in sb
    assert {"MatrixInstruction", "LocalDotLayout"} <= set(hhs)
    assert space_params(GFX1035.caps, Family.parse("I8II_BH"))["LocalDotLayout"].values == (1, 4)
    # a library's space: its WMMA points are wave32 and SourceSwap (as navi31's), its VALU points leave the
    # matrix-only knobs at Tensile's default; gfx9's space completes nothing
    from oto.search.tensile_space import tensile_space

    space = tensile_space(Library.build("HHS_BH", "TN"), GFX1103)
    assert "SourceSwap" not in space.names
    values = {name: space.parameter(name).values for name in space.names}
    wmma = space.config(
        tuple(values[n].index((16, 16, 16, 1)) if n == "MatrixInstruction" else 0 for n in values)
    )
    assert (wmma["SourceSwap"], wmma["WavefrontSize"]) == (1, 32)
    valu = space.config(
        tuple(len(values[n]) - 1 if n in ("TransposeLDS", "ScheduleIterAlg") else 0 for n in values)
    )
    assert (valu["TransposeLDS"], valu["ScheduleIterAlg"], valu["MatrixInstruction"]) == (0, 1, [])
    assert tensile_space(Library.build("HHS_BH", "TN"), Limits()).complete is None
    # ISA knobs at Tensile's default leave a candidate's form and id as they were
    base = canonical(sgemm((4, 4), (16, 16, 1), DepthU=16, VectorWidth=4))
    assert canonical({**base, "WavefrontSize": 64, "MatrixInstruction": []}) == base
    assert candidate_id({**base, "WavefrontSize": 32}) != candidate_id(base)
    with pytest.raises(CandidateError, match="WavefrontSize=16 is not a legal value"):
        canonical({**base, "WavefrontSize": 16})
    # a list or mapping where a number belongs is an illegal value too (the legal values are sets)
    for knob, bad in (("DepthU", [16]), ("VectorWidth", {"x": 4}), ("WavefrontSize", [32])):
        with pytest.raises(CandidateError, match=f"{knob}="):
            canonical({**base, knob: bad})
    loose = canonical({**base, "DepthU": 16.0, "VectorWidth": True})
    assert loose == {**base, "DepthU": 16, "VectorWidth": 1}
    wmma = canonical({k: v for k, v in WMMA_HGEMM.items() if k != "LocalReadVectorWidth"})
    assert legality.resolve(Library.build("HHS_BH", "TN"), wmma, GFX1103)["MatrixInstruction"] == [
        16,
        16,
        16,
        1,
    ]


def _shipped(folder: Path, names: tuple[str, ...] | None = None) -> list[tuple[Library, dict]]:
    out = []
    for path in sorted(folder.glob("*_Cijk_*.yaml")):
        if names is None or path.stem in names:
            doc = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
            out += [(Library.parse(path.stem.split("_", 1)[1]), sol) for sol in doc[5]]
    return out


def _judge_shipped(shipped, limits):
    """(invalid solutions' first reasons, derived values that disagree with the file's, values compared)."""
    invalid, disagree, compared = Counter(), [], 0
    for lib, sol in shipped:
        v = check_raw(lib, own_values(sol), limits)
        if not v.valid:
            invalid[v.reasons[0]] += 1
            assert v.reasons == VAW_GUARD, (lib.name, sol["SolutionNameMin"], v.reasons)
        for key in (*DERIVED_KEYS, "LoopIters", "LdsPadA", "LdsPadB", "MIInputPerThread"):
            if key in sol and key in v.derived:
                compared += 1
                if v.derived[key] != sol[key]:
                    disagree.append((lib.name, sol["SolutionNameMin"], key, sol[key], v.derived[key]))
    return invalid, disagree, compared


# One file of each kind: navi21's dot-product half (LocalDotLayout 2) and int8 (4) kernels, navi31's WMMA half
# and VALU single kernels. The full folders run in the slow test below.
NAVI_SAMPLE = (
    "navi21_Cijk_Alik_Bjlk_HHS_BH",
    "navi21_Cijk_Ailk_Bljk_I8II_BH",
    "navi31_Cijk_Alik_Bjlk_HB",
    "navi31_Cijk_Alik_Bjlk_SB",
)


@pytest.mark.parametrize("limits", [GFX1035, GFX1103], ids=["gfx1035", "gfx1103"])
def test_shipped_rdna_solutions_sample(navi21_dir, navi31_dir, limits):
    folder = navi21_dir if limits is GFX1035 else navi31_dir
    shipped = _shipped(folder, NAVI_SAMPLE)
    assert len(shipped) > 80
    invalid, disagree, compared = _judge_shipped(shipped, limits)
    assert not disagree, disagree[:5]
    assert compared > 20 * len(shipped)
    # the one rule Tensile 4.44 itself flags in shipped files: VectorAtomicWidth 2 with an FP32 compute type
    assert set(invalid) <= {VAW_GUARD[0]}


@pytest.mark.slow
def test_shipped_rdna_solutions_all(navi21_dir, navi31_dir):
    """Every navi21 solution on gfx1035 (gfx1030's caps) and every navi31 one on gfx1103 (gfx1102's): the
    verdicts of Tensile 4.44's Solution() (all valid but 1,229 and 1,134 VectorAtomicWidth-2 HPA solutions,
    measured with the fetched Tensile) and every derived value the files store."""
    for folder, limits, n, vaw in ((navi21_dir, GFX1035, 4629, 1229), (navi31_dir, GFX1103, 6753, 1134)):
        shipped = _shipped(folder)
        assert len(shipped) == n
        invalid, disagree, compared = _judge_shipped(shipped, limits)
        assert not disagree, disagree[:5]
        assert invalid == {VAW_GUARD[0]: vaw}, invalid
        print(f"\n{folder.name}: {n} solutions, {compared} derived values agree; invalid {dict(invalid)}")

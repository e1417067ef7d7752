"""The RDNA APUs' decks: read from the spoof target's shipped logic (navi21 for gfx1035, navi31 for gfx1103
and gfx1150) through the profile's stock library; the families those decks have and vega10 lacks (I8II_BH,
BBS_BH and their _GB forms) tuned like the others; their WMMA kernels derived as Tensile derives them; a deck
the profile's GPU cannot run refused at dry-run, naming file and field (issue #30)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from oto.deck.sources import SHIPPED_MANIFEST, SHIPPED_MANIFESTS, library_from_logic, read_manifest
from oto.deck.tuning_sizes import shipped_seeds
from oto.gemm import Family, Library
from oto.hardware.ceilings import family_peak_gflops
from oto.hardware.profile import load_profile
from oto.run.plan import PlanError, plan_run
from oto.search.strategies import Evidence, make_strategy
from oto.search.strategies.common import history
from oto.search.tensile_space import tensile_space
from oto.tensile import legality
from oto.tensile import solution_fields as sf
from oto.tensile.baseline import baseline_kernel
from oto.tensile.isa import caps_donor
from oto.tensile.logic_reader import read_logic_file
from oto.tensile.logic_writer import logic_file_name, solution_entry, write_logic_file
from oto.tensile.params import space_params

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
NAVI21 = read_manifest(SHIPPED_MANIFESTS["gfx1030"])
NAVI31 = read_manifest(SHIPPED_MANIFESTS["gfx1100"])
NEW_FAMILIES = ("I8II_BH", "I8II_BH_GB", "BBS_BH", "BBS_BH_GB")


def profile(arch: str) -> dict:
    return load_profile(ROOT / "arch_profiles" / f"{arch}.yaml")


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)  # arch_profiles/ is resolved from the working directory, as in Snakemake


@pytest.mark.parametrize(
    ("arch", "manifest", "families"),
    [
        ("gfx90c", "deck_vega10.json.gz", {"DB", "ZB_GB"}),
        ("gfx902", "deck_vega10.json.gz", {"DB", "ZB_GB"}),
        ("gfx1035", "deck_navi21.json.gz", {"I8II_BH_GB", "HHS_BH_GB"}),
        ("gfx1103", "deck_navi31.json.gz", {"I8II_BH_GB", "BBS_BH_GB"}),
        ("gfx1150", "deck_navi31.json.gz", {"I8II_BH_GB", "BBS_BH_GB"}),
    ],
)
def test_each_arch_plans_on_its_stock_librarys_deck(arch, manifest, families):
    """The config's families are given per stock library; the default deck is the manifest of the library
    the GPU's owners run spoofed (stock_library.arch)."""
    plan = plan_run({**CONFIG, "arch": arch}, ["config/config.yaml"])
    assert Path(plan.deck["path"]).name == manifest
    assert plan.deck["arch"] == profile(arch)["stock_library"]["arch"]
    assert set(plan.families) == families and len(plan.libraries) == 8


def test_an_arch_oto_ships_no_manifest_of_keeps_vega10s():
    plan = plan_run({**CONFIG, "arch": "gfx906", "families": ["DB"]})  # vega20: none shipped
    assert Path(plan.deck["path"]) == SHIPPED_MANIFEST.relative_to(ROOT)


def test_families_per_stock_library_name_the_missing_entry():
    with pytest.raises(
        PlanError, match=r"^c\.yaml: field 'families': no entry for this arch's stock library navi31"
    ):
        plan_run({"arch": "gfx1103", "families": {"vega10": ["DB"]}}, ["c.yaml"])
    # a plain list still applies to any arch; a family the deck lacks is named with the deck's families
    with pytest.raises(PlanError, match=r"field 'families': DB not in the deck .*known: BBS_BH, BBS_BH_GB"):
        plan_run({"arch": "gfx1103", "families": ["DB"]}, ["c.yaml"])


def test_the_rdna_manifests_hold_the_families_vega10_lacks():
    vega10 = set(read_manifest(SHIPPED_MANIFEST).families())
    assert set(NAVI31.families()) == {"SB", "SB_GB", "HB", "HB_GB", "HHS_BH", "HHS_BH_GB", *NEW_FAMILIES}
    assert set(NAVI21.families()) == set(NAVI31.families()) - {"BBS_BH", "BBS_BH_GB"}
    assert not vega10 & set(NEW_FAMILIES)
    assert (NAVI21.arch_source, NAVI31.arch_source) == ("gfx1030", "gfx1100")


@pytest.mark.parametrize("code", NEW_FAMILIES)
def test_the_new_families_are_tuned_like_the_others(code):
    """Family codes, ceilings, the search space (WMMA on gfx1103, dot4 for int8 on gfx1035), a baseline
    kernel and the spoof floor of every size all exist for I8II_BH, BBS_BH and their _GB forms."""
    fam = Family.parse(code)
    assert fam.rate_class == ("int8" if code.startswith("I8") else "bf16")
    for arch, deck in (("gfx1103", NAVI31), ("gfx1035", NAVI21)):
        name = next((n for n in deck.libraries if Library.parse(n).family.code == code), None)
        if name is None:
            assert arch == "gfx1035" and code.startswith("BBS")  # navi21 ships no bf16
            continue
        prof = profile(arch)
        limits = legality.Limits.from_profile(prof)
        assert family_peak_gflops(prof, fam) > 0
        space = space_params(limits.caps, fam)
        if arch == "gfx1103":
            assert (16, 16, 16, 1) in space["MatrixInstruction"].values
        elif code.startswith("I8"):
            assert 4 in space["LocalDotLayout"].values
        lib = Library.parse(name)
        assert legality.check(lib, baseline_kernel(lib, limits), limits).valid
        lib_deck = deck.libraries[name]
        refs = lib_deck.references(range(len(lib_deck.sizes)), limits)
        assert all(r["id"] is not None for r in refs.values()), name


def test_wmma_kernels_derive_without_raising():
    """Every navi31 WMMA solution of the new families derives (solution_fields.derive, as TensileCreateLibrary
    re-derives it) to the geometry legality gives, and names its matrix instruction."""
    for name, lib in NAVI31.libraries.items():
        if Library.parse(name).family.code not in ("I8II_BH_GB", "BBS_BH_GB") or "Ailk_Bljk" not in name:
            continue
        pt = sf.ProblemTypeInfo.from_dict(lib.problem_type)
        states = []
        for sol in lib.solutions:
            params = sol["params"]
            state = sf.derive(params, pt, (11, 0, 0))
            if params.get("MatrixInstruction"):
                geometry = legality.check(
                    Library.parse(name), params, legality.Limits(isa=(11, 0, 0), caps_from=(11, 0, 0))
                )
                assert state["EnableMatrixInstruction"] is True
                assert (state["MacroTile0"], state["MacroTile1"]) == (
                    geometry.derived["MacroTile0"],
                    geometry.derived["MacroTile1"],
                )
                assert state["MatrixInstM"] == 16 and state["WavefrontSize"] == 32
            states.append(state)
        naming = sf.min_naming(states)
        names = [sf.kernel_name(st, pt, naming) for st in states]
        assert len(set(names)) == len(names)
        assert any("_MI16x16x16x1_" in n for n in names)
        pred = sf.problem_predicate(states[0], pt)
        assert {"type": "ArithmeticUnitCompatible", "value": "MFMA"} in pred["value"]


def test_a_wmma_kernel_for_an_isa_tensile_lacks_takes_its_familys_caps(tmp_path):
    """gfx1103 (11, 0, 3) is not in Tensile's tables: its WMMA kernels derive with gfx1102's caps, and a
    native-label logic file of them is written with kernel names."""
    assert caps_donor((11, 0, 3)) == (11, 0, 2) and caps_donor((11, 0, 0)) == (11, 0, 0)
    assert caps_donor((10, 3, 5)) == (10, 3, 1)
    lib = NAVI31.libraries["Cijk_Ailk_Bljk_BBS_BH_GB"]
    sols = [s for s in lib.solutions if s["params"].get("MatrixInstruction")][:3]
    path = write_logic_file(
        tmp_path / logic_file_name("gfx1103", lib.name),
        problem_type=lib.problem_type,
        solutions=[solution_entry(lib.problem_type, s["params"], s["index"]) for s in sols],
        exact_rows=[(lib.sizes[0], 0, 1.0)],
        schedule="gfx1103",
        architecture="gfx1103",
        device_names=["Device 15bf"],
    )
    written = yaml.safe_load(path.read_text())[5]
    assert all("_MI16x16x16x1_" in s["SolutionNameMin"] for s in written)


def test_a_deck_the_gpu_cannot_run_fails_the_dry_run_naming_file_and_field():
    """navi31's bf16 kernels are all WMMA: none runs on the RDNA2 APU (no WMMA), so its spoof floor would
    have nothing to race; the plan names the deck file, the library, its solutions and the profile's isa."""
    deck = {"source": "manifest", "path": str(SHIPPED_MANIFESTS["gfx1100"])}
    with pytest.raises(
        PlanError,
        match=r"deck_navi31\.json\.gz: library Cijk_Ailk_Bljk_BBS_BH, field 'solutions': none of its \d+ "
        r"shipped kernels can run on gfx1035 \(arch_profiles/gfx1035\.yaml field 'isa' \[10, 3, 5\]\)",
    ):
        plan_run({"arch": "gfx1035", "families": ["BBS_BH"], "patterns": ["NN"], "deck": deck})


def test_a_family_the_profile_has_no_rate_for_fails_the_dry_run(tmp_path, monkeypatch):
    data = yaml.safe_load((ROOT / "arch_profiles" / "gfx1103.yaml").read_text())
    del data["rates"]["bf16"]
    del data["wmma"]["rates"]["bf16"]
    (tmp_path / "arch_profiles").mkdir()
    (tmp_path / "arch_profiles" / "gfx1103.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    deck = {"source": "manifest", "path": str(SHIPPED_MANIFESTS["gfx1100"])}
    with pytest.raises(PlanError, match=r"arch_profiles/gfx1103\.yaml: field 'rates\.bf16': missing") as err:
        plan_run({"arch": "gfx1103", "families": ["BBS_BH_GB"], "patterns": ["NN"], "deck": deck}, ["c.yaml"])
    assert "\n" not in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize("code", NEW_FAMILIES)
def test_the_navi31_manifest_is_its_shipped_logic(navi31_dir, code):
    """Each new family's manifest entry is what its shipped logic file reads as (NN), and every solution of
    the file derives to the derived values the file stores."""
    name = f"Cijk_Ailk_Bljk_{code}"
    lf = read_logic_file(navi31_dir / f"navi31_{name}.yaml")
    assert library_from_logic(lf).figures() == NAVI31.libraries[name].figures()
    raw = yaml.load((navi31_dir / f"navi31_{name}.yaml").read_text(), Loader=yaml.CSafeLoader)
    pt = sf.ProblemTypeInfo.from_dict(raw[4])
    keys = ("MacroTile0", "MacroTile1", "NumThreads", "MIWaveGroup", "MIWaveTile", "VectorWidth", "LdsPadA")
    keys += ("LdsPadB", "StoreVectorWidth", "GlobalLoadVectorWidthA", "GlobalLoadVectorWidthB")
    keys += ("MIInputPerThread", "LocalReadVectorWidth", "VectorAtomicWidth", "1LDSBuffer")
    for sol in raw[5]:
        state = sf.derive(sol, pt, (11, 0, 0))
        assert {k: state[k] for k in keys if k in sol} == {k: sol[k] for k in keys if k in sol}


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1103"])
@pytest.mark.parametrize("name", ["Cijk_Alik_Bljk_HHS_BH", "Cijk_Ailk_Bljk_I8II_BH", "Cijk_Alik_Bjlk_HB"])
def test_navi31s_shipped_wmma_seeds_are_points_of_rdna3s_space(arch, name):
    """A shipped solution's canonical form omits the ISA knobs at Tensile's default (navi31's half kernels
    carry no LocalDotLayout, many no ScheduleIterAlg) and navi31's int8 kernels pad LDS by 16: every one of
    them was no point of RDNA3's space, so cold and warm runs started those libraries from random kernels.
    Each now indexes, is legal, and reaches the first generation as a shipped solution."""

    seeds = shipped_seeds(NAVI31.libraries[name], 32)
    space = tensile_space(Library.parse(name), legality.Limits.from_profile(profile(arch)))
    if name == "Cijk_Alik_Bljk_HHS_BH":
        assert not any("LocalDotLayout" in s for s in seeds)  # Tensile's default, 1, left out
    hist = history(Evidence(space, 0, [], seeds, frozenset()), space)
    assert len(hist.seeds) == len(seeds) > 0 and all(space.valid(i) for i in hist.seeds)
    for seed, idx in zip(seeds, hist.seeds, strict=True):
        assert all(space.config(idx)[k] == v for k, v in seed.items() if k in space.names)
    props = make_strategy("surrogate", 0).ask(Evidence(space, 0, [], seeds, frozenset()), 12)
    shipped = [p for p in props if p.proposer == "seed"]
    assert len(shipped) == 6 and [space.index(p.params) for p in shipped] == hist.seeds[:6]

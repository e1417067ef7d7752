"""The native floor (config deck.native_floor): where upstream ships a folder of logic for the GPU itself
(ROCm/rocm-libraries asm_full/gfx1103 and gfx1150: a stub SGEMM solution, navi33's logic copied), the tuned
winners also race its Matching table's pick at every size, and the acceptance report shows the speed-up over
it next to the score against the spoof floor (issue #30).

The native folder here is a small sample this test writes itself in the format of upstream's gfx1103 files
(one MT32x32x8 wave64 solution, one exact row, a Vega 10 device id); nothing fetched is kept."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from oto.deck.model import read_library_yaml, write_library_yaml
from oto.deck.sources import SHIPPED_MANIFESTS, deck_settings, load_run_deck, read_manifest
from oto.gemm import Library
from oto.hardware.profile import load_profile
from oto.measurement.finals import FinalRace, native_rows
from oto.reporting.acceptance import _native_markdown
from oto.reporting.figures import native_rows as native_table
from oto.run.plan import PlanError, plan_run
from oto.tensile import legality
from oto.tensile.logic_reader import LogicFileError
from oto.tensile.logic_writer import logic_file_name, solution_entry, write_logic_file
from oto.tensile.params import canonical

ROOT = Path(__file__).resolve().parents[1]
NAVI31 = read_manifest(SHIPPED_MANIFESTS["gfx1100"])
LIB = "Cijk_Ailk_Bljk_SB_GB"
# The kind of solution upstream's gfx1103 SGEMM file ships: one small VALU tile, wave64, no prefetch
STUB = canonical(
    {
        "KernelLanguage": "Assembly",
        "ThreadTile": [2, 2],
        "WorkGroup": [16, 16, 1],
        "DepthU": 8,
        "VectorWidth": 1,
        "GlobalReadVectorWidth": 1,
        "PrefetchGlobalRead": 0,
        "WorkGroupMapping": 8,
    }
)


def write_native(folder: Path, libraries=(LIB,), arch: str = "gfx1103") -> Path:
    """A gfx1103 logic folder with a one-solution file per library (upstream's stub, in its format); ``arch``:
    the GPU the files say they are for."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in libraries:
        lib = NAVI31.libraries[name]
        write_logic_file(
            folder / logic_file_name("gfx1103", name),
            problem_type=lib.problem_type,
            solutions=[solution_entry(lib.problem_type, STUB, 0)],
            exact_rows=[([126, 126, 1, 66], 0, 12.5)],
            schedule="navi33",
            architecture=arch,
            device_names=["Device 6863"],
        )
    return folder


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_the_native_floor_is_planned_attached_and_carried_in_deck_yaml(tmp_path):
    native = write_native(tmp_path / "gfx1103")
    cfg = {
        "arch": "gfx1103",
        "families": ["SB_GB", "I8II_BH_GB"],
        "patterns": ["NN"],
        "deck": {"native_floor": {"path": str(native)}},
    }
    plan = plan_run(cfg)
    assert plan.deck["native_floor"] == {"source": "logic", "path": str(native), "arch": "gfx1103"}
    assert str(native / f"gfx1103_{LIB}.yaml") in plan.deck_inputs[LIB]
    assert not any("gfx1103_" in f for f in plan.deck_inputs["Cijk_Ailk_Bljk_I8II_BH_GB"])
    _, selected, _ = load_run_deck(plan.deck, plan.libraries)
    lib = selected.libraries[LIB]
    assert lib.native_floor["label"] == "native" and lib.native_floor["arch"] == "gfx1103"
    assert selected.libraries["Cijk_Ailk_Bljk_I8II_BH_GB"].native_floor is None  # upstream ships it none
    write_library_yaml(lib, tmp_path / "deck.yaml", {})
    again = read_library_yaml(tmp_path / "deck.yaml")
    limits = legality.Limits.from_profile(load_profile(ROOT / "arch_profiles" / "gfx1103.yaml"))
    refs = again.native_references(range(len(again.sizes)), limits)
    assert {r["id"] for r in refs.values()} == {legality_id(limits)}  # the stub at every size
    assert again.references([0], limits)[0]["id"] != legality_id(limits)  # the spoof floor is navi31's
    # no native floor configured: nothing in the settings, nothing attached
    assert "native_floor" not in deck_settings(
        plan.config["deck"] | {"native_floor": {"path": None}}, plan.profile
    )


def legality_id(limits) -> str:
    from oto.tensile.params import candidate_id

    return candidate_id(legality.resolve(Library.parse(LIB), STUB, limits))


def test_a_native_floor_that_is_not_there_fails_the_dry_run(tmp_path):
    cfg = {"arch": "gfx1103", "families": ["SB_GB"], "deck": {"native_floor": {"path": str(tmp_path / "no")}}}
    with pytest.raises(PlanError, match=r"config field 'deck.native_floor.path': .* is not a folder"):
        plan_run(cfg)


def test_another_gpus_folder_as_the_native_floor_fails_the_dry_run_naming_the_file(tmp_path):
    """The native floor is upstream's library for the GPU being tuned: a gfx1150 folder given to a gfx1103
    run (the files identical but for that name, as upstream copies navi33's) is refused at dry-run, naming
    the file, what it is for and what to point at."""
    native = write_native(tmp_path / "gfx1150", arch="gfx1150")
    cfg = {"arch": "gfx1103", "families": ["SB_GB"], "deck": {"native_floor": {"path": str(native)}}}
    where = rf"config field 'deck.native_floor.path': .*gfx1103_{LIB}.yaml is upstream's library for gfx1150"
    with pytest.raises(PlanError, match=where + r", not for gfx1103, .* upstream's own gfx1103 folder"):
        plan_run(cfg)
    assert plan_run({**cfg, "arch": "gfx1150"}).deck["native_floor"]["arch"] == "gfx1150"


INT8 = "Cijk_Ailk_Bljk_I8II_BH"


def write_int8_native(folder: Path, pad: int) -> Path:
    """A gfx1103 int8 file whose one solution is navi31's first WMMA kernel padded as navi33's are (LDS of B
    by ``pad``): upstream's gfx1103 and gfx1150 int8 files are navi33's, whose kernels pad by 32."""
    folder.mkdir(parents=True, exist_ok=True)
    lib = NAVI31.libraries[INT8]
    params = {**lib.solutions[0]["params"], "LdsPadB": pad}
    write_logic_file(
        folder / logic_file_name("gfx1103", INT8),
        problem_type=lib.problem_type,
        solutions=[solution_entry(lib.problem_type, params, 0)],
        exact_rows=[([4096, 4096, 1, 4096, 4128, 4128, 4128, 4128], 0, 41825.4)],
        schedule="navi33",
        architecture="gfx1103",
        device_names=["Device 73f0"],
    )
    return folder


def int8_native_references(native: Path):
    """The int8 library's native floor kernels at every deck size of a gfx1103 run with ``native`` as its
    native folder, and gfx1103's limits."""
    cfg = {"arch": "gfx1103", "families": ["I8II_BH"], "patterns": ["NN"]}
    plan = plan_run({**cfg, "deck": {"native_floor": {"path": str(native)}}})
    _, selected, _ = load_run_deck(plan.deck, plan.libraries)
    lib = selected.libraries[INT8]
    limits = legality.Limits.from_profile(load_profile(ROOT / "arch_profiles" / "gfx1103.yaml"))
    return lib.native_references(range(len(lib.sizes)), limits), limits


def test_a_native_int8_kernel_padded_by_32_is_read_raced_and_never_searched(tmp_path):
    """Tensile takes LdsPad 32 (validParameters) and navi33's int8 kernels use it, so upstream's own gfx1103
    and gfx1150 int8 files carry it: their native floor reads, its kernel is legal on gfx1103 and keeps its
    pad, while no space offers 32 (tuned without it) and a resolved pad of 32 is not taken as a point."""
    from oto.search.tensile_space import tensile_space
    from oto.tensile.params import legal_value

    refs, limits = int8_native_references(write_int8_native(tmp_path / "gfx1103", 32))
    (params,) = {str(r["params"]): r["params"] for r in refs.values()}.values()
    assert params["LdsPadB"] == 32 and legality.check(Library.parse(INT8), params, limits).valid
    space = tensile_space(Library.parse(INT8), limits)
    assert 16 in space.parameter("LdsPadB").values and 32 not in space.parameter("LdsPadB").values
    assert space.index(params) is None  # raced as the floor, never a point the search models
    assert not legal_value("LdsPadB", 32) and legal_value("LdsPadB", 16)


def test_a_native_kernel_with_a_pad_tensile_refuses_names_its_file_and_field(tmp_path):
    native = write_int8_native(tmp_path / "gfx1103", 32)
    path = native / logic_file_name("gfx1103", INT8)
    text = path.read_text()
    assert text.count("LdsPadB: 32") == 1
    path.write_text(text.replace("LdsPadB: 32", "LdsPadB: 5"))
    cfg = {"arch": "gfx1103", "families": ["I8II_BH"], "patterns": ["NN"]}
    where = rf"gfx1103_{INT8}.yaml: element 5 \(solutions\) entry 0: LdsPadB=5 is not a legal value"
    with pytest.raises(LogicFileError, match=where):
        plan = plan_run({**cfg, "deck": {"native_floor": {"path": str(native)}}})
        load_run_deck(plan.deck, plan.libraries)


def test_final_rows_and_the_report_show_the_native_floor_next_to_the_floor():
    rows = [
        {"size_index": 0, "score": 1.2},
        {"size_index": 1, "score": 1.5},
        {"size_index": 2, "score": None},
        {"size_index": 3, "score": 1.1},
    ]
    scores = [
        {"size_index": 0, "kernel_id": "knative", "score": 0.6, "status": "ok"},
        {"size_index": 1, "kernel_id": "knative", "score": 0.5, "status": "ok"},
        {"size_index": 2, "kernel_id": "knative", "score": 0.4, "status": "ok"},
        {"size_index": 3, "kernel_id": "knative", "score": float("nan"), "status": "validation_failed"},
    ]
    native = {0: "knative", 1: "knative", 2: "knative", 3: "knative"}
    final = FinalRace({}, {}, {}, {}, {}, None, native=native)
    summary = native_rows(rows, scores, final)
    assert [r["vs_native"] for r in rows] == [pytest.approx(2.0), pytest.approx(3.0), None, None]
    assert [r["native_status"] for r in rows] == ["ok", "ok", "ok", "validation_failed"]
    expected = {"geomean_vs_native": pytest.approx(6**0.5), "sizes": 2, "kept": 0, "failed_validation": 1}
    assert summary == expected
    assert native_rows(rows, scores, FinalRace({}, {}, {}, {}, {}, None)) is None
    table = native_table(
        [
            {
                "library": LIB,
                "native_floor": {"arch": "gfx1103", "path": "upstream/gfx1103"},
                "per_size": rows,
            }
        ]
    )
    assert table[0]["geomean_vs_native"] == pytest.approx(6**0.5) and table[0]["sizes"] == 2
    assert table[0]["native_wrong"] == 1
    text = "\n".join(_native_markdown(table, "the spoof floor"))
    assert "## Against the native floor" in text and "| 2.449×" in text and "| 0 | 1 |" in text
    assert _native_markdown([], "x") == []
    assert Counter(r["native"] for r in rows) == {"knative": 4}


def test_a_size_whose_winner_loses_to_upstreams_own_kernel_ships_that_kernel():
    """The final library is never slower than upstream's own library for the GPU where the race can tell: a
    winner that loses to the native kernel (beyond the tie tolerance) gives way to it, a tie keeps the tuned
    winner, a size without a winner takes the native kernel where it ran; nothing changes without a native
    floor. The kept sizes are counted and reported."""
    from oto.measurement.finals import keep_native

    def score(i, kernel, s, hw=0.005):
        interval = {"ci_low": s * (1 - hw), "ci_high": s * (1 + hw)}
        return {
            "size_index": i,
            "kernel_id": kernel,
            "score": s,
            **interval,
            "gflops": 100 * s,
            "status": "ok",
        }

    rows = [
        {"size_index": 0, "winner": "ktuned", "score": 1.2, "ci_low": 1.19, "ci_high": 1.21, "gflops": 120.0},
        {"size_index": 1, "winner": "ktuned", "score": 1.2, "ci_low": 1.19, "ci_high": 1.21, "gflops": 120.0},
        {"size_index": 2, "winner": None, "score": None, "ci_low": None, "ci_high": None, "gflops": None},
        {"size_index": 3, "winner": "ktuned", "score": 1.1, "ci_low": 1.09, "ci_high": 1.11, "gflops": 110.0},
    ]
    for r in rows:
        r["ceiling_gflops"] = 200.0
    scores = [score(0, "knative", 1.4), score(1, "knative", 1.21), score(2, "knative", 0.9)]
    native = {0: "knative", 1: "knative", 2: "knative", 3: None}
    kept = keep_native(rows, scores, native, 0.02)
    assert [r["winner"] for r in kept] == ["knative", "ktuned", "knative", "ktuned"]
    assert [r["kept_by_native"] for r in kept] == [True, False, True, False]
    assert kept[0]["score"] == pytest.approx(1.4) and kept[0]["pct_ceiling"] == pytest.approx(70.0)
    assert (
        kept[0]["verdict"] == "win" and rows[0]["winner"] == "ktuned"
    )  # the caller's rows stay as they were
    assert keep_native(rows, scores, {}, 0.02) == rows
    final = FinalRace({}, {}, {}, {}, {}, None, native=native)
    summary = native_rows(kept, [*scores, score(1, "ktuned", 1.2), score(0, "ktuned", 1.2)], final)
    assert summary["kept"] == 2 and kept[0]["vs_native"] == pytest.approx(1.0)
    table = native_table(
        [{"library": LIB, "native_floor": {"arch": "gfx1150", "path": "p"}, "per_size": kept}]
    )
    assert table[0]["kept"] == 2
    assert "| kept |" in "\n".join(_native_markdown(table, "the spoof floor"))


def test_a_kept_shipped_kernel_that_loses_to_upstreams_own_gives_way_to_it():
    """Both second floors judge the final kernel in turn: a winner that ties with upstream's kernel but loses
    to the best shipped one takes that, and where that in turn loses to upstream's kernel, upstream's kernel
    ships (kept by native, no longer by the best shipped kernel); a size whose native kernel is slower keeps
    what the best shipped judgement gave."""
    from oto.measurement.finals import _judge_floors

    def score(i, kernel, s):
        return {"size_index": i, "kernel_id": kernel, "score": s, "ci_low": s * 0.995, "ci_high": s * 1.005,
                "gflops": 100 * s, "status": "ok"}  # fmt: skip

    rows = [
        {
            "size_index": i,
            "winner": "ktuned",
            "score": 1.2,
            "ci_low": 1.194,
            "ci_high": 1.206,
            "gflops": 120.0,
        }
        for i in (0, 1)
    ]
    for r in rows:
        r.update(shipped="kfloor", ceiling_gflops=200.0)
    scores = [score(0, "kshipped", 1.3), score(0, "knative", 1.21), score(0, "kfloor", 1.0)]
    scores += [score(1, "kshipped", 1.3), score(1, "knative", 1.4), score(1, "kfloor", 1.0)]
    final = FinalRace({}, {}, {}, {}, {}, None, native={0: "knative", 1: "knative"})
    judged = _judge_floors(rows, scores, final, {"kshipped", "kfloor"}, 0.02)
    assert [r["winner"] for r in judged] == ["kshipped", "knative"]
    assert [r["kept_by_native"] for r in judged] == [False, True]
    assert [r["kept_by_best_shipped"] for r in judged] == [True, False]
    assert judged[1]["vs_best_shipped"] == pytest.approx(1.4 / 1.3, rel=1e-4)


# Upstream's real gfx1103 folder (ROCm/rocm-libraries, projects/rocblas/library/src/blas3/Tensile/Logic/
# asm_full/gfx1103), when a copy is on this machine: oto keeps none (bench/native_floor.py, bench/RESULTS.md).
UPSTREAM = Path(os.environ.get("OTO_NATIVE_LOGIC") or "/work/data/native/gfx1103")


@pytest.mark.skipif(
    not (UPSTREAM / "gfx1103_Cijk_Ailk_Bljk_SB.yaml").is_file(),
    reason=f"no copy of upstream's file in {UPSTREAM}",
)
def test_the_native_floor_reads_upstreams_own_gfx1103_sgemm_file():
    """The real file: navi33's schedule, a Vega 10 device id, one wave64 MT32x32x8 stub and one exact row of
    eight numbers (sizes and leading dimensions) with efficiency 0; every deck size races that stub."""
    from oto.tensile.logic_reader import read_logic_file
    from oto.tensile.params import macro_tile

    name = "Cijk_Ailk_Bljk_SB"
    lf = read_logic_file(UPSTREAM / f"gfx1103_{name}.yaml")
    assert (lf.schedule, lf.architecture, lf.device_names) == ("navi33", "gfx1103", ["Device 6863"])
    assert len(lf.solutions) == 1 and lf.key_length == 8 and lf.exact_rows[0][1:] == (0, 0.0)
    cfg = {
        "arch": "gfx1103",
        "families": ["SB"],
        "patterns": ["NN"],
        "deck": {"native_floor": {"path": str(UPSTREAM)}},
    }
    plan = plan_run(cfg)
    _, selected, _ = load_run_deck(plan.deck, plan.libraries)
    lib = selected.libraries[name]
    assert lib.native_floor["label"] == "native" and len(lib.native_floor["solutions"]) == 1
    limits = legality.Limits.from_profile(load_profile(ROOT / "arch_profiles" / "gfx1103.yaml"))
    refs = lib.native_references(range(0, len(lib.sizes), 97), limits)
    (stub,) = {r["id"] for r in refs.values()}
    params = next(iter(refs.values()))["params"]
    assert macro_tile(params) == (32, 32) and params["DepthU"] == 8 and params.get("WavefrontSize", 64) == 64
    assert legality.check(Library.parse(name), params, limits).valid
    assert all("substitute" not in r for r in refs.values())
    assert lib.references([0], limits)[0]["id"] != stub  # the spoof floor is navi31's


def test_the_simulated_upstream_arm_runs_upstreams_own_library_where_the_deck_has_it(tmp_path):
    """compare's upstream arm (no override) on the simulated GPU: where upstream ships the GPU a folder of its
    own (deck.native_floor), it runs that folder's pick at each size, not the spoof's kernel; its note says
    which it ran and names the stock library (it said "vega10" on every GPU)."""
    from oto.rocblas import night
    from oto.tensile.labels import StockLibrary

    native = write_native(tmp_path / "gfx1103")
    cfg = {
        "arch": "gfx1103",
        "families": ["SB_GB", "I8II_BH_GB"],
        "patterns": ["NN"],
        "deck": {"native_floor": {"path": str(native)}, "max_sizes": 4},
    }
    plan = plan_run(cfg)
    _, selected, _ = load_run_deck(plan.deck, plan.libraries)
    decks = {name: selected.libraries[name] for name in (LIB, "Cijk_Ailk_Bljk_I8II_BH_GB")}
    finals = {
        name: {"sizes": deck.sizes, "per_size": [], "kernels": {}} for name, deck in decks.items()
    }  # no winners: the tuned arm runs the stock kernels too
    arms = night.arms(finals, decks, plan.profile, "native", None, None)
    limits = legality.Limits.from_profile(plan.profile)
    stub = legality_id(limits)
    upstream, spoof = arms["upstream"].kernels, arms["spoof"].kernels
    lib_keys = [k for k in upstream if k[0] == LIB]
    assert lib_keys and all(upstream[k] == stub for k in lib_keys)  # upstream's stub at every size
    assert all(spoof[k] != stub for k in lib_keys) and stub in arms["upstream"].params
    other = [k for k in upstream if k[0] != LIB]  # upstream ships no int8 file here: the stock kernel
    assert other and all(upstream[k] == spoof[k] for k in other)
    stock = StockLibrary.of(plan.profile)
    note = night.simulated_upstream_note(decks, stock)
    assert "own library (deck.native_floor) for 1 of 2 libraries" in note and "navi31 (gfx1100)" in note
    assert night.simulated_upstream_note({LIB: decks[LIB]}, stock).endswith("(config deck.native_floor)")
    plain = {"x": read_manifest(SHIPPED_MANIFESTS["gfx1100"]).libraries[LIB]}
    assert night.simulated_upstream_note(plain, stock) == (
        "it runs the spoof's navi31 (gfx1100) kernels without the override: the model times them alike"
    )


@pytest.mark.skipif(
    not (UPSTREAM / f"gfx1103_{INT8}.yaml").is_file(), reason=f"no copy of upstream's file in {UPSTREAM}"
)
def test_the_native_floor_reads_upstreams_own_gfx1103_int8_file():
    """The real int8 file (navi33's, kernels padded by 32): it reads, and every kernel its Matching table
    picks at the deck's sizes is legal on gfx1103 as it stands, no substitute needed."""
    refs, limits = int8_native_references(UPSTREAM)
    assert any(r["params"].get("LdsPadB") == 32 for r in refs.values())
    assert all(legality.check(Library.parse(INT8), r["params"], limits).valid for r in refs.values())
    assert all("substitute" not in r for r in refs.values())


def test_upstreams_own_kernel_wins_a_tie_it_leads_and_a_shared_solution_keeps_every_role():
    """Every kernel raced at a size may win it, upstream's own included: a tie the race cannot separate goes
    to the faster point estimate, as between the tuned and the shipped kernels (the gfx1103 demo shipped
    tuned kernels 2-6% slower than upstream's, compare found, while upstream's kernel was taken only on a
    clear loss). Upstream's libraries share solutions, so one kernel can be a size's spoof floor and another
    size's native pick: where it is the floor it still holds its size (the demo shipped a 0.975x loss to the
    floor when it was left out everywhere). Kept by native: the size ships a kernel raced there only as
    upstream's."""
    from oto.measurement.best_shipped import Shortlist
    from oto.measurement.finals import _judge_floors, searched_rows
    from oto.measurement.selection import per_size_rows

    def score(i, kernel, s, lo, hi, status="ok"):
        return {"size_index": i, "kernel_id": kernel, "score": s, "ci_low": lo, "ci_high": hi,
                "gflops": 100 * s, "status": status}  # fmt: skip

    scores = [
        score(0, "kfloor", 1.0, 0.95, 1.05),
        score(0, "ktuned", 0.975, 0.955, 0.997),
        score(1, "kfloor", 1.03, 1.0, 1.06),  # size 1's native pick only: ahead in a tie
        score(1, "kref1", 1.0, 0.98, 1.02),
        score(1, "ktuned", 1.01, 0.99, 1.03),
        score(2, "kshort", 1.2, 1.18, 1.22),  # size 2's native pick and on its shortlist
        score(2, "kref2", 1.0, 0.98, 1.02),
        score(2, "ktuned", 1.1, 1.08, 1.12),
        score(3, "knat3", float("nan"), float("nan"), float("nan"), "validation_failed"),
        score(3, "kref3", 1.0, 0.98, 1.02),
        score(3, "ktuned", 1.1, 1.08, 1.12),
    ]
    reference = {0: "kfloor", 1: "kref1", 2: "kref2", 3: "kref3"}
    native = {0: None, 1: "kfloor", 2: "kshort", 3: "knat3"}
    shortlist = Shortlist(per_size={2: ["kshort"]})
    final = FinalRace({"ktuned": {}}, {}, reference, {}, {}, None, shortlist, native)
    profile = load_profile(ROOT / "arch_profiles" / "gfx1103.yaml")
    rows = per_size_rows(scores, [[256, 256, 1, 256]] * 4, Library.parse(LIB), profile, 0.02, 0)
    for r in rows:
        r["shipped"] = reference[r["size_index"]]
    rows = _judge_floors(rows, scores, final, {"kfloor", "kref1", "kshort", "kref2", "kref3"}, 0.02)
    assert [r["winner"] for r in rows] == ["kfloor", "kfloor", "kshort", "ktuned"]
    assert [r["kept_by_native"] for r in rows] == [False, True, False, False]
    assert rows[0]["verdict"] == "tie" and rows[2]["kept_by_best_shipped"]
    # upstream's failures are not the run's: only size 1's and 3's native-only rows are not the night's own
    left = [(r["size_index"], r["kernel_id"]) for r in scores if r not in searched_rows(scores, final)]
    assert left == [(1, "kfloor"), (3, "knat3")]


def test_the_closing_summary_gives_the_run_against_upstreams_own_library(tmp_path):
    """The terminal's last lines say how the run did against the native floor, over every library raced
    against it (the geomean weighted by each library's sizes); a run without one says nothing of it."""
    import json
    import math

    from oto.reporting.summary import run_summary

    native = [
        {"library": name, "arch": "gfx1103", "sizes": n, "geomean_vs_native": g, "kept": k, "native_wrong": w}
        for name, n, g, k, w in ((LIB, 3, 2.0, 1, 0), ("L2", 1, 1.0, 2, 1))
    ]
    pages = tmp_path / "results" / "dashboard"
    pages.mkdir(parents=True)
    doc = {"state": "finished", "final": {"native": native}}
    (pages / "data.json").write_text(json.dumps(doc))
    lines = [line.strip() for line in run_summary(tmp_path / "results", 3, "1 s", built=None)]
    g = math.exp(3 * math.log(2.0) / 4)
    assert (
        f"native     vs upstream's own gfx1103 library: geomean {g:.2f}× over 4 sizes of 2 libraries, its "
        "kernel ships at 3 of them, it gave wrong results at 1"
    ) in lines
    (pages / "data.json").write_text(json.dumps({"state": "finished", "final": {}}))
    assert not any(line.strip().startswith("native") for line in run_summary(tmp_path / "results", 3, "1 s"))

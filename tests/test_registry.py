from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from oto.gemm import Library
from oto.measurement.selection import novelty
from oto.registry.job_files import read_job_file, write_job_file
from oto.registry.records import TOPUP, generation_records
from oto.registry.store import Store, consolidate, store_path
from oto.registry.transfer import knowledge, size_transfer
from oto.search.candidates import classify_proposals
from oto.tensile.legality import Limits
from oto.tensile.params import candidate_id, canonical

CONFIG = {"backend": "sim", "seed": 1, "benchmark": {"repetitions": 5, "tuning_sizes": 4, "bootstrap": 400}}
SIM = {"backend": "sim", "numbers": "simulated", "model_version": "7", "stream": "x/gen0"}
MEASURED = {"backend": "tensile", "numbers": "measured", "tensile_version": "4.44.0", "device": "gfx90c"}
LIB = "Cijk_Ailk_Bljk_DB"
SIZES = [[64, 64, 1, 64], [128, 128, 1, 128]]


def params(tt0: int) -> dict:
    return canonical({"ThreadTile": [tt0, 4], "WorkGroup": [16, 16, 1], "DepthU": 16, "VectorWidth": 2})


def generation(
    gen: int, kernels: list[dict], library: str = LIB, prov: dict = SIM, arch: str = "gfx90c"
) -> list[dict]:
    cands = {
        "library": library,
        "generation": gen,
        "sizes": SIZES,
        "kernels": [
            {"id": candidate_id(p), "params": p, "roles": ["candidate"], "proposer": "surrogate"}
            for p in kernels
        ],
        "rejected": [
            {"id": "kbad", "params": {}, "proposer": "surrogate", "class": "illegal", "reason": "LDS"}
        ],
    }
    build = {
        "provenance": prov,
        "kernels": [{"id": k["id"], "status": "ok"} for k in cands["kernels"]],
    }
    scores = [
        {
            "kernel_id": k["id"],
            "size_index": i,
            "status": "ok",
            "score": 1.0 + 0.1 * j,
            "time_us": 10.0,
            "gflops": 5,
        }
        for j, k in enumerate(cands["kernels"])
        for i in range(len(SIZES))
    ]
    return generation_records(cands, build, scores, CONFIG, arch, now=1000.0 + gen)


def write_gen(
    root: Path, gen: int, kernels: list[dict], library: str = LIB, prov: dict = SIM, arch: str = "gfx90c"
) -> Path:
    path = root / arch / library / f"gen{gen}" / "registry.jsonl"
    write_job_file(path, generation(gen, kernels, library, prov, arch))
    return path


def test_records_carry_provenance_and_roundtrip(tmp_path):
    path = write_gen(tmp_path, 0, [params(2), params(4)])
    res = read_job_file(path)
    assert not res.problems
    kinds = [r["kind"] for r in res.records]
    assert kinds.count("proposed") == 2 and kinds.count("rejected") == 1 and kinds.count("built") == 2
    assert kinds.count("benchmarked") == 4
    rec = next(r for r in res.records if r["kind"] == "benchmarked")
    for field in (
        "arch",
        "backend",
        "numbers",
        "protocol",
        "config_hash",
        "generation",
        "proposer",
        "recorded_at",
    ):
        assert rec[field] not in (None, ""), field
    assert json.loads(rec["tool_versions"])["model_version"] == "7"
    assert rec["size"] == "64,64,1,64" and rec["family"] == "DB" and rec["pattern"] == "NN"


def test_corrupted_and_half_written_files_are_reported_and_the_rest_stays_usable(tmp_path):
    good = write_gen(tmp_path, 0, [params(2)])
    corrupt = write_gen(tmp_path, 1, [params(4)])
    lines = corrupt.read_text().splitlines()
    lines[1] = lines[1][:20]  # a damaged record
    corrupt.write_text("\n".join(lines) + "\n")
    half = write_gen(tmp_path, 2, [params(8)])
    half.write_text("".join(half.read_text().splitlines(keepends=True)[:3]))  # cut short: no end marker
    store = store_path(tmp_path / "gfx90c")
    summary = consolidate([good, corrupt, half], store)
    problems = "\n".join(summary["problems"])
    assert f"{corrupt}:2: corrupted record" in problems
    assert f"{half}: half-written" in problems
    assert str(good) not in problems
    db = Store(store)
    ids = {r["kernel_id"] for r in db.query("SELECT kernel_id FROM records WHERE kind='benchmarked'")}
    db.close()
    assert candidate_id(params(2)) in ids and candidate_id(params(4)) in ids  # readable lines are kept


def test_merge_is_idempotent_and_dedupes(tmp_path):
    f = write_gen(tmp_path, 0, [params(2), params(4)])
    store = store_path(tmp_path / "gfx90c")
    first = consolidate([f], store)
    again = consolidate([f, f], store)
    assert first["added"] > 0 and again["added"] == 0
    # the summary (registry/consolidated.yaml) says what its timed records are
    assert again["numbers"] == {"simulated (sim)": again["records"]["benchmarked"]}


def test_a_corrupted_store_is_set_aside_not_lost(tmp_path):
    store = store_path(tmp_path / "gfx90c")
    store.parent.mkdir(parents=True)
    store.write_bytes(b"this is not sqlite" * 100)
    summary = consolidate([write_gen(tmp_path, 0, [params(2)])], store)
    assert any("not a readable registry store" in p for p in summary["problems"])
    assert list(store.parent.glob("registry.corrupt-*"))
    assert summary["records"]["benchmarked"] == 2
    assert Store.open_optional(tmp_path / "missing.sqlite") is None


def test_a_store_rebuilt_takes_the_job_files_of_libraries_this_run_did_not_select(tmp_path):
    """An earlier run tuned another library in the same folder; this run selects one. A store damaged beyond
    salvage is rebuilt from every job file on disk, not only this run's: the other library's records stay."""
    earlier = write_gen(tmp_path, 0, [params(8)], library="Cijk_Alik_Bljk_DB")
    store = store_path(tmp_path / "gfx90c")
    consolidate([earlier], store)
    store.write_bytes(b"this is not sqlite" * 100)
    summary = consolidate([write_gen(tmp_path, 0, [params(2)])], store)
    assert "rebuilt from 2 job file(s) (1 of them this run's jobs did not write)" in summary["problems"][-1]
    assert summary["libraries"] == 2 and summary["rebuilt"]["job_files"] == 2


def test_knowledge_dedupes_by_candidate_size_and_protocol(tmp_path):
    f0 = write_gen(tmp_path, 0, [params(2), params(4)])
    f1 = write_gen(tmp_path, 0, [params(8)], library="Cijk_Alik_Bljk_DB")  # another pattern of the family
    consolidate([f0, f1], store_path(tmp_path / "gfx90c"))
    know = knowledge(tmp_path / "gfx90c", "gfx90c", LIB, CONFIG, SIZES, SIM)
    assert know.measured == {candidate_id(params(2)), candidate_id(params(4))}
    assert [k["id"] for k in know.own] == [candidate_id(params(4)), candidate_id(params(2))]  # best first
    assert [k["id"] for k in know.family] == [candidate_id(params(8))]
    # another size or another protocol is a different experiment
    assert not knowledge(
        tmp_path / "gfx90c", "gfx90c", LIB, CONFIG, [*SIZES, [256, 256, 1, 256]], SIM
    ).measured
    other = {**CONFIG, "benchmark": {**CONFIG["benchmark"], "repetitions": 9}}
    assert not knowledge(tmp_path / "gfx90c", "gfx90c", LIB, other, SIZES, SIM).measured
    assert knowledge(tmp_path / "nothing", "gfx90c", LIB, CONFIG, SIZES, SIM) is None
    # emit's read (measured_only) is the same measured set, without the scoring
    for config, root in ((CONFIG, "gfx90c"), (other, "gfx90c")):
        emit = knowledge(tmp_path / root, "gfx90c", LIB, config, SIZES, SIM, measured_only=True)
        assert emit.measured == knowledge(tmp_path / root, "gfx90c", LIB, config, SIZES, SIM).measured
        assert emit.own == emit.family == emit.priors == []
    assert knowledge(tmp_path / "nothing", "gfx90c", LIB, CONFIG, SIZES, SIM, measured_only=True) is None


def test_knowledge_transfers_between_neighbouring_sizes():
    small, large = ["256,256,1,256", "384,384,1,256"], ["4096,4096,1,4096", "6144,4096,1,4096"]
    specialist_small = {**dict.fromkeys(small, 1.5), **dict.fromkeys(large, 0.8)}
    specialist_large = {**dict.fromkeys(small, 0.8), **dict.fromkeys(large, 1.5)}
    near_small, near_large = [[320, 256, 1, 256]], [[4096, 5120, 1, 4096]]  # measured at neither
    t = size_transfer
    assert t(specialist_small, near_small) > 1.4 and t(specialist_small, near_large) < 0.85
    assert t(specialist_large, near_large) > 1.4 and t(specialist_large, near_small) < 0.85
    # far from everything measured: the kernel's overall geomean; no sizes or no scores: overall / None
    overall = math.sqrt(1.5 * 0.8)
    assert abs(t(specialist_small, [[1, 1, 64, 1]]) - overall) < 1e-6
    assert abs(t(specialist_small, []) - overall) < 1e-9 and t({}, near_small) is None
    # at exactly the measured sizes it reproduces them
    assert abs(t({"64,64,1,64": 1.2}, [[64, 64, 1, 64]]) - 1.2) < 1e-9


def test_emit_rejects_registry_duplicates_except_deliberate_topups():
    lib = Library.parse(LIB)
    done = candidate_id(params(2))
    props = [
        {"params": params(2), "proposer": "surrogate"},
        {"params": params(2), "proposer": TOPUP},
        {"params": params(4), "proposer": "surrogate"},
    ]
    kernels, rejected = classify_proposals(props, lib, Limits(), set(), frozenset({done}))
    assert [k["id"] for k in kernels] == [done, candidate_id(params(4))]
    assert kernels[0]["proposer"] == TOPUP
    assert rejected[0]["class"] == "duplicate" and "registry" in rejected[0]["reason"]


def test_novelty_shares():
    cands = {
        "kernels": [
            {"id": "a", "roles": ["candidate"]},
            {"id": "b", "roles": ["candidate"]},
            {"id": "r", "roles": ["reference"]},
        ],
        "rejected": [{"id": "c", "class": "duplicate"}, {"id": "d", "class": "illegal"}],
    }
    rows = [
        {"winner": "a", "generation": 3},
        {"winner": "a", "generation": 3},
        {"winner": "x", "generation": 1},
    ]
    n = novelty(cands, rows, 3)
    assert n == {
        "proposed": 4,
        "new": 3,
        "legal": 3,
        "useful": 1,
        "share_new": 0.75,
        "share_legal": 0.75,
        "share_useful": 0.25,
    }


def test_export_t4(tmp_path, capsys):
    from oto.cli import main as cli

    f = write_gen(tmp_path, 0, [params(2)])
    store = store_path(tmp_path / "gfx90c")
    consolidate([f], store)
    out = tmp_path / "t4.json"
    assert cli(["registry", "export-t4", str(store), str(out), "--arch", "gfx90c"]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == "1.0.0"
    res = doc["results"]
    assert len(res) == 3  # two sizes measured + one rejection
    ok = [r for r in res if r["invalidity"] == "correct"]
    assert len(ok) == 2 and ok[0]["configuration"]["library"] == LIB and ok[0]["times"]["runtimes"] == [0.01]
    assert {m["name"] for m in ok[0]["measurements"]} >= {"time", "score"}
    assert [r["invalidity"] for r in res if r["invalidity"] != "correct"] == ["constraints"]
    assert cli(["registry", "summary", str(tmp_path / "none.sqlite")]) == 2
    assert "no registry store" in capsys.readouterr().err
    assert doc["metadata"]["numbers"] == sorted({r["metadata"]["numbers"] for r in res})  # said at the top
    # a folder for OUT, or an arch or library the store does not hold: said, no traceback, no empty file
    assert cli(["registry", "export-t4", str(store), str(tmp_path)]) == 2
    assert "a folder; name the T4 JSON file to write" in capsys.readouterr().err
    assert cli(["registry", "export-t4", str(store), str(tmp_path / "x.json"), "--arch", "gfx1103"]) == 2
    assert "--arch gfx1103: the store has no record of it (it has: gfx90c)" in capsys.readouterr().err
    assert cli(["registry", "export-t4", str(store), str(tmp_path / "x.json"), "--library", "Cijk_Nope"]) == 2
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("bad", ["[]", '{"kind": "weird", "kernel_id": "k", "library": "L"}'])
def test_records_of_the_wrong_shape_are_reported(tmp_path, bad):
    p = tmp_path / "r.jsonl"
    p.write_text(bad + "\n" + json.dumps({"end": True, "records": 0}) + "\n")
    res = read_job_file(p)
    assert res.records == [] and res.problems and res.problems[0].startswith(f"{p}:1:")


def test_a_fresh_run_starts_from_the_registry(tmp_path):
    from oto.search.evidence import topups

    f = write_gen(tmp_path, 0, [params(2), params(4), params(8)])
    consolidate([f], store_path(tmp_path / "gfx90c"))
    know = knowledge(tmp_path / "gfx90c", "gfx90c", LIB, CONFIG, SIZES, SIM)
    top = topups(know, 0)
    # the two best earlier kernels are re-measured once, deliberately; later generations do not repeat it
    assert [candidate_id(t["params"]) for t in top] == [candidate_id(params(8)), candidate_id(params(4))]
    assert all(t["proposer"] == TOPUP for t in top)
    assert topups(know, 1) == [] and topups(None, 0) == []


def test_a_store_damaged_inside_is_checked_moved_aside_and_rebuilt(tmp_path, caplog):
    """Random bytes mid-file with the header intact: SQLite still opens it and takes new rows, so a merge
    would go on writing into it; the integrity check catches it, and nothing readable is lost."""
    import random
    import sqlite3

    files = [write_gen(tmp_path, g, [params(t) for t in (1, 2, 4, 8)]) for g in range(3)]
    store = store_path(tmp_path / "gfx90c")
    consolidate(files, store)
    db = sqlite3.connect(store)  # earlier runs' knowledge: enough rows to span many pages
    rows = db.execute("SELECT * FROM records").fetchall()
    run_col = db.execute("SELECT * FROM records").description
    run_at = [d[0] for d in run_col].index("run_id")
    for i in range(3000):
        r = list(rows[i % len(rows)])
        r[run_at] = f"earlier-run-{i}"
        db.execute(f"INSERT INTO records VALUES ({', '.join('?' * len(r))})", r)
    db.commit()
    before = db.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    db.close()
    data = bytearray(store.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 4096] = random.Random(1).randbytes(4096)
    store.write_bytes(bytes(data))
    assert data[:16] == b"SQLite format 3\x00"

    with caplog.at_level("WARNING"):
        assert Store.open_optional(store) is None  # mutate and emit ignore it, with a warning
    assert "failed its integrity check" in caplog.text
    summary = consolidate(files, store)
    assert len(summary["problems"]) == 1
    problem = summary["problems"][0]
    assert f"{store}: not a readable registry store (failed its integrity check" in problem
    assert "moved aside to" in problem and "rebuilt from 3 job file(s)" in problem
    damaged = Path(summary["rebuilt"]["damaged"])
    assert damaged.is_file() and damaged.name.startswith("registry.corrupt-")
    total = sum(summary["records"].values())
    assert summary["rebuilt"]["salvaged_records"] > 0.9 * before and total > 0.9 * before
    db = Store(store)  # the new store is sound and holds every record of this run's job files
    ids = {r["kernel_id"] for r in db.query("SELECT kernel_id FROM records WHERE run_id NOT LIKE 'earlier%'")}
    db.close()
    assert {candidate_id(params(t)) for t in (1, 2, 4, 8)} <= ids
    assert consolidate(files, store)["problems"] == []


def test_a_job_run_again_does_not_take_its_own_run_for_an_earlier_one(tmp_path):
    """The store holds this run's records once the run is merged; a job Snakemake runs again (emit after a
    profile edit, say) must not reject its own candidates as already measured, while generations whose
    folders were deleted, and every other run's records, stay knowledge."""
    arch_dir = tmp_path / "gfx90c"
    f0 = write_gen(tmp_path, 0, [params(2), params(4)])
    consolidate([f0], store_path(arch_dir))
    mine = {candidate_id(params(2)), candidate_id(params(4))}
    assert knowledge(arch_dir, "gfx90c", LIB, CONFIG, SIZES, SIM).measured == mine  # as knowledge: all of it
    job = knowledge(arch_dir, "gfx90c", LIB, CONFIG, SIZES, SIM, as_job=True)
    assert job.measured == set() and job.own == []  # its own chain is on disk: not knowledge
    assert knowledge(arch_dir, "gfx90c", LIB, CONFIG, SIZES, SIM, True, measured_only=True).measured == set()
    other = {**CONFIG, "seed": 2}  # another run's view of the same protocol's records
    assert knowledge(arch_dir, "gfx90c", LIB, other, SIZES, SIM, as_job=True).measured == mine
    f0.unlink()  # the library's generations deleted: what they measured is knowledge again
    assert knowledge(arch_dir, "gfx90c", LIB, CONFIG, SIZES, SIM, as_job=True).measured == mine


def test_provenance_never_mixes_simulated_with_measured(tmp_path):
    """A simulated demo and a run on the GPU in the same results folder: the measured run finds nothing
    'already measured' and no knowledge in the simulated records, unless it opts in to simulated priors, and
    then they are labelled priors, never observations, never seen, never top-ups."""
    from oto.registry.records import protocol_of
    from oto.search.evidence import topups

    sim = write_gen(tmp_path, 0, [params(2), params(4)])
    consolidate([sim], store_path(tmp_path / "gfx90c"))
    assert protocol_of(SIM, CONFIG) != protocol_of(MEASURED, CONFIG)
    assert protocol_of(SIM, CONFIG) == protocol_of({**SIM, "stream": "y/final"}, CONFIG)  # per-job facts
    assert protocol_of(SIM, CONFIG) != protocol_of({**SIM, "model_version": "8"}, CONFIG)  # recalibrated sim
    with pytest.raises(ValueError, match="provenance"):
        protocol_of({}, CONFIG)
    know = knowledge(tmp_path / "gfx90c", "gfx90c", LIB, CONFIG, SIZES, MEASURED)
    assert know.measured == set() and know.own == [] and know.family == [] and know.priors == []
    assert topups(know, 0) == []
    opted = {**CONFIG, "registry": {"simulated_priors": True}}
    know = knowledge(tmp_path / "gfx90c", "gfx90c", LIB, opted, SIZES, MEASURED)
    assert know.measured == set() and know.own == [] and topups(know, 0) == []
    assert {k["id"] for k in know.priors} == {candidate_id(params(2)), candidate_id(params(4))}
    assert all(k["numbers"] == "simulated" for k in know.priors)
    # a measured generation in the same store is knowledge of the measured run, and only of it
    meas = write_gen(tmp_path, 1, [params(8)], prov=MEASURED)
    consolidate([sim, meas], store_path(tmp_path / "gfx90c"))
    know = knowledge(tmp_path / "gfx90c", "gfx90c", LIB, CONFIG, SIZES, MEASURED)
    assert know.measured == {candidate_id(params(8))} and [k["id"] for k in know.own] == [
        candidate_id(params(8))
    ]
    back = knowledge(tmp_path / "gfx90c", "gfx90c", LIB, CONFIG, SIZES, SIM)
    assert candidate_id(params(8)) not in back.measured | {k["id"] for k in back.own}


def test_warm_start_from_another_gpus_registry(tmp_path):
    """registry.warm_start: a first gfx902 run (no store of its own) learns gfx90c's kernels of the same
    library first, then its family's, as priors labelled with the GPU they were measured on; never as its own
    measurements, never 'already measured', never top-ups; of its own kind of numbers only."""
    from oto.registry.transfer import WarmStartError, check_warm_start
    from oto.search.evidence import prior_label, topups

    donor = tmp_path / "results" / "gfx90c"
    own = write_gen(tmp_path / "results", 0, [params(2), params(4)])
    other = write_gen(tmp_path / "results", 0, [params(8)], library="Cijk_Alik_Bljk_DB")
    consolidate([own, other], store_path(donor))
    here = tmp_path / "results" / "gfx902"
    cold = knowledge(here, "gfx902", LIB, CONFIG, SIZES, SIM)
    assert cold is None  # no store and no warm start: nothing known, as before
    warm_cfg = {**CONFIG, "registry": {"warm_start": [str(donor)]}}
    know = knowledge(here, "gfx902", LIB, warm_cfg, SIZES, SIM)
    assert know.own == [] and know.family == [] and know.measured == set() and topups(know, 0) == []
    assert [k["library"] for k in know.priors] == [LIB, LIB, "Cijk_Alik_Bljk_DB"]  # the library's own first
    assert [k["id"] for k in know.priors[:2]] == [candidate_id(params(4)), candidate_id(params(2))]
    assert {k["from_arch"] for k in know.priors} == {"gfx90c"}
    assert {k["valu_only"] for k in know.priors} == {True}  # gfx9 has no matrix instruction: the search maps
    assert prior_label(know.priors[0]) == "simulated prior from gfx90c's registry (another GPU)"
    assert "simulated on gfx90c" in know.summary()
    # a run of another kind of numbers takes nothing from the donor's simulated records
    assert knowledge(here, "gfx902", LIB, warm_cfg, SIZES, MEASURED) is None
    # and a run with its own store keeps its own knowledge apart from the donor's priors
    mine = write_gen(tmp_path / "mine", 0, [params(16)], arch="gfx902")
    consolidate([mine], store_path(here))
    know = knowledge(here, "gfx902", LIB, warm_cfg, SIZES, SIM)
    assert [k["id"] for k in know.own] == [candidate_id(params(16))]
    assert [k["from_arch"] for k in know.priors] == ["gfx90c"] * 3
    # a typo or this run's own folder fails the dry-run, naming the field
    check_warm_start([str(donor)], here)
    with pytest.raises(WarmStartError, match=r"field 'registry.warm_start\[1\]'.*holds no registry store"):
        check_warm_start([str(donor), str(tmp_path / "results" / "gfx09c")], here)
    with pytest.raises(WarmStartError, match="this run's own results folder"):
        check_warm_start([str(here)], here)

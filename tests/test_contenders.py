"""Contenders (oto.measurement.selection): across generations two kernels never raced each other, so a size
keeps an earlier generation's leader whose interval overlaps the best's, and finalize races it there head to
head. Without them a size's best is the largest of every generation's noisy scores, and eight generations
shipped a kernel 1.1% slower than four had (issue #31's judged run, DB NT)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml
from oto.backends import job_stream, resolve
from oto.files import StageFileError
from oto.gemm import Library
from oto.hardware.simulated.scorer import SimulatedScorer
from oto.measurement.finals import final_document, race_finalists
from oto.measurement.selection import (
    CONTENDERS_PER_SIZE,
    per_size_rows,
    selection_document,
    size_contenders,
)
from oto.measurement.selection_file import read_selection
from oto.search.tensile_space import tensile_space
from oto.tensile import legality
from oto.tensile.baseline import baseline_kernel
from oto.tensile.params import candidate_id
from sim_slice import gfx90c_slice

LIBRARY = "Cijk_Ailk_Bljk_ZB_GB"
DB = Library.parse("Cijk_Ailk_Bljk_DB")
SIZE = [[256, 256, 1, 256]]


def _score(kernel, score, low, high, size=0):
    return {"kernel_id": kernel, "size_index": size, "score": score, "ci_low": low, "ci_high": high,
            "gflops": 10 * score, "status": "ok"}  # fmt: skip


def _carried(kernel, score, low, high, generation, contenders=None):
    row = {"size_index": 0, "winner": kernel, "score": score, "ci_low": low, "ci_high": high,
           "gflops": 10 * score, "generation": generation}  # fmt: skip
    if contenders:
        row["contenders"] = contenders
    return {0: row}


@pytest.fixture(scope="module")
def profile():
    return gfx90c_slice(LIBRARY, slice(0, 1))[1]


def test_a_leader_displaced_within_its_interval_stays_a_contender(profile):
    prev = _carried("old", 1.076, 1.058, 1.094, 3)
    (row,) = per_size_rows([_score("new", 1.078, 1.053, 1.103)], SIZE, DB, profile, 0.02, 4, prev)
    assert row["winner"] == "new" and row["generation"] == 4
    assert row["contenders"] == [
        {"kernel": "old", "score": 1.076, "ci_low": 1.058, "ci_high": 1.094, "generation": 3}
    ]


def test_a_decisive_lead_leaves_no_contender(profile):
    prev = _carried("old", 1.076, 1.058, 1.094, 3)
    (row,) = per_size_rows([_score("new", 1.30, 1.25, 1.35)], SIZE, DB, profile, 0.02, 4, prev)
    assert row["winner"] == "new" and "contenders" not in row


def test_a_new_best_below_the_carried_one_but_within_its_interval_is_a_contender(profile):
    prev = _carried("old", 1.10, 1.08, 1.12, 3)
    (row,) = per_size_rows([_score("new", 1.09, 1.07, 1.11)], SIZE, DB, profile, 0.02, 4, prev)
    assert row["winner"] == "old" and row["generation"] == 3
    assert [c["kernel"] for c in row["contenders"]] == ["new"] and row["contenders"][0]["generation"] == 4
    # one clearly behind is none
    (row,) = per_size_rows([_score("slow", 0.9, 0.88, 0.92)], SIZE, DB, profile, 0.02, 4, prev)
    assert "contenders" not in row


def test_contenders_are_capped_best_first_and_dropped_once_clearly_beaten(profile):
    held = [
        {"kernel": "a", "score": 1.05, "ci_low": 1.0, "ci_high": 1.10, "generation": 1},
        {"kernel": "b", "score": 1.07, "ci_low": 1.02, "ci_high": 1.12, "generation": 2},
    ]
    prev = _carried("old", 1.08, 1.04, 1.12, 3, held)
    (row,) = per_size_rows([_score("new", 1.09, 1.06, 1.12)], SIZE, DB, profile, 0.02, 4, prev)
    assert len(row["contenders"]) == CONTENDERS_PER_SIZE
    assert [c["kernel"] for c in row["contenders"]] == ["old", "b"]  # best score first
    # a later leader whose interval clears all of them: none is kept
    (row,) = per_size_rows([_score("top", 1.40, 1.35, 1.45)], SIZE, DB, profile, 0.02, 5, {0: row})
    assert row["winner"] == "top" and "contenders" not in row
    # a leader without an interval keeps none
    prev = _carried("old", 1.08, None, None, 3, held)
    (row,) = per_size_rows([], SIZE, DB, profile, 0.02, 4, prev)
    assert "contenders" not in row


def _cands(generation, kernels):
    return {"library": DB.name, "generation": generation, "sizes": SIZE, "kernels": kernels}


def _config():
    return {"benchmark": {"tie_tolerance": 0.02}, "search": {"convergence": {"epsilon": 0.0, "patience": 3}}}


def test_selection_keeps_the_contenders_parameters_across_generations(profile):
    k = {name: {"MT0": m} for name, m in (("old", 64), ("new", 128), ("top", 32))}
    build = {"kernels": []}
    gen3 = selection_document(
        _cands(3, [{"id": "old", "params": k["old"]}]), build, [_score("old", 1.076, 1.058, 1.094)], None,
        profile, _config(),
    )  # fmt: skip
    assert "contender_kernels" not in gen3
    gen4 = selection_document(
        _cands(4, [{"id": "new", "params": k["new"]}]), build, [_score("new", 1.078, 1.053, 1.103)], gen3,
        profile, _config(),
    )  # fmt: skip
    assert gen4["kernels"] == {"new": k["new"]} and gen4["contender_kernels"] == {"old": k["old"]}
    # a generation that adds nothing at the size carries the contender's parameters on
    gen5 = selection_document(_cands(5, []), build, [], gen4, profile, _config())
    assert gen5["contender_kernels"] == {"old": k["old"]}
    assert size_contenders({**gen5, "deck_indices": [7]}) == {7: {"old": k["old"]}}
    assert size_contenders(gen5) == {}  # no deck index for the size: nowhere to race it
    gen6 = selection_document(
        _cands(6, [{"id": "top", "params": k["top"]}]), build, [_score("top", 1.5, 1.45, 1.55)], gen5,
        profile, _config(),
    )  # fmt: skip
    assert "contender_kernels" not in gen6 and size_contenders(gen6) == {}


def test_finalize_races_a_contender_at_its_size_only_and_ships_it_where_it_is_truly_faster(tmp_path):
    """The carried winner of the one tuning size is truly slower there than a contender an earlier generation
    led with (their cross-generation scores said the opposite, within their intervals). Finalize races the
    contender at that size, not at the others, and ships the faster kernel."""
    config, profile, lib, limits = gfx90c_slice(LIBRARY, slice(34, 46))
    config = copy.deepcopy(config)
    config["benchmark"]["best_shipped_shortlist"] = 0  # no shipped kernel raced beside them by that route
    library = Library.parse(LIBRARY)
    space = tensile_space(library, limits)
    start = space.index(baseline_kernel(library, limits))
    legal = [legality.resolve(library, space.config(i), limits) for i in [start, *space.neighbours(start)]]
    legal = list({candidate_id(p): p for p in legal}.values())
    ids = [candidate_id(p) for p in legal]
    times = np.asarray(
        [[np.inf if t is None else t for t in row] for row in
         SimulatedScorer(profile, int(config["seed"])).times_us(
             library, [{"params": p} for p in legal], [s[:4] for s in lib.sizes])]
    )  # fmt: skip
    refs = lib.references(list(range(len(lib.sizes))), limits)
    scorer = SimulatedScorer(profile, int(config["seed"]))
    floor = [
        scorer.times_us(library, [{"params": refs[i]["params"]}], [lib.sizes[i][:4]])[0][0] for i in refs
    ]
    # a tuning size where the fastest tuned kernel beats the floor by >= 5% and another is >= 5% slower
    pick = next(
        (i, int(order[0]), int(slower[0]))
        for i in range(len(lib.sizes))
        for order in [[p for p in np.argsort(times[:, i]) if np.isfinite(times[p, i])]]
        for slower in [[p for p in order if times[p, i] / times[order[0], i] >= 1.05]]
        if slower and floor[i] / times[order[0], i] >= 1.05
    )
    at, fast, slow = pick
    selection = {
        "generation": 7,
        "sizes": [lib.sizes[at][:4]],
        "deck_indices": [at],
        "per_size": [
            {
                "size_index": 0,
                "winner": ids[slow],
                "score": 1.08,
                "ci_low": 1.05,
                "ci_high": 1.11,
                "contenders": [
                    {"kernel": ids[fast], "score": 1.07, "ci_low": 1.05, "ci_high": 1.09, "generation": 3}
                ],
            }
        ],  # fmt: skip
        "kernels": {ids[slow]: legal[slow]},
        "contender_kernels": {ids[fast]: legal[fast]},
        "summary": {"failures": {}},
        "convergence": {"converged": False, "history": [], "reason": ""},
    }
    backend = resolve(config, profile, job_stream(LIBRARY, "final"))
    final = race_finalists(backend, selection, lib, profile, config, tmp_path, tmp_path)
    assert final.contenders == {at: [ids[fast]]}
    raced = final.race.samples
    assert set(raced.loc[raced["kernel_id"] == ids[fast], "size_index"]) == {at}
    assert set(raced.loc[raced["kernel_id"] == ids[slow], "size_index"]) == set(range(len(lib.sizes)))
    doc = final_document(selection, lib, final, backend, profile, config)
    assert doc["per_size"][at]["winner"] == ids[fast]
    assert doc["kernels"][ids[fast]] == dict(final.kernels[ids[fast]].params)
    # without its contender the same finalize ships the slower kernel there
    plain = {
        **selection,
        "per_size": [{k: v for k, v in selection["per_size"][0].items() if k != "contenders"}],
    }
    final = race_finalists(backend, plain, lib, profile, config, tmp_path / "plain", tmp_path / "plain")
    assert (
        final.contenders == {}
        and final_document(plain, lib, final, backend, profile, config)["per_size"][at]["winner"] != ids[fast]
    )


def test_a_selection_file_with_a_malformed_contender_names_the_field(tmp_path):
    doc = {
        "generation": 4,
        "per_size": [{"size_index": 0, "winner": "new", "score": 1.0, "contenders": [{"score": 1.0}]}],
        "kernels": {"new": {}},
        "summary": {},
        "convergence": {"converged": False},
    }
    path = tmp_path / "selection.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(
        StageFileError, match=r"selection.yaml: field 'per_size\[0\]\.contenders\[0\]'.*kernel"
    ):
        read_selection(path)
    doc["per_size"][0]["contenders"] = [
        {"kernel": "old", "score": 0.99, "ci_low": 0.97, "ci_high": 1.01, "generation": 3}
    ]
    path.write_text(yaml.safe_dump(doc))
    assert read_selection(path)["per_size"][0]["contenders"][0]["kernel"] == "old"


def test_a_selection_is_read_from_its_mirror_while_current_and_checked_all_the_same(tmp_path):
    """select writes selection.yaml with a JSON mirror (the next mutate, emit, select and the live dashboard
    read it); a mirror of other text is ignored, the shape is checked either way, and the YAML has no anchors
    whichever way its lists were shared in memory."""
    from oto.files import mirror_path, write_yaml_mirrored

    params = {"ThreadTile": [4, 4], "AssertStrideAEqual": {0: 1}}
    doc = {
        "generation": 1,
        "per_size": [{"size_index": 0, "winner": "k", "score": 1.1}],
        "kernels": {"k": params, "j": params},  # one object twice, as a selection read from YAML holds
        "summary": {},
        "convergence": {"converged": False},
    }
    path = tmp_path / "selection.yaml"
    write_yaml_mirrored(path, doc)
    assert "&id" not in path.read_text() and mirror_path(path).is_file()
    assert read_selection(path) == yaml.safe_load(path.read_text()) == doc
    mirror_path(path).write_text(mirror_path(path).read_text().replace('"k"', '"m"'))  # the same sha256
    assert read_selection(path)["per_size"][0]["winner"] == "m"  # a current mirror is what is read...
    path.write_text(path.read_text().replace("score: 1.1", "score: 1.2"))  # ...until the YAML changes
    assert read_selection(path)["per_size"][0] == {"size_index": 0, "winner": "k", "score": 1.2}
    write_yaml_mirrored(path, {**doc, "per_size": [{"size_index": -1, "winner": "k", "score": 1.0}]})
    with pytest.raises(StageFileError, match=r"field 'per_size\[0\]\.size_index'"):
        read_selection(path)  # the mirror's data is checked as the YAML's is


def test_a_size_no_kernel_ran_at_is_not_measured_not_a_loss(profile):
    """Where nothing ran, the reference included (too large for the device's memory: a 1.5 GiB carve-out and
    a 3.3 GiB problem), the tuned library serves the shipped kernel: no loss, and the library is not "slower
    at some sizes" for it (gfx1035's demo said so of three such sizes)."""
    from collections import Counter

    from oto.measurement.selection import NOT_MEASURED, summarise
    from oto.reporting.figures import library_verdict, verdict_counts, wtl_text

    sizes = [[256, 256, 1, 256], [1024, 32768, 1, 50304], [512, 512, 1, 512]]
    scores = [_score("k", 1.3, 1.25, 1.35, 0), _score("k", 0.9, 0.88, 0.92, 2)]
    scores.append({**_score("k", float("nan"), None, None, 1), "status": "too_large"})
    rows = per_size_rows(scores, sizes, DB, profile, 0.02, 0)
    assert [r["verdict"] for r in rows] == ["win", NOT_MEASURED, "loss"] and rows[1]["winner"] is None
    summary = summarise(rows, Counter(too_large=1))
    assert (summary["wins"], summary["losses"], summary["not_measured"]) == (1, 1, 1)
    counts = verdict_counts(rows)
    assert wtl_text(counts) == "1/0/1 (1 not measured)" and wtl_text({**counts, "not_measured": 0}) == "1/0/1"
    # a library whose only non-win is a size nothing ran at is better than the spoof, not mixed
    (win,) = per_size_rows(scores[:1], sizes[:1], DB, profile, 0.02, 0)
    nothing = per_size_rows(scores[2:], sizes[1:2], DB, profile, 0.02, 0)
    both = summarise([win, *nothing], Counter())
    assert both["losses"] == 0 and library_verdict(both, 0.02) == "better than the spoof"

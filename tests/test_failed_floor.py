"""A size where the floor's own kernel (the spoof's shipped solution) fails every launch: wrong results, a
crash, a hang, or a quarantine once it took the GPU down (the spoof's hangs on some 780Ms). There is no
speed-up over it, so finalize ships the fastest kernel that passed there, the row says why (verdict
``floor_failed``, no score), and the reports count the size apart from wins, ties and losses. Before, such a
size had no winner ("not measured"), the logic left it to the nearest size's kernel, and only verify's rescue
kept the failing spoof kernel out of the package (the gfx902 demo: vega10's ZB_GB kernel k5f02d74a7506
failed validation at 10 sizes)."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import Counter

import pytest
import yaml
from oto.backends import job_stream, resolve
from oto.gemm import Library
from oto.measurement.finals import final_document, final_log_lines, race_finalists
from oto.measurement.selection import (
    FLOOR_FAILED,
    NOT_MEASURED,
    floor_failed_winners,
    per_size_rows,
    summarise,
)
from oto.reporting.dashboard import environment
from oto.reporting.figures import library_verdict, verdict_counts, wtl_text
from oto.reporting.summary import _figures
from oto.rocblas.night import race_scores, verify_entries
from oto.tensile import legality
from oto.tensile.baseline import baseline_kernel
from oto.tensile.logic_writer import plan_logic
from oto.tensile.params import candidate_id
from sim_slice import gfx90c_slice

DB = Library.parse("Cijk_Ailk_Bljk_DB")
LIBRARY = "Cijk_Ailk_Bljk_ZB_GB"
NAN = float("nan")


@pytest.fixture(scope="module")
def profile():
    return gfx90c_slice(LIBRARY, slice(0, 1))[1]


def _score(kernel, size, score, time_us, status="ok"):
    return {"kernel_id": kernel, "size_index": size, "score": score, "ci_low": score, "ci_high": score,
            "time_us": time_us, "gflops": 1e3 / time_us if time_us == time_us else NAN,
            "status": status}  # fmt: skip


def _rows(profile, scores, shipped_status):
    rows = per_size_rows(scores, [[256, 256, 1, 256]] * len(shipped_status), DB, profile, 0.02, 0)
    for r, status in zip(rows, shipped_status, strict=True):
        r.update(shipped="kref", shipped_status=status)
    return rows


def test_a_size_whose_floor_failed_ships_the_fastest_kernel_that_passed(profile):
    scores = [
        # size 0: the floor ran, a kernel beats it
        _score("kref", 0, 1.0, 10.0),
        _score("ka", 0, 1.2, 8.3),
        # size 1: every launch of the floor gave wrong results; ka and kb passed, kb is faster
        _score("kref", 1, NAN, NAN, "validation_failed"),
        _score("ka", 1, NAN, 9.0),
        _score("kb", 1, NAN, 7.0),
        _score("kc", 1, NAN, NAN, "timeout"),
        # size 2: the floor hung and so did everything else
        _score("kref", 2, NAN, NAN, "timeout"),
        _score("ka", 2, NAN, NAN, "timeout"),
        # size 3: the floor took the GPU down once and is quarantined (never launched again: gpu_reset)
        _score("kref", 3, NAN, NAN, "gpu_reset"),
        _score("ka", 3, NAN, 5.0),
    ]
    status = ["ok", "validation_failed", "timeout", "gpu_reset"]
    rows = floor_failed_winners(_rows(profile, scores, status), scores)
    assert [r["verdict"] for r in rows] == ["win", FLOOR_FAILED, NOT_MEASURED, FLOOR_FAILED]
    assert rows[3]["winner"] == "ka"
    fixed = rows[1]
    assert (fixed["winner"], fixed["score"], fixed["ci_low"]) == ("kb", None, None)
    assert math.isclose(fixed["gflops"], 1e3 / 7.0, rel_tol=1e-6)
    assert math.isclose(fixed["pct_ceiling"], 100 * fixed["gflops"] / fixed["ceiling_gflops"], rel_tol=1e-5)
    assert "the shipped kernel failed" in fixed["picked_by"]
    assert rows[2]["winner"] is None and "picked_by" not in rows[0]
    # the floor ran (no failure of its own) and no candidate has a score: not a floor that failed
    untouched = floor_failed_winners(_rows(profile, scores, ["ok"] * 4), scores)
    assert [r["verdict"] for r in untouched] == ["win", NOT_MEASURED, NOT_MEASURED, NOT_MEASURED]
    # nor where its timings were implausible, or nothing ran (too large for the memory, never measured)
    other = floor_failed_winners(
        _rows(profile, scores, ["ok", "bad_timing", "too_large", "no_samples"]), scores
    )
    assert [r["verdict"] for r in other] == ["win", NOT_MEASURED, NOT_MEASURED, NOT_MEASURED]

    rows = rows[:3]
    summary = summarise(rows, Counter(validation_failed=1))
    assert (summary["wins"], summary["ties"], summary["losses"]) == (1, 0, 0)
    assert (summary["not_measured"], summary["floor_failed"]) == (1, 1)
    assert summary["geomean_score"] == pytest.approx(1.2)  # no score counts where there was no floor
    counts = verdict_counts(rows)
    assert wtl_text(counts) == (
        "1/0/0 (1 not measured) (1 size where the reference kernel failed: a passing kernel ships)"
    )
    assert library_verdict({**counts, "geomean_score": 1.2}, 0.02) == "better than the spoof"
    headline = _figures({**counts, "geomean_score": 1.2}, "the gfx900 spoof")
    assert "1 wins / 0 ties / 0 losses (1 sizes not measured) (1 size where the reference kernel failed" in (
        headline
    )
    wtl = environment().get_template("_macros.html.j2").module.wtl
    cell = str(wtl(1, 0, 0, 1, 2))
    assert "(1 not measured)" in cell and 'data-test="floor-failed"' in cell
    assert "(2 where the reference failed)" in cell
    assert "floor-failed" not in str(wtl(1, 0, 0, 1))


class FailingFloor:
    """The simulated backend, with every launch of one kernel at one size failing validation."""

    def __init__(self, inner, kernel: str, size: int):
        self.inner, self.kernel, self.size = inner, kernel, size

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def measure(self, problem, plan, workdir):
        return [
            dataclasses.replace(s, time_us=NAN, status="validation_failed", reason="max error 3e2")
            if (s.kernel_id, s.size_index) == (self.kernel, self.size)
            else s
            for s in self.inner.measure(problem, plan, workdir)
        ]


def test_finalize_ships_a_passing_kernel_where_the_spoof_kernel_fails_and_the_logic_and_verify_follow(
    tmp_path,
):
    """Through finalize's race on the simulated GPU: the floor's kernel fails at one deck size. That size
    gets the fastest finalist or shipped kernel that passed, a logic row, and verify checks that kernel."""
    config, profile, lib, limits = gfx90c_slice(LIBRARY, slice(34, 40))
    config = copy.deepcopy(config)
    library = Library.parse(LIBRARY)
    tuned = legality.resolve(library, baseline_kernel(library, limits), limits)
    kid = candidate_id(tuned)
    selection = {
        "generation": 3,
        "sizes": [lib.sizes[0][:4]],
        "deck_indices": [0],
        "per_size": [{"size_index": 0, "winner": kid, "score": 1.1, "ci_low": 1.05, "ci_high": 1.15}],
        "kernels": {kid: tuned},
        "summary": {"failures": {}},
        "convergence": {"converged": False, "history": [], "reason": ""},
    }
    refs = lib.references(list(range(len(lib.sizes))), limits)
    at = 2
    floor = refs[at]["id"]
    backend = FailingFloor(resolve(config, profile, job_stream(LIBRARY, "final")), floor, at)
    final = race_finalists(backend, selection, lib, profile, config, tmp_path, tmp_path)
    doc = final_document(selection, lib, final, backend, profile, config)
    row = doc["per_size"][at]
    samples = final.race.samples
    passed = samples[(samples["size_index"] == at) & (samples["status"] == "ok")]
    assert floor not in set(passed["kernel_id"]) and not passed.empty
    assert (row["verdict"], row["shipped"]) == (FLOOR_FAILED, floor)
    assert row["shipped_status"] == "validation_failed"
    assert row["score"] is None and row["gflops"] > 0 and row["race"] == "no_valid"
    assert row["winner"] in passed["kernel_id"].tolist() and row["winner"] in doc["kernels"]
    assert doc["summary"]["floor_failed"] == 1 and doc["summary"]["not_measured"] == 0
    assert "(1 size where the spoof's kernel failed)" in final_log_lines(doc)[0]
    # every other size still has its floor and a score against it
    assert all(r["score"] for i, r in enumerate(doc["per_size"]) if i != at)
    # the logic file holds the size, with the passing kernel; verify checks that kernel there
    plan = plan_logic(library, doc["per_size"], doc["kernels"], doc["sizes"], refs, limits)
    held = [(list(plan.solutions)[k], gflops) for size, k, gflops in plan.rows if size == list(lib.sizes[at])]
    assert held == [(row["winner"], row["gflops"])]
    entries = verify_entries(doc, race_scores(doc, samples, profile, config), refs)
    assert entries[at]["winner"] == row["winner"] and entries[at]["shipped"] == floor
    assert entries[at]["shipped_failed"] and entries[at]["ranking"][0] == row["winner"]


# A tester's bundle: the merge recomputes its final from its samples, the floor's failures included.
FAILED_AT = 2


@pytest.fixture(scope="module")
def failed_floor_bundle(tmp_path_factory):
    from fleet_helpers import synthetic_bundle

    tmp = tmp_path_factory.mktemp("failed-floor")
    return synthetic_bundle(tmp, rivals={"other": 1.1}, failed_references=(FAILED_AT,))


def _final_edit(fn):
    from fleet_helpers import LIBRARY
    from test_fleet_intake import edit_yaml

    return edit_yaml(f"results/{LIBRARY}/final.yaml", fn)


def test_an_honest_bundle_with_a_size_where_the_floor_failed_is_taken_as_measured(failed_floor_bundle):
    """The tester's final ships the fastest kernel that passed where the reference failed, with no score:
    intake takes it (it rejected a winner without a score as 'not a measurement'), and the merge's own
    recomputation from the samples finds the same."""
    from fleet_helpers import LIBRARY, variant
    from oto.fleet.intake import open_bundle
    from test_fleet_intake import EXPECT

    bundle = open_bundle(failed_floor_bundle, EXPECT)
    ev = bundle.evidence[LIBRARY]
    row = ev.final[FAILED_AT]
    assert (row["verdict"], row["winner"], row["score"]) == (
        FLOOR_FAILED,
        variant(LIBRARY, "winner")[0],
        None,
    )
    assert row["shipped_status"] == "validation_failed" and row["gflops"] > 0
    assert [r["verdict"] for i, r in enumerate(ev.final) if i != FAILED_AT] == ["win"] * (len(ev.final) - 1)


def test_a_bundle_claiming_the_floor_failed_where_its_samples_ran_it_is_rejected(failed_floor_bundle):
    from fleet_helpers import rebuild
    from test_fleet_intake import rejected

    def claim(doc):
        doc["per_size"][0].update(verdict=FLOOR_FAILED, score=None, ci_low=None, ci_high=None)

    msg = rejected(rebuild(failed_floor_bundle, _final_edit(claim)))
    assert "size 0" in msg and "the reference failed there, but its own samples have the reference ok" in msg


def test_a_bundle_naming_a_slower_kernel_where_the_floor_failed_is_rejected(failed_floor_bundle):
    from fleet_helpers import LIBRARY, rebuild, variant
    from test_fleet_intake import rejected

    rival, params = variant(LIBRARY, "other")

    def claim(doc):
        doc["kernels"][rival] = params
        doc["per_size"][FAILED_AT]["winner"] = rival

    msg = rejected(rebuild(failed_floor_bundle, _final_edit(claim)))
    assert f"size {FAILED_AT}" in msg and rival in msg and "measurably slower" in msg


def test_a_score_claimed_against_a_floor_that_failed_is_rejected(failed_floor_bundle):
    from fleet_helpers import rebuild
    from test_fleet_intake import rejected

    def claim(doc):
        doc["per_size"][FAILED_AT]["score"] = 1.5

    msg = rejected(rebuild(failed_floor_bundle, _final_edit(claim)))
    assert f"per_size[{FAILED_AT}]: field 'score': 1.5 where the reference failed" in msg

    def unsaid(doc):  # a score where its own samples have the reference failing, the verdict a win
        doc["per_size"][FAILED_AT].update(score=1.5, verdict="win")

    msg = rejected(rebuild(failed_floor_bundle, _final_edit(unsaid)))
    assert "with a score against it, but its own samples have the reference validation_failed" in msg


def test_the_merge_ships_the_kernel_the_devices_picked_where_the_floor_failed(tmp_path, failed_floor_bundle):
    """No score exists at the size on any device, so the merge's geomean of scores has nothing to rank: the
    kernel the devices' own races picked there ships, labelled as in the run (it was 'not measured')."""
    from fleet_helpers import LIBRARY, variant
    from oto.config import validate_config
    from oto.fleet.merge import MergeSettings, merge
    from test_fleet_intake import ARCH

    settings = MergeSettings(
        "gfx90c", ARCH, validate_config({"arch": "gfx90c", "families": "all"}), "simulated"
    )
    merge([failed_floor_bundle], tmp_path / "merged", settings)
    out = tmp_path / "merged" / "gfx90c"
    final = yaml.safe_load((out / LIBRARY / "final.yaml").read_text())
    row = final["per_size"][FAILED_AT]
    assert (row["winner"], row["verdict"], row["score"]) == (
        variant(LIBRARY, "winner")[0],
        FLOOR_FAILED,
        None,
    )
    (device,) = row["devices"].values()
    assert device["picked_it"] and device["gflops"] == row["gflops"] > 0
    assert (final["summary"]["floor_failed"], final["summary"]["not_measured"]) == (1, 0)
    assert (
        "(1 size where the reference kernel failed: a passing kernel ships)"
        in (out / "acceptance.md").read_text()
    )
    logic = yaml.safe_load(next((out / "logic").glob("*.yaml")).read_text())
    assert list(final["sizes"][FAILED_AT]) in [r[0] for r in logic[7]]

"""The second floor, the best shipped kernel (oto.measurement.best_shipped): which shipped kernels finalize
shortlists per size, the rule that final.yaml never ships a kernel that loses to the best shipped one, the
reports' figures against both floors and what the shortlist adds to `oto plan`."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
from oto.backends import job_stream, resolve
from oto.gemm import Library
from oto.hardware.profile import load_profile
from oto.hardware.simulated.scorer import SimulatedScorer
from oto.measurement import best_shipped
from oto.measurement.finals import final_document, race_finalists
from oto.measurement.selection import per_size_rows
from oto.reporting import figures
from oto.reporting.acceptance import headline_markdown
from oto.reporting.summary import _figures
from oto.tensile import legality
from oto.tensile.baseline import baseline_kernel
from oto.tensile.params import candidate_id
from sim_slice import gfx90c_slice

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = "Cijk_Ailk_Bljk_ZB_GB"  # 7 shipped solutions, 125 sizes: small enough to race in seconds


@pytest.fixture(scope="module")
def setting():
    # 24 sizes, some where another shipped solution is >= 5% faster than the floor on the model
    config, profile, lib, limits = gfx90c_slice(LIBRARY, slice(34, 58))
    refs = {i: r["id"] for i, r in lib.references(list(range(len(lib.sizes))), limits).items()}
    return config, profile, lib, limits, refs


def test_the_shortlist_is_bounded_legal_never_the_floor_and_takes_the_models_and_the_neighbours_picks(
    setting,
):
    config, profile, lib, limits, refs = setting
    library = Library.parse(LIBRARY)
    short = best_shipped.shortlist(lib, profile, int(config["seed"]), 3, refs, limits)
    assert set(short.per_size) == set(range(len(lib.sizes)))
    times = SimulatedScorer(profile, int(config["seed"])).times_us(
        library, lib.solutions, [s[:4] for s in lib.sizes]
    )
    ids = [candidate_id(legality.resolve(library, s["params"], limits)) for s in lib.solutions]
    for i, picked in short.per_size.items():
        assert 1 <= len(picked) <= 3 and len(set(picked)) == len(picked)
        assert refs[i] not in picked  # the floor is raced anyway
        for kid in picked:
            pos = short.positions[kid]
            assert legality.check(library, lib.solutions[pos]["params"], limits).valid
        # the model's fastest shipped solution other than the floor is the first pick
        order = sorted((t[i], ids[p]) for p, t in enumerate(times) if t[i] is not None and ids[p] != refs[i])
        assert picked[0] == order[0][1] and short.why[i][picked[0]] == "model"
        # the shipped winner of the nearest size that runs another kernel than the floor is among them
        logs = np.log([s[:4] for s in lib.sizes])
        nearest = sorted(range(len(lib.sizes)), key=lambda j: (float(np.sum((logs[j] - logs[i]) ** 2)), j))
        other = next((ids[lib.shipped[j][0]] for j in nearest if ids[lib.shipped[j][0]] != refs[i]), None)
        assert other is None or other in picked
    assert best_shipped.shortlist(lib, profile, 1, 0, refs, limits).kernels == {}


def _selection(kernel_id, params):
    return {
        "generation": 3,
        "per_size": [{"winner": kernel_id}],
        "kernels": {kernel_id: params},
        "summary": {"failures": {}},
        "convergence": {"converged": False, "history": [], "reason": ""},
    }


def test_finalize_never_ships_a_kernel_that_loses_to_the_best_shipped_one(setting, tmp_path):
    """The finalist is the untuned baseline kernel; the deck holds sizes where another shipped solution is
    clearly faster than the size's own (the floor). Before the second floor existed, finalize raced only the
    finalist and the floor, so those sizes shipped a kernel slower than the best shipped one."""
    config, profile, lib, limits, _ = setting
    library = Library.parse(LIBRARY)
    base = baseline_kernel(library, limits)
    kid = candidate_id(base)
    times = SimulatedScorer(profile, int(config["seed"])).times_us(
        library, lib.solutions, [s[:4] for s in lib.sizes]
    )
    t = np.asarray([[np.inf if x is None else x for x in row] for row in times])
    own = np.asarray([t[lib.shipped[i][0], i] for i in range(len(lib.sizes))])
    ahead = {i for i in range(len(lib.sizes)) if own[i] / t[:, i].min() >= 1.05}
    assert ahead, "the test needs a size where another shipped kernel beats the floor"

    backend = resolve(config, profile, job_stream(LIBRARY, "final"))
    final = race_finalists(backend, _selection(kid, base), lib, profile, config, tmp_path, tmp_path)
    doc = final_document(_selection(kid, base), lib, final, backend, profile, config)
    rows = doc["per_size"]
    # every size ships a kernel within the tie tolerance of the fastest shipped one the model knows
    tol = float(config["benchmark"]["tie_tolerance"])
    params = doc["kernels"]
    for i, r in enumerate(rows):
        mine = SimulatedScorer(profile, int(config["seed"])).times_us(
            library, [{"params": params[r["winner"]]}], [lib.sizes[i][:4]]
        )[0][0]
        assert mine <= t[:, i].min() * (1 + 2 * tol), (i, r)
    assert all(r["verdict_best_shipped"] in ("win", "tie") for r in rows)
    assert doc["summary"]["best_shipped"]["losses"] == 0
    assert doc["summary"]["best_shipped"]["sizes"] == len(rows)
    kept = [r for r in rows if r["kept_by_best_shipped"]]
    assert kept and all(r["winner"] != r["shipped"] and r["winner"] != kid for r in kept)
    assert doc["best_shipped"]["shortlist"] == 2 and doc["best_shipped"]["kernels_raced"] > 0


def test_a_winner_that_loses_to_the_best_shipped_kernel_gives_it_its_size():
    scores = [
        {"kernel_id": "tuned", "size_index": 0, "score": 1.10, "ci_low": 1.09, "ci_high": 1.11},
        {"kernel_id": "spoof", "size_index": 0, "score": 1.0, "ci_low": 0.99, "ci_high": 1.01},
        {"kernel_id": "other", "size_index": 0, "score": 1.30, "ci_low": 1.28, "ci_high": 1.32},
        {"kernel_id": "tuned", "size_index": 1, "score": 1.30, "ci_low": 1.29, "ci_high": 1.31},
        {"kernel_id": "spoof", "size_index": 1, "score": 1.0, "ci_low": 0.99, "ci_high": 1.01},
        {"kernel_id": "other", "size_index": 1, "score": 1.01, "ci_low": 1.0, "ci_high": 1.02},
    ]
    for r in scores:
        r.update(status="ok", gflops=10 * r["score"])
    rows = per_size_rows(
        scores, [[64, 64, 1, 64]] * 2, Library.parse("Cijk_Ailk_Bljk_DB"), _profile(), 0.02, 0
    )
    rows[0].update(winner="tuned", score=1.10, ci_low=1.09, ci_high=1.11)  # as a merged tester's row may be
    for r in rows:
        r["shipped"] = "spoof"
    judged = best_shipped.judge_rows(rows, scores, {"spoof", "other"}, 0.02, {"other": 5, "spoof": 0})
    assert judged[0]["winner"] == "other" and judged[0]["kept_by_best_shipped"]
    assert judged[0]["score"] == 1.3 and judged[0]["verdict"] == "win"
    assert judged[0]["verdict_best_shipped"] == "tie" and judged[0]["best_shipped_position"] == 5
    assert judged[1]["winner"] == "tuned" and not judged[1]["kept_by_best_shipped"]
    assert judged[1]["verdict_best_shipped"] == "win" and judged[1]["vs_best_shipped"] == pytest.approx(
        1.3 / 1.01
    )
    s = best_shipped.summary(judged)
    assert (s["wins"], s["ties"], s["losses"], s["kept_by_best_shipped"]) == (1, 1, 0, 1)
    assert s["share_beats_5pct"] == 0.5
    # without a shipped kernel measured, nothing is judged
    assert best_shipped.judge_rows(rows, scores, set(), 0.02)[0]["verdict_best_shipped"] is None
    # judged only (a size given its runtime key's kernel: oto.measurement.dispatch): the loss is said, kept
    only = best_shipped.judge_rows(rows, scores, {"spoof", "other"}, 0.02, take_losers=False)[0]
    assert (
        only["winner"] == "tuned"
        and only["verdict_best_shipped"] == "loss"
        and not only["kept_by_best_shipped"]
    )


def _profile():
    return load_profile(ROOT / "arch_profiles" / "gfx90c.yaml")


def test_the_reports_give_both_floors():
    rows = [
        {"score": 1.5, "verdict": "win", "vs_best_shipped": 1.2, "verdict_best_shipped": "win"},
        {"score": 1.0, "verdict": "tie", "vs_best_shipped": 1.0, "verdict_best_shipped": "tie"},
        {"score": 1.1, "verdict": "win", "vs_best_shipped": 1.0, "verdict_best_shipped": "tie",
         "kept_by_best_shipped": True},
        {"score": 1.3, "verdict": "win", "vs_best_shipped": 1.04, "verdict_best_shipped": "tie"},
    ]  # fmt: skip
    o = figures.overall([{"per_size": rows}])
    assert o["best_shipped_sizes"] == 4 and o["best_shipped_kept"] == 1
    assert (o["best_shipped_wins"], o["best_shipped_ties"], o["best_shipped_losses"]) == (1, 3, 0)
    assert o["best_shipped_geomean"] == pytest.approx((1.2 * 1.04) ** 0.25)
    assert o["best_shipped_beats_5pct"] == 0.25
    o["median_pct_roofline"] = 50.0
    text = "\n".join(headline_markdown(o, [], None, 0.02))
    assert "geomean vs best shipped | W/T/L vs best shipped | beats best shipped by ≥5%" in text
    assert f"| {(1.2 * 1.04) ** 0.25:.3f}× | 1/3/0 (1 kept) | 25% |" in text
    assert "Best shipped kernel:" in text
    line = _figures(o, "the gfx900 spoof")
    assert "vs the best shipped kernel: geomean 1.06×, 1 wins / 3 ties / 0 losses (1 sizes kept it)" in line
    # a table without the second floor (a generation's) says nothing of it
    assert "best shipped" not in _figures(figures.overall([{"per_size": rows[:0]}]), "the spoof")


def test_plan_shows_what_the_shortlist_adds(setting):
    from oto.backends.tensile import TensileBackend
    from oto.deck.model import Deck
    from oto.run.estimate import estimate_run

    config, profile, lib, _, _ = setting
    deck = Deck({"kind": "manifest"}, "gfx900", {LIBRARY: lib})
    costs = TensileBackend.costs(config)
    off = copy.deepcopy(config)
    off["benchmark"]["best_shipped_shortlist"] = 0
    with_list, without = (
        estimate_run(config, [LIBRARY], deck, profile),
        estimate_run(off, [LIBRARY], deck, profile),
    )
    gpu, build = with_list.shortlist_seconds(costs)
    assert gpu > 0 and build > 0 and without.shortlist_seconds(costs) == (0, 0)
    assert with_list.gpu_seconds(costs) == pytest.approx(without.gpu_seconds(costs) + gpu)

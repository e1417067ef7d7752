"""Finalize's race follows the workload's weight (benchmark.racing.workload_precision, issue #31): the size a
workload spends its time on is raced until its winner's score is known to the precision its share asks for,
so the library's measured workload figure and its time saved are not the few launches that decided the
winner; a deck without calls races as before."""

from __future__ import annotations

import copy
import math

import pytest
from oto.backends import job_stream, resolve
from oto.gemm import Library
from oto.measurement.finals import final_document, race_finalists
from oto.tensile.baseline import baseline_kernel
from oto.tensile.params import candidate_id
from sim_slice import gfx90c_slice

LIBRARY = "Cijk_Ailk_Bljk_ZB_GB"


@pytest.fixture(scope="module")
def setting():
    config, profile, lib, limits = gfx90c_slice(LIBRARY, slice(34, 46))
    base = baseline_kernel(Library.parse(LIBRARY), limits)
    selection = {
        "generation": 3,
        "per_size": [{"winner": candidate_id(base)}],
        "kernels": {candidate_id(base): base},
        "summary": {"failures": {}},
        "convergence": {"converged": False, "history": [], "reason": ""},
    }
    return config, profile, lib, selection


def _finalize(setting, tmp_path, precision, calls):
    config, profile, lib, selection = setting
    config = copy.deepcopy(config)
    config["benchmark"]["racing"]["workload_precision"] = precision
    lib = copy.copy(lib)
    lib.calls = calls
    backend = resolve(config, profile, job_stream(LIBRARY, "final"))
    final = race_finalists(backend, selection, lib, profile, config, tmp_path, tmp_path)
    return final, final_document(selection, lib, final, backend, profile, config)


def _winner_launches(final, doc, i):
    s = final.race.samples
    winner = doc["per_size"][i]["winner"]
    return int(((s.size_index == i) & (s.kernel_id == winner) & (s.status == "ok")).sum())


def test_the_heavy_size_is_raced_to_its_precision_and_the_time_saved_narrows(setting, tmp_path):
    n = len(setting[2].sizes)
    # Where is a winner other than the floor decided quickly? That size gets the workload's calls.
    final0, doc0 = _finalize(setting, tmp_path / "probe", 0.0, [1] * n)
    rows = doc0["per_size"]
    heavy = next(
        i
        for i, r in enumerate(rows)
        if r["winner"] != r["shipped"] and _winner_launches(final0, doc0, i) <= 8
    )
    calls = [0] * n
    calls[heavy] = 100
    calls[(heavy + 1) % n] = 1
    off_final, off = _finalize(setting, tmp_path / "off", 0.0, calls)
    on_final, on = _finalize(setting, tmp_path / "on", 0.01, calls)
    half = lambda r: (math.log(r["ci_high"]) - math.log(r["ci_low"])) / 2  # noqa: E731
    r_off, r_on = off["per_size"][heavy], on["per_size"][heavy]
    assert _winner_launches(on_final, on, heavy) >= 3 * _winner_launches(off_final, off, heavy)
    assert half(r_on) < 0.6 * half(r_off)
    assert on["workload"]["precision"]["sizes_raced"] >= 1 and on["workload"]["precision"]["launches"] > 0
    assert off["workload"]["precision"] == {"target": 0.0, "sizes_raced": 0, "launches": 0}
    # the expected time saved carries the narrower interval (its half-width relative to what it saves)
    width = lambda w: (w["saved_ci_us"][1] - w["saved_ci_us"][0]) / 2 / w["time_before_us"]  # noqa: E731
    assert width(on["workload"]) < 0.7 * width(off["workload"])
    # the sizes the workload does not call race as they did: same launches there
    s_on, s_off = on_final.race.samples, off_final.race.samples
    light = [i for i in range(n) if not calls[i]]
    assert (s_on.size_index.isin(light)).sum() == (s_off.size_index.isin(light)).sum()


def test_without_calls_the_race_is_the_one_it_was(setting, tmp_path):
    final_on, doc_on = _finalize(setting, tmp_path / "on", 0.01, None)
    final_off, doc_off = _finalize(setting, tmp_path / "off", 0.0, None)
    assert "workload" not in doc_on and not final_on.race.refined
    assert final_on.race.samples.equals(final_off.race.samples)

"""verify and compare as the workflow runs them (oto.stages.verify, oto.stages.compare, oto.rocblas.night):
through the client the backend declares, on a finished library's deck sizes; a kernel verification takes
out leaves the logic file; no client: a 'skipped, because ...' record; the report shows the sections."""

from __future__ import annotations

import logging

import pandas as pd
import pytest
from fleet_helpers import LIBRARY, synthetic_bundle, variant
from oto.config import validate_config
from oto.deck.model import write_library_yaml
from oto.deck.sources import SHIPPED_MANIFEST, read_manifest
from oto.files import read_yaml
from oto.gemm import Library
from oto.hardware.profile import load_profile
from oto.measurement.samples import read_samples
from oto.reporting.acceptance import rocblas_markdown
from oto.reporting.collect import rocblas_clients
from oto.rocblas import night
from oto.rocblas.verify import (
    NEAREST_ROW,
    SPOOF_KERNEL,
    Change,
    VerifyRow,
    changes_summary,
    decide,
    log_replacements,
)
from oto.stages import compare, logic, verify
from test_replay import make_cache
from workflow_helpers import REPO

PROFILE = load_profile(REPO / "arch_profiles" / "gfx90c.yaml")


CONFIG = validate_config({"arch": "gfx90c", "families": ["DB"], "backend": "sim", "seed": 1})


def finished(tmp_path, rivals=None, failed_references=()):
    """results/gfx90c of one finished library (a synthetic tester's night) with its deck slice."""
    synthetic_bundle(tmp_path, name="n", score=1.3, rivals=rivals, failed_references=failed_references)
    results = tmp_path / "n" / "results" / "gfx90c"
    deck = read_manifest(SHIPPED_MANIFEST).libraries[LIBRARY]
    write_library_yaml(deck, results / LIBRARY / "deck.yaml", {})
    return results


def paths(results):
    lib = results / LIBRARY
    return [lib / "final.yaml"], [lib / "final_samples.csv"], [lib / "deck.yaml"]


def test_verify_and_compare_run_on_the_simulated_gpu_and_the_report_shows_them_labelled(tmp_path):
    results = finished(tmp_path)
    config = validate_config(
        {"arch": "gfx90c", "families": ["DB"], "backend": "sim", "seed": 1, "rocblas": {"repetitions": 3}}
    )
    finals, samples, decks = paths(results)
    doc = verify.run(
        finals, samples, decks, PROFILE, config, "spoof", results / LIBRARY / "verify.yaml", tmp_path
    )
    n = len(read_yaml(finals[0])["sizes"])
    entry = doc["libraries"][LIBRARY]
    assert doc["numbers"] == "simulated" and entry["counts"] == {"pass": n} and not entry["changes"]
    assert doc["environment"] == {
        "HSA_OVERRIDE_GFX_VERSION": "9.0.0"
    }  # the spoof label's, from stock_library
    assert all(r["norm_error"] <= r["tolerance"] for r in entry["rows"])

    logic_file = results / "logic" / f"gfx90c_{LIBRARY}.yaml"
    logic.run(
        finals[0], decks[0], PROFILE, "native", logic_file, verify_path=results / LIBRARY / "verify.yaml"
    )
    cmp = compare.run(
        finals,
        decks,
        [logic_file],
        [results / LIBRARY / "verify.yaml"],
        PROFILE,
        config,
        "spoof",
        results / "compare/compare.yaml",
        results / "compare/samples.csv",
        tmp_path,
    )
    calls = pd.read_csv(results / "compare/samples.csv")
    assert len(calls) == n * 3 * 3 and set(calls["kernel_id"]) == {"tuned", "spoof", "upstream"}
    assert cmp["numbers"] == "simulated" and set(cmp["against"]) == {"spoof", "upstream"}
    fam = cmp["against"]["spoof"]["DB"]
    assert fam["sizes"] == n and fam["median_ci"][0] <= fam["median_speedup"] <= fam["median_ci"][1]
    assert fam["wins"] + fam["ties"] + fam["losses"] == fam["measured"] and fam["geomean_speedup"] > 0
    # the upstream arm runs the spoof's kernels: the model cannot tell them apart, and the file says so
    assert "the model times them alike" in cmp["notes"]["upstream"]

    text = "\n".join(rocblas_markdown(rocblas_clients(results)))
    assert "### verify (simulated)" in text and "### compare (simulated)" in text
    assert f"| {LIBRARY} | {n} | {n} | 0 |" in text and "| spoof | DB |" in text


def test_a_kernel_verification_fails_leaves_the_package_for_the_next_verified_candidate_else_the_spoof(
    tmp_path,
):
    results = finished(tmp_path, rivals={"other": 1.2})
    final = read_yaml(results / LIBRARY / "final.yaml")
    samples = read_samples(results / LIBRARY / "final_samples.csv")
    deck = read_manifest(SHIPPED_MANIFEST).libraries[LIBRARY]
    shipped = night.shipped_kernels(deck, PROFILE)
    winner, rival = variant(LIBRARY, "winner")[0], variant(LIBRARY, "other")[0]
    final["kernels"][rival] = variant(LIBRARY, "other")[1]  # a finalist measured at every size
    scores = night.race_scores(final, samples, PROFILE, CONFIG)
    entries = night.verify_entries(final, scores, shipped)
    assert all(e["winner"] == winner and e["ranking"][:2] == [winner, rival] for e in entries)

    def row(i, kid, status):
        return VerifyRow(
            LIBRARY, i, tuple(final["sizes"][i]), kid, status, None, 1e-6, 1.0, status, "simulated"
        )

    rows = [row(0, winner, "fail"), row(1, rival, "pass")]
    decision = decide(LIBRARY, entries, rows)
    assert {c.removed for c in decision.changes} == {winner} and len(decision.changes) == len(entries)
    assert {c.replacement for c in decision.changes} == {rival}
    repl = night.replacements(final, scores, shipped, [c.as_dict() for c in decision.changes])
    fixed = night.apply_replacements(final, {"replacements": repl})
    assert {r["winner"] for r in fixed["per_size"]} == {rival} and set(fixed["kernels"]) == {rival}
    assert all(r["gflops"] > 0 for r in fixed["per_size"])

    # the rival failing too: every size goes back to its shipped (spoof) kernel
    decision = decide(LIBRARY, entries, [row(0, winner, "crash"), row(1, rival, "timeout")])
    assert {c.how for c in decision.changes} == {"spoof kernel"}
    repl = night.replacements(final, scores, shipped, [c.as_dict() for c in decision.changes])
    fixed = night.apply_replacements(final, {"replacements": repl})
    assert [r["winner"] for r in fixed["per_size"]] == [shipped[i]["id"] for i in range(len(entries))]


def test_verify_ranks_a_size_as_finalize_did_not_by_raw_median_times(tmp_path):
    """The next candidate is finalize's: by score against the floor, with the timings scoring flags as
    impossible left out. Raw medians put a rival first whose launches mostly ran faster than the family's
    peak allows; where the floor failed (no scores) the peak-state median time ranks."""
    results = finished(tmp_path, rivals={"other": 1.2}, failed_references=(2,))
    final = read_yaml(results / LIBRARY / "final.yaml")
    samples = read_samples(results / LIBRARY / "final_samples.csv")
    winner, rival = variant(LIBRARY, "winner")[0], variant(LIBRARY, "other")[0]
    final["kernels"][rival] = variant(LIBRARY, "other")[1]
    at_0 = (samples["kernel_id"] == rival) & (samples["size_index"] == 0) & (samples["status"] == "ok")
    impossible = samples.index[at_0][1:]  # all but one launch: 1 ps is faster than any GPU
    assert len(impossible) >= 2
    samples.loc[impossible, "time_us"] = 1e-6
    ok = samples[(samples["status"] == "ok") & samples["kernel_id"].isin([winner, rival])]
    raw = ok[ok["size_index"] == 0].groupby("kernel_id")["time_us"].median().sort_values()
    assert raw.index[0] == rival  # what verify ranked by before

    ranking = night.race_ranking(final, night.race_scores(final, samples, PROFILE, CONFIG))
    assert ranking[0][:2] == [winner, rival] and ranking[2][:2] == [winner, rival]
    assert read_yaml(results / LIBRARY / "final.yaml")["per_size"][2]["score"] is None  # ranked by time


def test_where_the_spoofs_kernel_failed_too_verify_leaves_the_size_to_the_nearest_row(tmp_path):
    """Every candidate out at a size whose shipped kernel failed validation in finalize's race: the size gets
    no row rather than that kernel back; the logic file has none there, and the tuned arm runs the nearest
    size's winner, as Tensile would. Elsewhere the shipped kernel is still the last resort."""
    from oto.tensile.logic_writer import plan_logic

    at = 2
    results = finished(tmp_path, rivals={"other": 1.2}, failed_references=(at,))
    final = read_yaml(results / LIBRARY / "final.yaml")
    samples = read_samples(results / LIBRARY / "final_samples.csv")
    deck = read_manifest(SHIPPED_MANIFEST).libraries[LIBRARY]
    shipped = night.shipped_kernels(deck, PROFILE)
    winner, rival = variant(LIBRARY, "winner")[0], variant(LIBRARY, "other")[0]
    final["kernels"][rival] = variant(LIBRARY, "other")[1]
    scores = night.race_scores(final, samples, PROFILE, CONFIG)
    entries = night.verify_entries(final, scores, shipped)
    assert [e["shipped_failed"] for e in entries] == [i == at for i in range(len(entries))]

    def row(i, kid, status):
        return VerifyRow(
            LIBRARY, i, tuple(final["sizes"][i]), kid, status, None, 1e-6, 1.0, status, "simulated"
        )

    decision = decide(LIBRARY, entries, [row(0, winner, "fail"), row(1, rival, "fail")])
    hows = {c.size_index: c.how for c in decision.changes}
    assert hows == {i: NEAREST_ROW if i == at else SPOOF_KERNEL for i in range(len(entries))}
    repl = night.replacements(final, scores, shipped, [c.as_dict() for c in decision.changes])
    assert repl[at] == {"kernel": None, "params": None, "gflops": None, "how": NEAREST_ROW}
    fixed = night.apply_replacements(final, {"replacements": repl})
    assert fixed["per_size"][at]["winner"] is None and fixed["per_size"][at]["verify"] == NEAREST_ROW
    plan = plan_logic(Library.parse(LIBRARY), fixed["per_size"], fixed["kernels"], fixed["sizes"], shipped)
    assert [size for size, _, _ in plan.rows] == [list(s) for i, s in enumerate(fixed["sizes"]) if i != at]

    keys = [(s[0], s[1], s[3]) for s in fixed["sizes"]]  # Tensile's runtime key: the batch count is not in it
    nearest = min(
        (i for i in range(len(keys)) if i != at),
        key=lambda i: sum((a - b) ** 2 for a, b in zip(keys[i], keys[at], strict=True)),
    )
    choice = night.tuned_choice(fixed, shipped)
    assert choice[at] == shipped[nearest]["id"] and choice[nearest] == shipped[nearest]["id"]


def test_the_tuned_arm_runs_what_tensile_serves_sizes_that_differ_only_in_batch():
    """Tensile matches by [M, N, K] and serves the fastest row among equal keys: at batch 1 the tuned library
    runs the batch-80 row's kernel when that row is faster, and a batch without a row is served the same."""
    final = {
        "sizes": [[512, 64, 1, 512], [512, 64, 80, 512], [512, 64, 40, 512], [256, 256, 1, 256]],
        "per_size": [
            {"size_index": 0, "winner": "ka", "gflops": 100.0},
            {"size_index": 1, "winner": "kb", "gflops": 500.0},
            {"size_index": 2, "winner": None, "gflops": None},
            {"size_index": 3, "winner": "kc", "gflops": 50.0},
        ],
    }
    assert night.tuned_choice(final, {}) == ["kb", "kb", "kb", "kc"]


def test_without_a_client_verify_and_compare_say_they_were_skipped_and_why(tmp_path):
    results = finished(tmp_path)
    cache = make_cache(tmp_path / "cache.json")
    config = validate_config(
        {"arch": "gfx90c", "families": ["DB"], "backend": "replay", "replay": {"cache": str(cache)}}
    )
    finals, samples, decks = paths(results)
    doc = verify.run(
        finals, samples, decks, PROFILE, config, "native", results / LIBRARY / "verify.yaml", tmp_path
    )
    assert doc["skipped"] and doc["reason"].startswith(
        "skipped, because backend 'replay' has no rocBLAS client"
    )
    cmp = compare.run(
        finals,
        decks,
        [],
        [results / LIBRARY / "verify.yaml"],
        PROFILE,
        config,
        "native",
        results / "compare/compare.yaml",
        results / "compare/samples.csv",
        tmp_path,
    )
    assert cmp["skipped"] and "replay" in cmp["reason"]
    text = "\n".join(rocblas_markdown(rocblas_clients(results)))
    assert "verify was skipped, because backend 'replay'" in text and "compare was skipped" in text


@pytest.mark.parametrize("label, env", [("native", {}), ("spoof", {"HSA_OVERRIDE_GFX_VERSION": "9.0.0"})])
def test_the_tuned_arm_is_installed_with_the_labels_environment(label, env):
    assert night.label_environment(PROFILE, label) == env


def test_a_kernel_taken_out_at_thousands_of_sizes_is_one_terminal_line_and_each_size_is_in_the_log(caplog):
    how = "next verified candidate"
    changes = [Change(i, "kbad", "kgood" if i % 3 else "kspoof", how, "timeout") for i in range(5000)]
    (line,) = changes_summary(LIBRARY, changes)
    assert line.startswith(f"{LIBRARY}: kbad out (timeout); 5000 size(s)") and "… 4997 more" in line
    replaced = {c.size_index: {"kernel": c.replacement, "how": c.how} for c in changes}
    with caplog.at_level("INFO"):
        log_replacements(logging.getLogger("oto.stages.logic"), LIBRARY, replaced)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "5000 size(s) given to other kernels" in warnings[0].getMessage()
    assert "3333 to kgood" in warnings[0].getMessage() and "1667 to kspoof" in warnings[0].getMessage()
    assert sum(r.levelname == "INFO" for r in caplog.records) == 5000

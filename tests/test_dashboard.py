"""The dashboard: collecting the run's files, the waiting state, bad input, the charts and the page."""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml
from dashboard_helpers import CONFIG, PEAK, make_results
from oto.files import StageFileError
from oto.reporting import charts, figures, plots
from oto.reporting.collect import collect
from oto.reporting.dashboard import LIVE_SHARE, LIVE_STAMP, fmt, refresh, write_dashboard


@pytest.fixture
def results(tmp_path):
    return make_results(tmp_path)


def test_collect_reads_every_finished_generation_and_skips_the_running_one(results):
    data = collect(results, CONFIG)
    libs = {lib["library"]: lib for lib in data["libraries"]}
    nn, nt = libs["Cijk_Ailk_Bljk_DB"], libs["Cijk_Ailk_Bjlk_DB"]
    assert [g["gen"] for g in nn["generations"]] == [0, 1, 2]
    assert [g["gen"] for g in nt["generations"]] == [0, 1]  # gen2 has no selection.yaml yet
    assert nn["status"] == "finished" and nt["status"] == "tuning"
    assert data["state"] == "running"
    assert data["numbers"] == ["simulated"] and data["backends"] == ["sim"]


def test_benchmarks_by_proposer_count_reference_launches_apart(results):
    g = collect(results, CONFIG)["libraries"][0]["generations"][0]
    # 60 reference launches, 180 candidate launches: ksym twice per round, kagt once.
    assert g["launches"] == {"agent": 60, "reference": 60, "symbolic": 120}
    assert g["candidates"] == {"agent": 1, "symbolic": 1}
    assert g["failures"]["launch: timeout"] == 1 and g["failures"]["rejected: illegal"] == 1


def test_failures_per_generation_are_the_differences_of_the_cumulative_counts(results):
    nt = {lib["library"]: lib for lib in collect(results, CONFIG)["libraries"]}["Cijk_Ailk_Bjlk_DB"]
    assert nt["generations"][0]["failures_new"] == {"illegal": 1}
    assert nt["generations"][1]["failures_new"] == {"crash": 1, "illegal": 2}


def test_reference_drift_is_measured_from_the_reference_samples(results):
    g = collect(results, CONFIG)["libraries"][0]["generations"][0]
    # The hand-made reference times rise by 20% in the middle of the batch; the running median keeps most.
    assert 15 < g["drift_range_pct"] <= 20.0 + 1e-9
    assert min(g["drift"]["slowdown_pct"]) == 0


def test_family_figures_come_from_the_per_size_records(results):
    data = collect(results, CONFIG)
    fam = data["final"]["families"][0]
    assert fam["family"] == "DB" and fam["patterns"] == "NN"
    assert fam["best_pct_theoretical"] == pytest.approx(100 * 72.0 / PEAK)
    assert (fam["wins"], fam["ties"], fam["losses"]) == (2, 1, 1)
    current = data["current"]["families"][0]
    assert current["patterns"] == "NN, NT" and current["sizes"] == 8


def test_library_verdicts_use_the_tie_tolerance():
    assert figures.library_verdict({"geomean_score": 1.05, "losses": 0}, 0.02) == "better than the spoof"
    assert figures.library_verdict({"geomean_score": 1.01, "losses": 0}, 0.02) == "at parity with the spoof"
    assert figures.library_verdict({"geomean_score": 1.2, "losses": 1}, 0.02).startswith("mixed")
    assert figures.library_verdict({"geomean_score": 0.9, "losses": 3}, 0.02) == "slower than the spoof"
    assert figures.library_verdict({}, 0.02) == "no measurement yet"


def test_slowest_sizes_are_ordered_by_percent_of_roofline(results):
    slow = collect(results, CONFIG)["final"]["slowest"]
    pct = [r["pct_ceiling"] for r in slow]
    assert pct == sorted(pct) and slow[0]["size"] == [256, 256, 1, 256]


def test_missing_keys_from_other_stages_are_no_data_not_errors(results):
    sel = results / "Cijk_Ailk_Bjlk_DB" / "gen1" / "selection.yaml"
    doc = yaml.safe_load(sel.read_text())
    for key in ("summary", "convergence", "provenance"):
        del doc[key]
    for row in doc["per_size"]:
        row.pop("pct_ceiling")
    sel.write_text(yaml.safe_dump(doc))
    (results / "Cijk_Ailk_Bjlk_DB" / "gen1" / "build.yaml").unlink()
    data = collect(results, CONFIG)
    nt = {lib["library"]: lib for lib in data["libraries"]}["Cijk_Ailk_Bjlk_DB"]
    assert nt["generations"][1]["geomean_score"] is None
    assert nt["generations"][1]["median_pct_roofline"] is None


def test_a_broken_file_is_named(results):
    bad = results / "Cijk_Ailk_Bjlk_DB" / "gen1" / "selection.yaml"
    bad.write_text("per_size: [unclosed\n")
    with pytest.raises(StageFileError, match=re.escape(str(bad))):
        collect(results, CONFIG)
    samples = results / "Cijk_Ailk_Bjlk_DB" / "gen0" / "samples.csv"
    bad.unlink()
    samples.write_text("seq,kernel_id\n1,k\n")
    with pytest.raises(StageFileError, match="samples.csv: missing column"):
        collect(results, CONFIG)


def test_refresh_keeps_the_last_good_page_and_never_raises(results):
    assert refresh(results, CONFIG) is True
    live = results / "live" / "index.html"
    page = live.read_text()
    (results / "Cijk_Ailk_Bjlk_DB" / "gen1" / "selection.yaml").write_text("a: [\n")
    assert refresh(results, CONFIG, force=True) is False
    assert live.read_text() == page
    assert not (results / "dashboard").exists(), "the live refresh wrote the dashboard rule's output"


def test_live_refresh_is_paced_to_a_share_of_the_run(results):
    live = results / "live"
    assert refresh(results, CONFIG) is True
    stamp = json.loads((live / LIVE_STAMP).read_text())
    assert stamp["seconds"] > 0
    page = (live / "index.html").read_text()
    # Right after a refresh the next select job leaves the page alone...
    assert refresh(results, CONFIG) is False
    assert (live / "index.html").read_text() == page
    # ... until (1/LIVE_SHARE - 1) times the refresh's own duration has passed, or when forced (the end).
    stamp["ended"] -= (1 / LIVE_SHARE - 1) * stamp["seconds"] + 1
    (live / LIVE_STAMP).write_text(json.dumps(stamp))
    assert refresh(results, CONFIG) is True
    assert refresh(results, CONFIG, force=True) is True
    (live / LIVE_STAMP).write_text("{torn")
    assert refresh(results, CONFIG) is True
    # A page still waiting for first results is always due: the first finished generation shows at once.
    assert json.loads((live / LIVE_STAMP).read_text())["state"] == "running"
    assert refresh(results, CONFIG) is False
    stamp = json.loads((live / LIVE_STAMP).read_text())
    (live / LIVE_STAMP).write_text(json.dumps({**stamp, "state": "waiting"}))
    assert refresh(results, CONFIG) is True


def test_generation_digests_are_cached_on_the_files(results):
    write_dashboard(results, CONFIG)
    cache = results / "live" / "cache" / "Cijk_Ailk_Bljk_DB" / "gen0.json"
    entry = json.loads(cache.read_text())
    entry["value"]["geomean_score"] = 99.0  # a cached value is used while the files are unchanged
    cache.write_text(json.dumps(entry))
    data = collect(results, CONFIG, cache_dir=results / "live" / "cache")
    assert data["libraries"][1]["generations"][0]["geomean_score"] == 99.0
    sel = results / "Cijk_Ailk_Bljk_DB" / "gen0" / "selection.yaml"
    # Snakemake touches a job's outputs when it ends, after the select job's live refresh cached them.
    os.utime(sel, ns=(sel.stat().st_atime_ns, sel.stat().st_mtime_ns + 10**9))
    data = collect(results, CONFIG, cache_dir=results / "live" / "cache")
    assert data["libraries"][1]["generations"][0]["geomean_score"] == 99.0
    sel.write_text(sel.read_text() + "# edited\n")  # a new selection: recomputed
    data = collect(results, CONFIG, cache_dir=results / "live" / "cache")
    assert data["libraries"][1]["generations"][0]["geomean_score"] != 99.0
    samples = results / "Cijk_Ailk_Bljk_DB" / "gen0" / "samples.csv"
    write_dashboard(results, CONFIG)
    entry = json.loads(cache.read_text())
    cache.write_text(json.dumps({**entry, "value": {**entry["value"], "geomean_score": 99.0}}))
    os.utime(samples, ns=(samples.stat().st_atime_ns, samples.stat().st_mtime_ns + 10**9))
    data = collect(results, CONFIG, cache_dir=results / "live" / "cache")
    assert data["libraries"][1]["generations"][0]["geomean_score"] != 99.0  # the samples: size and mtime


def test_waiting_state_before_any_generation_finished(tmp_path):
    res = make_results(tmp_path, finished=False)
    for sel in res.glob("*/gen*/selection.yaml"):
        sel.unlink()
    data = write_dashboard(res, CONFIG)
    assert data["state"] == "waiting"
    page = (res / "dashboard" / "index.html").read_text()
    assert "Waiting for first results" in page and 'http-equiv="refresh"' in page
    for name in charts.CHARTS:
        svg = (res / "dashboard" / "plots" / f"{name}.svg").read_text()
        # The deck is known before any measurement, so its coverage chart is drawn already.
        assert "<svg" in svg and ("waiting for first results" in svg) == (name != "coverage")


def test_page_before_the_deck_exists(tmp_path):
    data = write_dashboard(tmp_path / "results" / "gfx90c", CONFIG)
    assert data["state"] == "waiting" and data["libraries"] == []
    assert "Waiting for first results" in (tmp_path / "results/gfx90c/dashboard/index.html").read_text()


def test_page_shows_every_chart_and_the_figures(results):
    data = write_dashboard(results, CONFIG)
    page = (results / "dashboard" / "index.html").read_text()
    for name in charts.CHARTS:
        assert f'src="plots/{name}.svg"' in page
        assert (results / "dashboard" / "plots" / f"{name}.svg").stat().st_size > 1000
    assert "Simulated numbers." in page
    assert fmt(data["final"]["overall"]["geomean_score"], ".3f", "×") in page
    assert 'http-equiv="refresh"' in page  # NT is still running
    cov = data["coverage"]  # the lead names the share of the footprint tuned ("Every GEMM library" before)
    assert cov["libraries_selected"] < cov["libraries_in_source"]
    lead = f"{cov['libraries_selected']} of the {cov['libraries_in_source']} GEMM libraries rocBLAS ships for"
    assert lead in page and "Every GEMM library" not in page
    assert json.loads((results / "dashboard" / "data.json").read_text())["state"] == "running"


def test_page_says_how_the_numbers_were_taken_and_warns_of_simulated_code_objects(results):
    path = results / "Cijk_Ailk_Bljk_DB" / "final.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["measurement"] = dict(launch_order="plan", clock_telemetry="per_launch", drift="clock_per_launch")
    path.write_text(yaml.safe_dump(doc))
    data = write_dashboard(results, {**CONFIG, "package": {"allow_simulated": True}})
    page = (results / "dashboard" / "index.html").read_text()
    assert 'data-test="simulated-build"' in page and "package.allow_simulated is true" in page
    assert data["simulated_build_banner"] and data["measurement"][0]["drift"]
    assert f'data-drift="{data["measurement"][0]["drift"]}"' in page
    write_dashboard(results, CONFIG)
    assert "simulated-build" not in (results / "dashboard" / "index.html").read_text()


def test_finished_run_stops_reloading(results):
    for lib in ("Cijk_Ailk_Bjlk_DB",):
        src = results / "Cijk_Ailk_Bljk_DB" / "final.yaml"
        doc = yaml.safe_load(src.read_text())
        doc.update(library=lib, pattern="NT")
        (results / lib / "final.yaml").write_text(yaml.safe_dump(doc))
    data = write_dashboard(results, CONFIG)
    assert data["state"] == "finished"
    assert 'http-equiv="refresh"' not in (results / "dashboard" / "index.html").read_text()


def test_chart_names_match_the_rule_outputs():
    assert list(plots.CHARTS) == list(charts.CHARTS)


def test_charts_are_deterministic(results):
    data = collect(results, CONFIG)
    assert plots.progress_score(data) == plots.progress_score(data)


def test_command_line_redraws_a_run(results, tmp_path, capsys):
    from oto.reporting.__main__ import main

    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    assert main([str(results), "--config", str(cfg)]) == 0
    assert "running, 2 libraries" in capsys.readouterr().out
    assert (results / "dashboard" / "index.html").is_file()


def test_every_series_of_a_chart_gets_its_own_colour():
    from oto.reporting.plots import PROPOSER_COLOURS, series_colours

    keys = ["reference", "seed", "surrogate", "new_strategy", "another", "agent"]
    colours = series_colours(keys, PROPOSER_COLOURS)
    assert len(set(colours.values())) == len(keys)
    assert colours["seed"] == PROPOSER_COLOURS["seed"] != colours["surrogate"]


def test_the_live_page_becomes_the_final_page(results):
    from oto.reporting.dashboard import publish_live

    write_dashboard(results, CONFIG)
    assert publish_live(results, results / "dashboard")
    for f in ("index.html", "data.json", *(f"plots/{n}.svg" for n in charts.CHARTS)):
        assert (results / "live" / f).read_text() == (results / "dashboard" / f).read_text(), f


def test_sparse_charts_still_label_their_value_axes():
    from browser import chart_facts
    from oto.reporting import plots

    one_failure = {
        "libraries": [
            {"generations": [{"gen": 0, "failures_new": {"timeout": 1}}, {"gen": 1, "failures_new": {}}]}
        ]
    }
    assert chart_facts(plots.failures_over_time(one_failure)).yticks == [["0", "1", "2"]]
    flat = {
        "tie_tolerance": 0.02,
        "max_generations": 2,
        "libraries": [
            {
                "family": "DB",
                "pattern": "NN",
                "generations": [{"gen": g, "geomean_score": 1.0, "converged": False} for g in range(2)],
            }
        ],
    }
    assert len(chart_facts(plots.progress_score(flat)).yticks[0]) >= 3


def _tick_labels(svg: str, axis: str) -> list[tuple[float, str]]:
    """(position, label) of every tick label of one axis of a one-axes chart, in document order."""
    import xml.etree.ElementTree as ET

    ns = "{http://www.w3.org/2000/svg}"
    out = []
    for g in ET.fromstring(svg).iter(f"{ns}g"):
        if re.fullmatch(rf"{axis}tick_\d+", g.get("id", "")):
            text = "".join(t for e in g.iter(f"{ns}text") for t in e.itertext()).strip()
            where = next((e.get("y" if axis == "y" else "x") for e in g.iter(f"{ns}text")), None)
            if text:
                out.append((float(where or 0), text))
    return out


def test_the_roofline_counts_the_launch_overhead_and_says_which_sizes_it_bounds():
    """A 1x1x128 DGEMM moves 2 KB and does 256 flops: against the bandwidth roofline alone it sits at 0.1%,
    but every launch costs its 6 us first, and against that floor it is at 12.5% (latency-bound)."""
    rows = [
        {"size_index": 0, "gflops": 0.0053, "ceiling_gflops": 4.47, "pct_ceiling": 0.12, "score": 3.6},
        {"size_index": 1, "gflops": 70.0, "ceiling_gflops": PEAK, "pct_ceiling": 69.4, "score": 1.1},
        {"size_index": 2, "gflops": 20.0, "ceiling_gflops": 40.0, "pct_ceiling": 50.0, "score": 1.0},
    ]
    sizes = [[1, 1, 1, 128], [2048, 2048, 1, 2048], [256, 256, 1, 256]]
    tiny, big, mid = figures.with_roofline(rows, sizes, 2, PEAK, 6.0)
    assert tiny["bound"] == "latency" and tiny["roofline_gflops"] == pytest.approx(256 / (6000 + 256 / 4.47))
    assert (
        tiny["pct_roofline"] == pytest.approx(100 * 0.0053 / tiny["roofline_gflops"])
        and tiny["pct_roofline"] > 12
    )
    assert big["bound"] == "compute" and big["pct_roofline"] == pytest.approx(69.4, abs=0.1)
    assert mid["bound"] == "memory" and 50 < mid["pct_roofline"] < 51
    # without a launch overhead (an older ceilings.yaml) the file's own figures stand
    assert [r["pct_roofline"] for r in figures.with_roofline(rows, sizes, 2, PEAK, None)] == [
        0.12,
        69.4,
        50.0,
    ]
    # ranked by what is left to gain (roofline / achieved), each saying what bounds it
    slow = figures.slowest_sizes([{"library": "L", "sizes": sizes, "per_size": [tiny, big, mid]}])
    assert [r["size"][0] for r in slow] == [1, 256, 2048]
    assert slow[0]["headroom"] == pytest.approx(100 / tiny["pct_roofline"]) and slow[0]["bound"] == "latency"


def test_headlines_come_per_family_next_to_the_whole_run(results):
    ceilings = results / "ceilings.yaml"
    doc = yaml.safe_load(ceilings.read_text())
    doc["roofline"] = {"launch_us": 60.0}  # long enough that 64^3 at 10 GFLOPS (52 us) is latency-bound
    ceilings.write_text(yaml.safe_dump(doc))
    data = write_dashboard(results, CONFIG)
    assert data["launch_us"] == 60.0
    (db,) = data["current"]["families"]
    assert db["latency_bound"] == 2 and data["current"]["overall"]["latency_bound"] == 2  # NN and NT's 64^3
    page = (results / "dashboard" / "index.html").read_text()
    headlines = page[page.index('data-test="headlines"') :]
    assert '<tr data-family="all"' in headlines and '<tr data-family="DB">' in headlines
    assert "after a launch overhead of 60 µs" in page and "2 sizes latency-bound" in page
    (slowest,) = re.findall(r'data-test="slowest".*?</table>', page, re.S)
    assert '<td data-key="bound">latency</td>' in slowest


def test_the_failures_chart_counts_what_the_report_counts(results):
    """The report counts final.yaml's failures, which include the final measurement's own: the chart draws
    them as a last bar, so its bars add up to the report's figure (20 against 22 in the demo before)."""
    path = results / "Cijk_Ailk_Bljk_DB" / "final.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["summary"]["failures"] = {"illegal": 2, "timeout": 3}  # the final measurement timed out once more
    path.write_text(yaml.safe_dump(doc))
    data = collect(results, CONFIG)
    nn = {lib["library"]: lib for lib in data["libraries"]}["Cijk_Ailk_Bljk_DB"]
    assert nn["final_failures_new"] == {"timeout": 1}
    assert data["final"]["failure_stages"] == {
        "illegal": {"tuning": 2, "final": 0},
        "timeout": {"tuning": 2, "final": 1},
    }
    finished = {**data, "libraries": [nn]}
    drawn: dict[str, int] = {}
    for counts in [*(g["failures_new"] for g in nn["generations"]), nn["final_failures_new"]]:
        for k, v in counts.items():
            drawn[k] = drawn.get(k, 0) + v
    assert drawn == data["final"]["failures"] == {"illegal": 2, "timeout": 3}
    labels = [t for _, t in _tick_labels(plots.failures_over_time(finished), "x")]
    assert labels == ["0", "1", "2", "final"]
    from oto.reporting.acceptance import render_markdown

    assert "- timeout: 3 (2 while tuning, 1 in the final measurement)" in render_markdown(data, {})


def test_wins_ties_losses_keep_each_family_together():
    def lib(fam, pat):
        return {"family": fam, "pattern": pat, "final": {"per_size": [{"verdict": "win"}]}, "latest": None}

    names = ["Cijk_Ailk_Bjlk_DB", "Cijk_Ailk_Bjlk_ZB_GB", "Cijk_Ailk_Bljk_DB", "Cijk_Ailk_Bljk_ZB_GB"]
    data = {
        "libraries": [
            lib(n.split("_", 3)[3], p) for n, p in zip(names, ["NT", "NT", "NN", "NN"], strict=True)
        ]
    }
    ticks = sorted(_tick_labels(plots.wins_ties_losses(data), "y"))  # top of the chart first
    assert [t for _, t in ticks] == ["DB NN", "DB NT", "ZB_GB NN", "ZB_GB NT"]
    gaps = [b - a for (a, _), (b, _) in zip(ticks, ticks[1:], strict=False)]
    assert gaps[1] > gaps[0] == pytest.approx(gaps[2])  # a gap between the families
    assert "spoof failed" not in plots.wins_ties_losses(data)
    # sizes where the spoof's kernel failed (selection.FLOOR_FAILED) get their own bar and legend entry
    data["libraries"][0]["final"]["per_size"].append({"verdict": "floor_failed"})
    assert "spoof failed" in plots.wins_ties_losses(data)
    # and sizes no kernel ran at, so that the bars add up to the deck's sizes
    assert "not measured" not in plots.wins_ties_losses(data)
    data["libraries"][1]["final"]["per_size"].append({"verdict": "not_measured"})
    assert "not measured" in plots.wins_ties_losses(data)


def test_the_coverage_axis_starts_at_one_and_the_baseline_is_labelled(results):
    data = collect(results, CONFIG)
    labels = [t for _, t in sorted(_tick_labels(plots.coverage(data), "x"))]
    assert labels[0] == "1" and "0" not in labels
    assert "1.00× spoof" in plots.progress_score(data)


def test_the_deck_of_another_gpu_is_named_in_the_coverage_chart_and_the_score_helper(tmp_path):
    """A gfx1103 run's deck is navi31's: the coverage chart and the speed-up helper name gfx1100."""
    from browser import chart_facts

    lib = {"family": "HB", "deck_sizes": 10, "latest": {"per_size": [{}] * 4}, "final": None}
    data = {"libraries": [lib], "coverage": {"deck_of": "gfx1100"}}
    labels = [text for _, text in chart_facts(plots.coverage(data)).legend]
    assert "deck sizes (shipped gfx1100)" in labels and not any("gfx900" in t for t in labels)
    res = make_results(tmp_path)
    write_dashboard(res, CONFIG)
    page = (res / "dashboard" / "index.html").read_text()
    assert "1× is the shipped gfx900 kernel" in page  # the fixture's deck: vega10's
    deck = yaml.safe_load((res / "deck.yaml").read_text())
    deck["provenance"]["deck_of"] = "gfx1100"
    (res / "deck.yaml").write_text(yaml.safe_dump(deck))
    write_dashboard(res, CONFIG)
    assert "1× is the shipped gfx1100 kernel" in (res / "dashboard" / "index.html").read_text()

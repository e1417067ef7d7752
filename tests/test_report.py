"""The acceptance report (Markdown and HTML) and, end to end, the dashboard and `snakemake --report`."""

from __future__ import annotations

import os
import re
import zipfile
from collections import Counter
from pathlib import Path

import pytest
import yaml
from browser import available, check_page
from dashboard_helpers import CONFIG, make_results
from oto.files import StageFileError
from oto.reporting import charts
from oto.reporting.collect import collect
from oto.reporting.dashboard import write_dashboard
from oto.stages import report
from workflow_helpers import FAST_CONFIG, make_workdir, snakemake


def _run(res, tmp_path):
    finals = sorted(res.glob("*/final.yaml"))
    md, html = tmp_path / "acceptance.md", tmp_path / "acceptance.html"
    text = report.run(finals, res / "ceilings.yaml", res / "deck.yaml", None, CONFIG, md, html)
    return text, html.read_text()


def test_report_figures_are_the_dashboards(tmp_path):
    res = make_results(tmp_path)
    text, html = _run(res, tmp_path)
    final = yaml.safe_load((res / "Cijk_Ailk_Bljk_DB" / "final.yaml").read_text())
    fam = collect(res, CONFIG, libraries=["Cijk_Ailk_Bljk_DB"])["final"]["families"][0]
    row = (
        f"| DB | NN | 4 | 101 | {fam['best_pct_theoretical']:.1f} | {fam['median_pct_theoretical']:.1f} | "
        f"{fam['median_pct_roofline']:.1f} |"
    )
    assert row in text
    # the headline figures: the whole run, then each family on its own
    headline = (
        f"| 1 | 4 | {final['summary']['geomean_score']:.3f}× | 2/1/1 | {1.2**0.25:.3f}× | 1/3/0 (1 kept) | "
        f"25% | {fam['median_pct_roofline']:.1f} | 0 |"
    )
    assert f"| **all families** {headline}" in text and f"| DB {headline}" in text
    assert text.index("## Headline figures") < text.index("## Coverage of the deck")
    assert "tie tolerance ±2%" in text and "≥ 1.02" in text
    assert "| Cijk_Ailk_Bljk_DB | 3 | yes | 4 | 3 | 1.198× | 2/1/1 | mixed: faster overall" in text
    assert f"slower at some sizes | {1.2**0.25:.3f}× | 1/3/0 (1 kept) |" in text  # the second floor
    assert "| libraries | 1 | 46 |" in text and "| kernels on those sizes | 3 | 2 |" in text
    assert "- illegal: 2 (2 while tuning, 0 in the final measurement)" in text and "- timeout: 2" in text
    # Slowest first: 256³ reaches 52.5% of its 40 GFLOPS roofline.
    assert text.index("| 256, 256, 1, 256 |") < text.index("| 512, 512, 1, 512 |")
    # The HTML twin shows the same numbers.
    assert f"{final['summary']['geomean_score']:.3f}×" in html and "mixed: faster overall" in html
    assert html.count("<svg") == 2 and "Simulated numbers." in html
    assert 'data-test="headlines"' in html and '<tr data-family="DB">' in html
    assert "Vs the best shipped kernel" in html and f"{1.2**0.25:.3f}×" in html


def test_report_reads_the_live_pages_digest_cache_and_writes_none(tmp_path):
    """The cache is the live page's; the report rule writes only its declared outputs."""
    res = make_results(tmp_path)
    cache = res / "live" / "cache"
    _run(res, tmp_path)
    assert not cache.exists()
    write_dashboard(res, CONFIG, res / "live")  # a live refresh caches every finished generation
    entries = {p: p.read_bytes() for p in cache.rglob("*.json")}
    assert entries
    for sel in res.glob("*/gen*/selection.yaml"):
        os.utime(sel, ns=(sel.stat().st_atime_ns, sel.stat().st_mtime_ns + 10**9))  # every entry stale
    text, _ = _run(res, tmp_path)
    assert {p: p.read_bytes() for p in cache.rglob("*.json")} == entries
    assert "| DB | NN | 4 |" in text


def test_report_names_the_broken_final(tmp_path):
    res = make_results(tmp_path)
    path = res / "Cijk_Ailk_Bljk_DB" / "final.yaml"
    doc = yaml.safe_load(path.read_text())
    del doc["per_size"][1]["verdict"]
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(StageFileError, match=re.escape(f"{path}: per_size[1] has no field 'verdict'")):
        _run(res, tmp_path)
    del doc["summary"]
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(StageFileError, match="missing field 'summary'"):
        _run(res, tmp_path)


def test_report_says_how_the_numbers_were_taken_and_warns_of_simulated_code_objects(tmp_path):
    res = make_results(tmp_path)
    path = res / "Cijk_Ailk_Bljk_DB" / "final.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["measurement"] = {
        "launch_order": "reported",
        "clock_telemetry": "per_sweep",
        "drift": "reference_timeline+sweep_clock",
        "drift_reason": "one clock per sweep on 97% of ok launches",
    }
    path.write_text(yaml.safe_dump(doc))
    text, html = _run(res, tmp_path)
    assert "drift estimator `reference_timeline+sweep_clock` — one clock per sweep on 97%" in text
    assert "Tensile's client" in text and "one clock reading per sweep" in text
    assert 'data-drift="reference_timeline+sweep_clock"' in html
    assert "**Warning:**" not in text and "simulated-build" not in html  # no opt-in, no banner
    finals = sorted(res.glob("*/final.yaml"))
    md, out = tmp_path / "a.md", tmp_path / "a.html"
    opted = {**CONFIG, "package": {"allow_simulated": True}}
    text = report.run(finals, res / "ceilings.yaml", res / "deck.yaml", None, opted, md, out)
    assert "> **Warning:** package.allow_simulated is true: TensileCreateLibrary builds installable" in text
    assert 'data-test="simulated-build"' in out.read_text()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    work = make_workdir(tmp_path_factory.mktemp("dash"), FAST_CONFIG)
    proc = snakemake(work, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return work


def _log_times(log: Path, marker: str = "") -> list[str]:
    """The timestamps (sortable text) of a rule log's lines containing ``marker``."""
    return [line[:23] for line in log.read_text().splitlines() if marker in line and line[:4].isdigit()]


@pytest.mark.slow
def test_the_ceilings_are_written_before_any_live_refresh(finished_run):
    """The live page's rooflines and the generation digests it caches for the report and the dashboard (keyed
    on the roofline) need ceilings.yaml; nothing but those two needs it otherwise, so without its priority the
    ceilings job ran last and every digest the live page cached was stale when the report read it."""
    res = finished_run / "results" / "gfx90c"
    ceilings_done = max(_log_times(res / "logs" / "ceilings.log"))
    refreshes = [
        t
        for log in [res / "logs" / "coverage.log", *res.glob("logs/*/gen*/select.log")]
        for t in _log_times(log, "oto.reporting.dashboard: dashboard ")
    ]
    assert refreshes and ceilings_done < min(refreshes)


@pytest.mark.slow
def test_run_writes_dashboard_after_every_generation_and_at_the_end(finished_run):
    res = finished_run / "results" / "gfx90c"
    logs = sorted(res.glob("logs/*/gen*/select.log"))
    assert len(logs) == 2 * FAST_CONFIG["max_generations"]
    refreshed = [log for log in logs if "oto.reporting.dashboard: dashboard" in log.read_text()]
    paced = [log for log in logs if "live dashboard: refreshed recently" in log.read_text()]
    # Every select job refreshed the page or left it to a later one (paced: oto.reporting.dashboard).
    assert refreshed and sorted(refreshed + paced) == logs
    live = yaml.safe_load((res / "live" / "data.json").read_text())
    assert live["state"] == "finished", "the dashboard rule brings the live page up to date at the end"
    # The coverage job wrote the first page, before any generation finished.
    assert re.search(
        r"dashboard \S+index.html: waiting, 2 libraries", (res / "logs" / "coverage.log").read_text()
    )
    data = yaml.safe_load((res / "dashboard" / "data.json").read_text())
    assert data["state"] == "finished"
    page = (res / "dashboard" / "index.html").read_text()
    assert 'http-equiv="refresh"' not in page and "acceptance.html" in page
    assert (res / "acceptance.html").is_file()


@pytest.mark.slow
@pytest.mark.skipif(not available(), reason="no chromium at /usr/bin/chromium")
def test_finished_dashboard_in_chromium(finished_run):
    res = finished_run / "results" / "gfx90c"
    v = check_page(res, res / "dashboard" / "index.html", "dashboard_run")
    assert v["state"] == "finished"
    finals = [yaml.safe_load(p.read_text()) for p in res.glob("*/final.yaml")]
    c = Counter(r["verdict"] for f in finals for r in f["per_size"])
    assert v["kpis"]["wtl"] == f"{c['win']} / {c['tie']} / {c['loss']}"


@pytest.mark.slow
@pytest.mark.skipif(not available(), reason="no chromium at /usr/bin/chromium")
def test_acceptance_report_of_a_run_in_chromium(finished_run):
    res = finished_run / "results" / "gfx90c"
    v = check_page(res, res / "acceptance.html", "acceptance_run")
    assert len(v["inline"]) == 2


@pytest.mark.slow
def test_snakemake_report_holds_the_dashboard_and_the_acceptance_report(finished_run):
    proc = snakemake(finished_run, "--report", "report.zip")
    assert proc.returncode == 0, proc.stderr[-3000:]
    with zipfile.ZipFile(finished_run / "report.zip") as z:
        files = z.namelist()
        html = z.read("report/report.html").decode()
    base = {f.rsplit("/", 1)[-1] for f in files}
    assert {f"{n}.svg" for n in charts.CHARTS} | {"acceptance.html"} <= base
    # Captions (workflow/report/*.rst) are rendered into the report.
    assert "realistic ceiling of the same sizes" in html and "ranked by what is left to gain" in html


def test_report_gives_the_workloads_time_saved_and_the_weighted_geomean(tmp_path):
    """With a workload (deck.yaml's workload block, final.yaml's workload and weighted geomean) the report
    adds the weighted column and the time saved; without one it shows neither (the test above)."""
    res = make_results(tmp_path)
    path = res / "Cijk_Ailk_Bljk_DB" / "final.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["summary"]["weighted_geomean_score"] = 1.5
    doc["workload"] = {"calls": 40, "calls_unmeasured": 0, "time_before_us": 2000.0, "time_after_us": 1500.0,
                       "saved_us": 500.0, "saved_ci_us": [400.0, 600.0], "saved_share": 0.25}  # fmt: skip
    path.write_text(yaml.safe_dump(doc))
    deck = yaml.safe_load((res / "deck.yaml").read_text())
    deck["workload"] = {
        "files": [{"source": "tunableop", "path": "t.csv", "format": "tunableop-untuned", "calls": 43}],
        "calls_covered": 40, "calls_uncovered": 3, "calls_by_library": {"Cijk_Ailk_Bljk_DB": 40},
        "uncovered": [{"gemm": "GemmAndBiasTunableOp_float_TN,tn_8_8_8", "calls": 3, "where": "t.csv:2",
                       "reason": "GEMM with a bias epilogue runs on hipBLASLt, not rocBLAS"}],
    }  # fmt: skip
    (res / "deck.yaml").write_text(yaml.safe_dump(deck))
    text, html = _run(res, tmp_path)
    assert (
        "| geomean speed-up | workload-weighted | W/T/L |" in text and "| 1.198× | 1.500× | 2/1/1 |" in text
    )
    assert "## Your workload: expected time saved" in text
    assert "| Cijk_Ailk_Bljk_DB | 40 | 2 ms | 1.5 ms | 0.5 ms | 0.4 ms … 0.6 ms | 25.0 |" in text
    assert "- t.csv:2: GemmAndBiasTunableOp_float_TN,tn_8_8_8 (3 calls): GEMM with a bias epilogue" in text
    assert 'data-test="workload"' in html and "400 … 600" in html and "3 calls not covered" in html
    write_dashboard(res, CONFIG)  # the dashboard shows the same table
    page = (res / "dashboard" / "index.html").read_text()
    assert 'data-test="workload"' in page and "400 … 600" in page and "3 calls not covered" in page


def test_a_capped_deck_is_stated_in_both_reports_and_a_whole_one_adds_nothing(tmp_path):
    """config deck.max_sizes kept a sample: acceptance.md and .html say "N of M shipped sizes kept"; a cap
    no library reached (deck.yaml says so) leaves the pages as they were."""
    res = make_results(tmp_path)
    before, before_html = _run(res, tmp_path)
    deck = yaml.safe_load((res / "deck.yaml").read_text())
    deck["size_cap"] = {"max_sizes": 8, "kept": 16, "of": 16, "text": "16 of 16 shipped sizes kept "
                        "(deck.max_sizes: 8): every library within the cap, the whole footprint",
                        "libraries_capped": {}}  # fmt: skip
    (res / "deck.yaml").write_text(yaml.safe_dump(deck))
    again, again_html = _run(res, tmp_path)
    assert again == before and 'data-test="size-cap"' not in again_html and "Capped deck" not in again_html
    assert len(again_html) == len(before_html)  # as before, but for the time it was generated
    deck["size_cap"] = {"max_sizes": 4, "kept": 8, "of": 16, "text": "8 of 16 shipped sizes kept "
                        "(deck.max_sizes: 4)", "libraries_capped": {"Cijk_Ailk_Bljk_DB": {"kept": 4, "of": 8},
                        "Cijk_Ailk_Bjlk_DB": {"kept": 4, "of": 8}}}  # fmt: skip
    (res / "deck.yaml").write_text(yaml.safe_dump(deck))
    text, html = _run(res, tmp_path)
    assert "**Capped deck: 8 of 16 shipped sizes kept (deck.max_sizes: 4).**" in text
    assert text.index("## Coverage of the deck") < text.index("Capped deck") < text.index("## Per family")
    assert (
        'data-test="size-cap"' in html
        and "Capped deck: 8 of 16 shipped sizes kept (deck.max_sizes: 4)." in html
    )
    assert "Cijk_Ailk_Bljk_DB 4 of 8" in html


def test_the_native_floor_is_in_both_reports_and_absent_without_one(tmp_path):
    """A library raced against upstream's own library for the GPU (config deck.native_floor) has its table in
    acceptance.md and acceptance.html alike: speed-up over native, kept sizes and sizes where upstream's
    kernel gave wrong results; a run without a native floor shows no such table."""
    res = make_results(tmp_path)
    before, before_html = _run(res, tmp_path)
    assert "Against the native floor" not in before and 'data-test="native-floor"' not in before_html
    path = sorted(res.glob("*/final.yaml"))[0]
    final = yaml.safe_load(path.read_text())
    for i, r in enumerate(final["per_size"]):
        r.update(native="knative", native_score=0.5, native_status="ok", kept_by_native=i == 0)
        r["vs_native"] = r["score"] / 0.5 if r["score"] else None
    final["per_size"][-1].update(native_score=None, native_status="validation_failed", vs_native=None)
    where = {"source": "logic", "path": "upstream/gfx1103", "arch": "gfx1103", "label": "native"}
    final["native_floor"] = where
    path.write_text(yaml.safe_dump(final))
    text, html = _run(res, tmp_path)
    table = html.split('data-test="native-floor"')[1]
    row = re.search(r'<tr data-library="' + final["library"] + r'">(.*?)</tr>', table, re.S)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert "Against the native floor" in html and "Against the native floor" in text
    assert "gfx1103 (upstream/gfx1103)" in cells[1] and cells[6:] == ["1", "1"]  # kept, wrong results
    measured = [r for r in final["per_size"] if r["vs_native"]]
    assert cells[2] == str(len(measured)) and f"| {final['library']} | gfx1103 (upstream/gfx1103) |" in text


def test_the_seed_said_is_the_one_the_finished_libraries_were_tuned_with(tmp_path):
    """A folder re-run with another seed keeps its finished libraries: the report says their night's seed, not
    the config's (which tuned nothing here); without a recorded night it says the config's."""
    res = make_results(tmp_path)
    assert collect(res, {**CONFIG, "seed": 7})["seed"] == 7
    path = res / "Cijk_Ailk_Bljk_DB" / "final.yaml"
    final = yaml.safe_load(path.read_text())
    final["night"] = {"id": "night-1", "seed": 3, "families": ["DB"], "backend": "sim"}
    path.write_text(yaml.safe_dump(final))
    data = collect(res, {**CONFIG, "seed": 7})
    assert data["seed"] == "3" and data["nights"]["night-1"]["seed"] == 3

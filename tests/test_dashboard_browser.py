"""The dashboard and the acceptance report in a real browser (headless Chromium, installed by .ci/run) at 800,
1000 and 1400 px: no console errors, nothing cut off or spilling out of its box or the window, and a table
that scrolls sideways inside its card says so (and one that fits does not); at 1400 px every chart loaded and
readable (no text under 11 px, one colour per series, numeric axes with at least three labels, no chart
squeezed below its own size), tables that fit their cards, and the numbers on the page are the numbers in
the results files (read here straight from YAML, not through oto.reporting)."""

from __future__ import annotations

import pytest
from browser import available, check_page
from dashboard_helpers import CONFIG, make_results
from oto.reporting.dashboard import write_dashboard
from oto.stages import report

pytestmark = pytest.mark.skipif(not available(), reason="no chromium at /usr/bin/chromium")


def test_dashboard_in_chromium(tmp_path):
    res = make_results(tmp_path)
    write_dashboard(res, CONFIG)
    v = check_page(res, res / "dashboard" / "index.html", "dashboard_handmade")
    assert v["state"] == "running" and len(v["rows"]) == 2


def test_waiting_page_in_chromium(tmp_path):
    res = make_results(tmp_path, finished=False)
    for sel in res.glob("*/gen*/selection.yaml"):
        sel.unlink()
    write_dashboard(res, CONFIG)
    v = check_page(res, res / "dashboard" / "index.html", "dashboard_waiting")
    assert v["state"] == "waiting" and v["waiting"]


def test_acceptance_report_in_chromium(tmp_path):
    res = make_results(tmp_path)
    html = res / "acceptance.html"
    finals = sorted(res.glob("*/final.yaml"))
    report.run(finals, res / "ceilings.yaml", res / "deck.yaml", None, CONFIG, res / "acceptance.md", html)
    v = check_page(res, html, "acceptance_handmade")
    charts_shown = {name for name, _, _ in v["inline"]}
    assert charts_shown == {"chart-progress_score", "chart-wins_ties_losses"}

"""The dashboard in a real browser (headless Chromium, installed by .ci/run): no console errors, every chart
loaded, and the numbers on the page are the numbers in the results files (read here straight from YAML,
not through oto.reporting)."""

from __future__ import annotations

import pytest
from browser import available, check_page
from dashboard_helpers import CONFIG, make_results
from oto.reporting.dashboard import write_dashboard

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

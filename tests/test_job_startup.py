"""Issue #18: what each workflow job loads before it does its work. The demo runs ~200 jobs, one Python
process each, so a library a job does not need costs the whole run. These tests pin the import paths (not
timings: those are bench/workflow_bench.py's) and check that the lighter paths give the same results."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from oto.files import StageFileError
from oto.hardware import profile as profile_module
from oto.hardware.profile import ProfileError, load_profile
from oto.measurement.score_rows import read_score_rows
from oto.measurement.scoring import SCORE_COLUMNS
from oto.measurement.selection import best_per_size, measurement_failures, observations
from oto.run.context import stage_profile
from oto.run.profile_views import stage_view

REPO = Path(__file__).resolve().parents[1]
GFX90C = REPO / "arch_profiles" / "gfx90c.yaml"

# Per job entry point (what scripts/<rule>.py imports), the libraries it must start without.
NOT_LOADED = {
    "oto.run.context": ("jsonschema", "pandas", "numpy"),
    "oto.stages.mutate": ("pandas", "matplotlib", "jinja2"),
    "oto.stages.select": ("pandas", "matplotlib", "jinja2"),
    "oto.reporting.dashboard": ("pandas", "matplotlib", "jinja2"),
    "oto.stages.emit": ("pandas", "jsonschema"),
    "oto.stages.compile": ("pandas", "jsonschema"),
}


@pytest.mark.parametrize("module", sorted(NOT_LOADED))
def test_a_job_loads_only_what_it_needs(module):
    code = (
        f"import sys; sys.path.insert(0, {str(REPO / 'workflow')!r}); import {module}; "
        f"print(' '.join(m for m in {NOT_LOADED[module]!r} if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.split() == [], f"importing {module} loads {loaded.strip()}"


def test_parsing_reads_every_stage_declaration_without_plotting():
    """The Snakefile's parse imports every stage module (oto.stages.stages): with pandas and numpy, which
    Snakemake has loaded already, and without matplotlib, which only drawing a chart needs."""
    code = (
        f"import sys; sys.path.insert(0, {str(REPO / 'workflow')!r}); import oto.stages; "
        "print(len(oto.stages.stages()), 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(len(list((REPO / "workflow" / "oto" / "stages").glob("[!_]*.py")))), "False"]


def _scores_frame() -> pd.DataFrame:
    nan = math.nan
    rows = [
        ("kb", 0, 5, 1.25, 1.1, 1.4, 9.5, 101.25, "ok", "", 0, "clock_per_launch", "separated", True),
        ("ka", 0, 5, 1.25, 1.2, 1.3, 9.5, 101.25, "ok", "", 1, "clock_per_launch", "separated", False),
        ("kc", 0, 3, 9.0, 8.0, 10.0, 1.0, 999.0, "validation_failed", "results differ", 0, "x", "", False),
        ("kc", 1, 3, nan, nan, nan, nan, nan, "timeout", "no completion", 0, "clock_per_launch", "", False),
        ("kc", 2, 3, nan, nan, nan, nan, nan, "validation_failed", "", 0, "clock_per_launch", "", False),
        ("ka", 1, 4, 0.1 + 0.2, 0.25, 0.35, 1e-7, 3.0e12, "ok", "", 2, "clock_per_launch", "tie", True),
    ]
    return pd.DataFrame(rows, columns=[*SCORE_COLUMNS, "race", "contender"])


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_score_rows_read_as_pandas_reads_them(tmp_path):
    path = tmp_path / "scores.csv"
    _scores_frame().to_csv(path, index=False)
    ours = read_score_rows(path)
    theirs = pd.read_csv(path, dtype={"kernel_id": str, "status": str}).to_dict("records")
    assert len(ours) == len(theirs)
    for mine, frame in zip(ours, theirs, strict=True):
        assert mine.keys() == frame.keys()
        for column in mine:
            assert _same(mine[column], frame[column]), (column, mine[column], frame[column])
            assert type(mine[column]) is type(frame[column]) or _same(mine[column], math.nan), column


def test_selection_on_plain_rows():
    rows = _scores_frame().to_dict("records")
    best = best_per_size(rows)
    # A tie on score goes to the first kernel id; a failed kernel never wins, however fast.
    assert list(best) == [0, 1] and best[0]["kernel_id"] == "ka" and best[1]["kernel_id"] == "ka"
    assert measurement_failures(rows) == {"validation_failed": 2, "timeout": 1, "bad_timing": 3}
    obs = {o["id"]: o for o in observations(rows, {k: {} for k in ("ka", "kb", "kc")}, [], [])}
    assert (obs["kc"]["failure"], obs["kc"]["failure_reason"]) == ("validation_failed", "results differ")
    assert obs["ka"]["failure"] == "" and obs["ka"]["score"] == pytest.approx(math.sqrt(1.25 * 0.3), abs=1e-6)


def test_a_malformed_score_cell_is_named(tmp_path):
    path = tmp_path / "scores.csv"
    _scores_frame().to_csv(path, index=False)
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace("1.25", "fast", 1)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(StageFileError, match=r"scores.csv: line 3: column 'score': 'fast'"):
        read_score_rows(path)


def test_a_job_reads_its_planned_figures_without_validating_again(tmp_path, monkeypatch):
    path = tmp_path / "gfx90c.yaml"
    path.write_text(GFX90C.read_text())
    full = load_profile(path)
    config = {"backend": "sim"}
    view = stage_view(full, "select", config, "Cijk_Ailk_Bljk_DB")

    def refuse(*args, **kwargs):
        raise AssertionError("validated again")

    monkeypatch.setattr(profile_module, "validate_profile", refuse)
    got = stage_profile(path, view)
    assert got["clock_mhz"] == full["clock_mhz"] and got["memory"] == view["memory"]
    monkeypatch.undo()

    # An edit mid-run to a figure the job reads: the job refuses, naming the field.
    data = yaml.safe_load(path.read_text())
    data["clock_mhz"] = data["clock_mhz"] + 100
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match="field 'clock_mhz' changed since this run was planned"):
        stage_profile(path, view)

    # An edit that breaks the file: the validation names the file and the broken field.
    data["compute_units"] = "many"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match=r"gfx90c.yaml: field 'compute_units'"):
        stage_profile(path, view)

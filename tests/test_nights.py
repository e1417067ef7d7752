"""Nights accumulate (issue #26): runs with different family sets, one after the other in the same results
folder, each tune only their own libraries, and the deliverables hold every library any of them finished,
saying which night finished it."""

from __future__ import annotations

import json
from pathlib import Path

import msgpack
import pytest
import yaml
from workflow_helpers import FAST_CONFIG, job_counts, make_workdir, snakemake

pytestmark = pytest.mark.slow
TARGET = "results/gfx90c/TensileLibrary.dat"
DB, SBIC = "Cijk_Ailk_Bljk_DB", "Cijk_Ailk_Bljk_SBIc"  # one small library each (8 and 6 deck sizes)
LIBRARY_RULES = {"deck", "mutate", "emit", "compile", "benchmark", "normalise", "select", "finalize", "logic"}


def _plan(work: Path, families: str) -> dict[str, int]:
    proc = snakemake(
        work, TARGET, "-n", "--logger-oto-full", "--quiet", "rules", "--config", f"families={families}"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return job_counts(proc.stdout)


def _run(work: Path, families: str) -> None:
    proc = snakemake(work, "--cores", "2", TARGET, "--config", f"families={families}")
    assert proc.returncode == 0, proc.stderr[-4000:]


def _dat(work: Path) -> dict:
    return msgpack.unpackb((work / "results/gfx90c/TensileLibrary.dat").read_bytes(), strict_map_key=False)


def test_a_second_family_set_tunes_only_its_own_libraries_and_the_library_holds_both(tmp_path):
    work = make_workdir(tmp_path, {**FAST_CONFIG, "patterns": ["NN"], "max_generations": 1})
    res = work / "results/gfx90c"
    _run(work, "[DB]")
    first = {p: p.stat().st_mtime_ns for p in (res / DB).rglob("*") if p.is_file()}
    first_night = yaml.safe_load((res / DB / "final.yaml").read_text())["night"]
    assert first_night["families"] == ["DB"] and first_night["id"].startswith("night-")

    # The second set plans its own library's jobs only: one of each per-library rule, for SBIc.
    counts = _plan(work, "[SBIc]")
    assert {r: n for r, n in counts.items() if r in LIBRARY_RULES} == {r: 1 for r in LIBRARY_RULES}, counts
    _run(work, "[SBIc]")
    assert {p: p.stat().st_mtime_ns for p in (res / DB).rglob("*") if p.is_file()} == first  # DB untouched
    second_night = yaml.safe_load((res / SBIC / "final.yaml").read_text())["night"]
    assert second_night["families"] == ["SBIc"] and second_night["id"] != first_night["id"]

    # Every deliverable holds both libraries and names the night that finished each.
    prov = _dat(work)["oto_provenance"]
    assert {lib: v["night"] for lib, v in prov["libraries"].items()} == {
        DB: first_night["id"],
        SBIC: second_night["id"],
    }
    assert prov["nights"][first_night["id"]]["libraries"] == [DB]
    assert prov["nights"][second_night["id"]]["libraries"] == [SBIC]
    manifest = yaml.safe_load((res / "library/manifest.yaml").read_text())
    assert set(manifest["provenance"]["libraries"]) == {DB, SBIC}
    for lib, night in ((DB, first_night), (SBIC, second_night)):
        record = json.loads((res / "logic" / f"gfx90c_{lib}.provenance.json").read_text())
        assert record["night"] == night
    report = (res / "acceptance.md").read_text()
    assert f"- Night `{first_night['id']}` ({DB}): families DB;" in report
    assert f"- Night `{second_night['id']}` ({SBIC}): families SBIc;" in report
    assert f"| {DB} |" in report and f"| {SBIC} |" in report
    data = json.loads((res / "dashboard/data.json").read_text())
    assert set(data["nights"]) == {first_night["id"], second_night["id"]}
    assert {lib["library"] for lib in data["libraries"]} == {DB, SBIC}
    assert set(yaml.safe_load((res / "deck.yaml").read_text())["libraries"]) == {DB, SBIC}

    # Back to the first set: nothing to re-tune (only the run-level files that list the selection re-run, and
    # the logic files, which read the run's verify record: rewritten from the same final.yaml, never re-tuned)
    tuning = LIBRARY_RULES - {"logic"}
    counts = _plan(work, "[DB]")
    assert not tuning & set(counts), counts
    # Both together: nothing at all to tune either.
    assert not tuning & set(_plan(work, "[DB,SBIc]"))

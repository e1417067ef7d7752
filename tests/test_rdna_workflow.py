"""The RDNA APUs and gfx902 through the workflow on the simulated GPU (issue #30): gfx1103 end to end on its
stock library's deck (navi31's, WMMA kernels in its floor) with a native floor beside it (a sample of
upstream's gfx1103 stub folder this test writes), and gfx902's whole deck planned."""

from __future__ import annotations

import pytest
import yaml
from test_native_floor import LIB, write_native
from workflow_helpers import FAST_CONFIG, job_counts, make_workdir, snakemake

pytestmark = pytest.mark.slow


def test_gfx1103_runs_end_to_end_on_navi31s_deck_with_a_native_floor(tmp_path):
    config = {
        **FAST_CONFIG,
        "arch": "gfx1103",
        "families": {"navi31": ["SB_GB", "BBS_BH_GB"]},
        "patterns": ["NN"],
        "deck": {"native_floor": {"path": "native/gfx1103"}},
    }
    work = make_workdir(tmp_path, config)
    write_native(work / "native" / "gfx1103")
    proc = snakemake(work, "--cores", "2", "results/gfx1103/TensileLibrary.dat", timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = work / "results" / "gfx1103"
    deck = yaml.safe_load((res / "deck.yaml").read_text())
    assert deck["provenance"]["deck_of"] == "gfx1100"
    final = yaml.safe_load((res / LIB / "final.yaml").read_text())
    assert final["shipped_gflops_arch"] == "gfx1100"
    assert final["native_floor"]["arch"] == "gfx1103" and final["native_floor"]["sizes"] > 0
    assert all(r["native"] for r in final["per_size"])
    bf16 = yaml.safe_load((res / "Cijk_Ailk_Bljk_BBS_BH_GB" / "final.yaml").read_text())
    assert "native_floor" not in bf16  # the sample ships no bf16 library
    report = (res / "acceptance.md").read_text()
    assert "spoof floor (the shipped gfx1100 solution" in report
    assert "## Against the native floor" in report and f"| {LIB} | gfx1103 (native/gfx1103) |" in report
    logic = (res / "logic" / f"gfx1103_{'Cijk_Ailk_Bljk_BBS_BH_GB'}.yaml").read_text()
    assert "SolutionNameMin" in logic
    assert (res / "TensileLibrary.dat").is_file()


def test_gfx902s_whole_deck_plans(tmp_path):
    work = make_workdir(tmp_path)
    proc = snakemake(
        work,
        "-n",
        "--cores",
        "1",
        "results/gfx902/TensileLibrary.dat",
        "--logger-oto-full",
        "--config",
        "arch=gfx902",
        "families=all",
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = job_counts(proc.stdout)
    assert counts["finalize"] == counts["logic"] == counts["deck"] == counts["verify"] == 46, counts
    assert counts["compare"] == counts["coverage"] == 1 and counts["total"] == 1295, counts

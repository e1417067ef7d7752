"""The simulated workflow end to end on a logic deck whose floor is not its own shipped kernels: a floor from
another folder's shipped logic (another arch's library of the same problem type), and no floor at all (the
baseline kernel). Every size races its floor's kernel, final.yaml and the acceptance report say which floor,
and the library is packaged as usual."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from oto.deck.model import read_library_yaml
from oto.hardware.profile import load_profile
from oto.tensile import legality
from oto.tensile.baseline import LABEL
from test_deck_sources import MANIFEST, NN, write_logic
from workflow_helpers import FAST_CONFIG, make_workdir, snakemake

pytestmark = pytest.mark.slow
TARGET = "results/gfx90c/TensileLibrary.dat"


def _decks(work: Path) -> None:
    """The deck (rocBLAS's gfx900 DB NN as a logic folder) and another arch's library of it to be the floor:
    other sizes, other picks."""
    own = MANIFEST.libraries[NN]
    write_logic(work / "decks" / "vega10", own)
    sizes = [[2 * s[0] + 3, 2 * s[1], 1, s[3] + 32] for s in own.sizes]
    shipped = [[(p + 1) % len(own.solutions), 2 * g] for p, g in own.shipped]
    write_logic(work / "decks" / "navi21", own, prefix="navi21", arch="gfx1030", sizes=sizes, shipped=shipped)


@pytest.mark.parametrize("floor", [{"source": "logic", "path": "decks/navi21"}, {"source": "none"}])
def test_a_logic_deck_runs_end_to_end_against_a_floor_of_its_own_choosing(tmp_path, floor):
    config = {
        **FAST_CONFIG,
        "patterns": ["NN"],
        "deck": {"source": "logic", "path": "decks/vega10", "floor": floor},
    }
    work = make_workdir(tmp_path, config)
    _decks(work)
    proc = snakemake(work, "--cores", "2", TARGET)
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = work / "results" / "gfx90c"
    final = yaml.safe_load((res / NN / "final.yaml").read_text())
    deck = read_library_yaml(res / NN / "deck.yaml")
    limits = legality.Limits.from_profile(load_profile(work / "arch_profiles" / "gfx90c.yaml"))
    refs = deck.references(list(range(len(deck.sizes))), limits)
    own = MANIFEST.libraries[NN].references(list(range(len(deck.sizes))), limits)
    # every size raced its floor's kernel, not the deck's own shipped one
    assert [r["shipped"] for r in final["per_size"]] == [refs[i]["id"] for i in range(len(deck.sizes))]
    assert [refs[i]["id"] for i in refs] != [own[i]["id"] for i in own]
    # a score against the floor wherever it ran; where all its launches failed, no score and a winner by time
    scored = [r for r in final["per_size"] if r["winner"] and r["verdict"] != "floor_failed"]
    assert all(r["score"] and r["score"] > 0 for r in scored)
    failed = [r for r in final["per_size"] if r["verdict"] == "floor_failed"]
    assert all(r["score"] is None and r["shipped_status"] != "ok" and r["gflops"] for r in failed)
    # how each floor kernel's launches ended in the race (compare leaves out sizes where it was wrong)
    assert {r["shipped_status"] for r in final["per_size"] if r["winner"]} <= {"ok", "validation_failed"}
    # the deck's own shipped figures stay, under their arch-neutral name
    assert final["shipped_gflops_arch"] == "gfx900"
    assert [r["shipped_gflops"] for r in final["per_size"]] == [g for _, g in MANIFEST.libraries[NN].shipped]
    report = (res / "acceptance.md").read_text()
    candidates = yaml.safe_load((res / NN / "gen0" / "candidates.yaml").read_text())
    references = [k for k in candidates["kernels"] if "reference" in k["roles"]]
    if floor["source"] == "none":
        assert final["floor"] == {"source": "none", "kernel": "baseline", "label": LABEL}
        assert f"floor: {LABEL}" in report
        assert len(references) == 1 and references[0]["proposer"] == "baseline"
    else:
        assert final["floor"] == {"source": "logic", "path": "decks/navi21", "arch": "gfx1030", "library": NN}
        assert "the floor of the shipped gfx1030 library (logic decks/navi21)" in report
        assert all(k["rationale"].startswith("floor: the shipped gfx1030 solution") for k in references)
    assert "spoof floor" not in report
    assert (res / "TensileLibrary.dat").is_file() and (res / "logic" / f"gfx90c_{NN}.yaml").is_file()

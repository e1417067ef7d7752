"""bench/tensile_conformance.py's label check, with TensileCreateLibrary replaced by oto's own writer (the
real-Tensile runs are the bench's job; here: which builds the options ask for, and that a differing field of
the merged build is counted)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import msgpack
import yaml
from oto.tensile.native_library import build_master_library

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "tensile_conformance", REPO / "bench" / "tensile_conformance.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _fake_builds(bench, monkeypatch, calls: list[str], rename: bool = False):
    def fake_lazy(paths, arch, lib_dir, *args, **kwargs):
        calls.append("lazy")
        lib_dir.mkdir(parents=True)
        parent, children = build_master_library(paths, arch=arch, lazy=True)
        files = {f"TensileLibrary_lazy_{arch}": parent, **children}
        for stem, state in files.items():
            (lib_dir / f"{stem}.dat").write_bytes(msgpack.packb(state))
        return {"files": [f"{stem}.dat" for stem in files] + ["TensileLibrary_gfx900.co"]}

    def fake_merged(python, arch, paths, work, profile, timeout_s):
        calls.append("merged")
        work.mkdir(parents=True)
        state = build_master_library(paths, arch=arch)
        if rename:  # as if TensileCreateLibrary named the first kernel otherwise
            state["solutions"][0]["name"] += "_X"
        (work / "TensileLibrary.dat").write_bytes(msgpack.packb(state))
        return work / "TensileLibrary.dat"

    monkeypatch.setattr(bench, "build_library", fake_lazy)
    monkeypatch.setattr(bench, "tcl_merged", fake_merged)


def test_no_lazy_runs_the_merged_build_alone_and_counts_its_differences(vega10_dir, tmp_path, monkeypatch):
    bench = _bench()
    logic = tmp_path / "vega10_Cijk_Ailk_Bljk_SBIIc.yaml"
    shutil.copy(vega10_dir / logic.name, logic)
    profile = yaml.safe_load((REPO / "arch_profiles" / "gfx900.yaml").read_text())
    args = ("python", [logic], "native", "gfx900", tmp_path / "work", profile)

    calls: list[str] = []
    _fake_builds(bench, monkeypatch, calls)
    assert bench._check_label_files(*args, [], True, 60) == []
    assert calls == ["lazy", "merged"]

    calls.clear()
    shutil.rmtree(tmp_path / "work")
    assert bench._check_label_files(*args, [], True, 60, lazy_too=False) == []
    assert calls == ["merged"]

    calls.clear()
    shutil.rmtree(tmp_path / "work")
    _fake_builds(bench, monkeypatch, calls, rename=True)
    found = bench._check_label_files(*args, [], True, 60, lazy_too=False)
    assert calls == ["merged"]
    assert len(found) == 1 and "TensileLibrary.dat (merged)/solutions[0]/name" in found[0]

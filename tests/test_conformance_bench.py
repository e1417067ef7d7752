"""bench/tensile_conformance.py's label check, with TensileCreateLibrary replaced by oto's own writer (the
real-Tensile runs are the bench's job; here: which builds the options ask for, and that a differing field of
the merged build is counted)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import msgpack
import pytest
import yaml
from oto.tensile.labels import logic_label
from oto.tensile.native_library import build_master_library

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "tensile_conformance", REPO / "bench" / "tensile_conformance.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _fake_builds(bench, monkeypatch, calls: list[str], rename: bool = False, builds: list | None = None):
    """TensileCreateLibrary's two builds by oto's own writer; ``calls`` gets each build's kind, ``builds``
    (if given) its (kind, architecture, jobs)."""
    builds = [] if builds is None else builds

    def fake_lazy(paths, arch, lib_dir, *args, **kwargs):
        calls.append("lazy")
        builds.append(("lazy", arch, kwargs["jobs"]))
        lib_dir.mkdir(parents=True)
        parent, children = build_master_library(paths, arch=arch, lazy=True)
        files = {f"TensileLibrary_lazy_{arch}": parent, **children}
        for stem, state in files.items():
            (lib_dir / f"{stem}.dat").write_bytes(msgpack.packb(state))
        return {"files": [f"{stem}.dat" for stem in files] + ["TensileLibrary_gfx900.co"]}

    def fake_merged(python, arch, paths, work, profile, timeout_s, jobs=2):
        calls.append("merged")
        builds.append(("merged", arch, jobs))
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


def test_the_merged_build_reuses_its_own_scratch_folder_and_refuses_any_other(tmp_path, monkeypatch):
    """A rerun with --work kept builds again in the folder the first run made (a stale TensileLibrary.dat is
    gone first, so a failed rebuild is never read as a success); a folder it did not make is left alone."""
    bench = _bench()
    rcs = [0, 0, 1]

    def fake_tcl(cmd, log, timeout_s, cwd=None):  # TensileCreateLibrary: the merged .dat, or a failure
        log.write_text(" ".join(cmd))
        rc = rcs.pop(0)
        if rc == 0:
            (cwd / "out" / "library").mkdir(parents=True)
            (cwd / "out" / "library" / "TensileLibrary.dat").write_bytes(msgpack.packb({"solutions": []}))
        return rc

    monkeypatch.setattr(bench, "run_killable", fake_tcl)
    monkeypatch.setattr(bench, "tcl_command", lambda *a, **k: ["tcl", "--separate-architectures"])
    logic = tmp_path / "x.yaml"
    logic.write_text("[]")
    work = tmp_path / "label" / "merged"
    for _ in range(2):
        assert bench.tcl_merged("python", "gfx900", [logic], work, {}).is_file()
    with pytest.raises(RuntimeError, match="rc 1"):
        bench.tcl_merged("python", "gfx900", [logic], work, {})
    assert not (work / "out").exists()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "keep.txt").write_text("not the bench's")
    with pytest.raises(RuntimeError, match="not a merged build's scratch folder"):
        bench.tcl_merged("python", "gfx900", [logic], other, {})
    assert sorted(p.name for p in other.iterdir()) == ["keep.txt"]


@pytest.mark.parametrize(
    ("arch", "shipped", "spoof"),
    [("gfx90c", "vega10", "gfx900"), ("gfx1035", "navi21", "gfx1030"), ("gfx1103", "navi31", "gfx1100")],
)
def test_both_labels_are_built_for_every_apu(arch, shipped, spoof, request, tmp_path, monkeypatch):
    """The spoof label is the profile's stock library (gfx1030 for gfx1035, gfx1100 for gfx1103), not gfx900:
    the RDNA APUs' logic goes through both builds of both labels, under each label's own prefix (issue #30;
    the bench once asked for label gfx900 and stopped with logic_label's ValueError on every RDNA arch).
    ``jobs`` 1 reaches both builds."""
    bench = _bench()
    name = "Cijk_Alik_Bjlk_SB"
    src = request.getfixturevalue(f"{shipped}_dir") / f"{shipped}_{name}.yaml"
    profile = yaml.safe_load((REPO / "arch_profiles" / f"{arch}.yaml").read_text())
    prefixes = []

    def fake_write_logic(root, arch_, profile_, label, dest, libraries):  # shipped logic, relabelled
        assert (arch_, libraries) == (arch, [name])
        prefix, architecture, _ = logic_label(profile_, label)
        prefixes.append(prefix)
        head = src.read_text().split("\n", 3)  # version, ScheduleName, ArchitectureName, the rest
        dest.mkdir(parents=True, exist_ok=True)
        out = dest / f"{prefix}_{name}.yaml"
        out.write_text("\n".join([head[0], f"- {prefix}", f"- {architecture}", head[3]]))
        return [out]

    monkeypatch.setattr(bench, "write_logic", fake_write_logic)
    calls: list[str] = []
    builds: list[tuple] = []
    _fake_builds(bench, monkeypatch, calls, builds=builds)
    checked = bench.check_labels("python", tmp_path, arch, profile, tmp_path / "tcl", [name], jobs=1)
    assert list(checked) == ["native", "spoof"]
    for per_family, found, _ in checked.values():
        assert found == [] and per_family["SB"] > 0
    assert builds == [("lazy", arch, 1), ("merged", arch, 1), ("lazy", spoof, 1), ("merged", spoof, 1)]
    assert prefixes == [profile["tensile"]["logic_prefix"], profile["stock_library"]["logic_prefix"]]

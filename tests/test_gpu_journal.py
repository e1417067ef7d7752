"""The GPU-reset journal (oto.registry.gpu_journal): calls in flight are durable, a dead caller's kernels run
one at a time, the one whose call dies is quarantined as gpu_reset and never runs again on that device; end
to end through the tensile backend with a stand-in client that kills its process group and the job's."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from oto.backends.base import Kernel, Problem
from oto.backends.tensile import TensileBackend
from oto.gemm import Library
from oto.registry.gpu_journal import GPU_RESET, GpuJournal, InFlight, Quarantine
from oto.registry.records import COLUMNS
from oto.tensile.params import candidate_id, canonical

ROOT = Path(__file__).resolve().parents[1]
FAKE = Path(__file__).with_name("fake_tensile.py")
CLIENT = Path(__file__).with_name("stand_in_client.py")
LIB = "Cijk_Ailk_Bjlk_SB"


def journal(tmp_path, device="gfx90c") -> GpuJournal:
    return GpuJournal(tmp_path / "journal", device, Quarantine(tmp_path / "quarantine.jsonl"), "gfx90c")


def kernel(i: int) -> dict:
    return {"id": f"k{i:012x}", "library": LIB, "params": {"ThreadTile": [4, 4]}}


def dead_call(tmp_path, kernels, probe_of="") -> None:
    """A caller that journals a call and dies in it (os._exit: no cleanup runs)."""
    code = textwrap.dedent(
        f"""
        import json, os, sys
        sys.path[:0] = {sys.path!r}
        from oto.registry.gpu_journal import GpuJournal, Quarantine
        from pathlib import Path
        j = GpuJournal(Path({str(tmp_path / "journal")!r}), "gfx90c", Quarantine(Path("q")), "gfx90c")
        with j.call("fake", json.loads({json.dumps(kernels)!r}), {{"sizes": [[64, 64, 1, 64]]}},
                    probe_of={probe_of!r}):
            os._exit(9)
        """
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 9


def test_a_call_is_durable_while_in_flight_and_gone_when_it_returns(tmp_path):
    j = journal(tmp_path)
    with j.call("fake", [kernel(1)], {"sizes": [[64, 64, 1, 64]]}) as entry:
        on_disk = InFlight.read(entry.path)
        assert on_disk is not None and on_disk.kernels[0]["id"] == kernel(1)["id"] and on_disk.alive()
        assert j.orphans() == []  # this process is alive: its call is not an orphan
    assert not list((tmp_path / "journal" / "calls").glob("*.json"))
    with pytest.raises(RuntimeError), j.call("fake", [kernel(1)], {}):
        raise RuntimeError("the client crashed; this process survived it")
    assert not list((tmp_path / "journal" / "calls").glob("*.json"))


def recovery_that_dies(tmp_path, die_on: str, ran: Path) -> int:
    """A job that recovers the journal and dies (os._exit) in the probe of kernel ``die_on``."""
    code = textwrap.dedent(
        f"""
        import os, sys
        sys.path[:0] = {sys.path!r}
        from oto.registry.gpu_journal import GpuJournal, Quarantine
        from pathlib import Path
        j = GpuJournal(Path({str(tmp_path / "journal")!r}), "gfx90c",
                       Quarantine(Path({str(tmp_path / "quarantine.jsonl")!r})), "gfx90c")

        def probe(entry, k):
            assert entry.probe_of and [x["id"] for x in entry.kernels] == [k["id"]]  # journalled, alone
            with open({str(ran)!r}, "a") as fh:
                fh.write(k["id"] + "\\n")
            if k["id"] == {die_on!r}:
                os._exit(9)

        j.recover({{"fake": probe}})
        """
    )
    return subprocess.run([sys.executable, "-c", code]).returncode


def test_a_dead_callers_kernels_run_alone_and_the_one_that_dies_is_quarantined(tmp_path):
    ks = [kernel(i) for i in range(3)]
    dead_call(tmp_path, ks)
    j = journal(tmp_path)
    (orphan,) = j.orphans()
    assert orphan.pid != os.getpid() and not orphan.alive()
    ran = tmp_path / "ran.txt"
    assert recovery_that_dies(tmp_path, ks[1]["id"], ran) == 9
    assert ran.read_text().split() == [ks[0]["id"], ks[1]["id"]]
    ran.unlink()
    notes = journal(tmp_path).recover({"fake": lambda e, k: ran.open("a").write(k["id"] + "\n")})
    assert ran.read_text().split() == [ks[2]["id"]]  # the culprit is not run again; the rest still is
    assert any("quarantined" in n and ks[1]["id"] in n for n in notes)
    q = Quarantine(tmp_path / "quarantine.jsonl")
    (rec,) = q.records()
    assert set(rec) == set(COLUMNS) and rec["status"] == GPU_RESET and rec["kind"] == "failed"
    assert rec["size"] == "64,64,1,64" and rec["family"] == "SB" and rec["pattern"] == "NT"
    assert j.quarantined() == {(LIB, ks[1]["id"]): rec["reason"]}
    assert journal(tmp_path, device="gfx902").quarantined() == {}  # another device: not quarantined there
    assert journal(tmp_path).recover({"fake": lambda e, k: 1 / 0}) == []  # nothing left to settle
    assert "quarantined" in (tmp_path / "journal" / "journal.log").read_text()


def test_a_dead_call_whose_kernels_all_return_alone_quarantines_nothing(tmp_path):
    dead_call(tmp_path, [kernel(1), kernel(2)])
    notes = journal(tmp_path).recover({"fake": lambda e, k: None})
    assert any("not attributed" in n for n in notes)
    assert Quarantine(tmp_path / "quarantine.jsonl").records() == []


def test_a_dead_call_of_another_kind_is_left_for_its_caller(tmp_path):
    dead_call(tmp_path, [kernel(1)])
    assert journal(tmp_path).recover({"rocblas-bench": lambda e, k: None}) == []
    assert len(journal(tmp_path).orphans()) == 1


def test_a_torn_quarantine_line_loses_only_itself(tmp_path):
    dead_call(tmp_path, [kernel(1)], probe_of="x")
    journal(tmp_path).recover({"fake": lambda e, k: None})
    path = tmp_path / "quarantine.jsonl"
    path.write_text(path.read_text() + '{"kind": "failed", "status": "gpu_re')  # a crash mid-append
    assert len(Quarantine(path).records()) == 1


# ---- end to end: the tensile backend, a stand-in Tensile and a client that takes the job down ----

JOB = """
import json, sys
from pathlib import Path
import yaml
from oto.backends.base import Kernel, Launch, MeasurePlan, Problem, Size
from oto.backends.tensile import TensileBackend
from oto.gemm import Library
args = json.loads(Path(sys.argv[1]).read_text())
be = TensileBackend(args["profile"], args["tensile"], "job")
ks = [Kernel(k["id"], k["params"]) for k in args["kernels"]]
sizes = [Size(*s) for s in args["sizes"]]
launches = [Launch(k.id, "candidate", s, 0) for s in range(len(sizes)) for k in ks]
samples = be.measure(Problem(Library.parse(args["library"]), args["profile"], args["pt"]),
                     MeasurePlan({k.id: k for k in ks}, sizes, launches), Path(args["work"]))
Path(sys.argv[2]).write_text(json.dumps([[s.kernel_id, s.status, s.reason] for s in samples]))
"""


def test_a_kernel_that_resets_the_gpu_is_found_quarantined_and_never_run_again(tmp_path):
    profile = yaml.safe_load((ROOT / "arch_profiles" / "gfx90c.yaml").read_text())
    pt = {"OperationType": "GEMM", "DataType": 0, "TransposeA": False, "TransposeB": True, "UseBeta": True,
          "Batched": True}  # fmt: skip
    ps = [canonical({"ThreadTile": tt, "WorkGroup": [16, 16, 1], "DepthU": 16, "VectorWidth": 4})
          for tt in ([4, 4], [8, 4], [2, 2], [8, 8])]  # fmt: skip
    ks = [Kernel(candidate_id(p), p) for p in ps]
    culprit = ks[1]
    client = tmp_path / "tensile_client"
    resets = tmp_path / "resets.txt"
    client.write_text(
        f"#!/bin/sh\nSTAND_IN_CLIENT_RESET=_TT8_4_ STAND_IN_CLIENT_RESET_COUNT={resets} "
        f'exec {sys.executable} {CLIENT} "$@"\n'
    )
    client.chmod(0o755)
    tensile = {
        "command": [sys.executable, str(FAKE)],
        "asm_cache": str(tmp_path / "cache" / "asm.yaml"),
        "journal": str(tmp_path / "gpu-journal"),
        "quarantine": str(tmp_path / "registry" / "quarantine.jsonl"),
        "prebuilt_client": str(client),
        "timeout_s": 60,
        "telemetry": {"source": "none"},
    }
    be = TensileBackend(profile, tensile, "test")
    prob = Problem(Library.parse(LIB), profile, pt)
    assert all(b.status == "ok" for b in be.build(prob, ks, tmp_path / "work"))
    args = tmp_path / "args.json"
    args.write_text(json.dumps({
        "profile": profile, "tensile": tensile, "library": LIB, "pt": pt, "work": str(tmp_path / "work"),
        "kernels": [{"id": k.id, "params": k.params} for k in ks], "sizes": [[128, 128, 1, 128]],
    }))  # fmt: skip
    script = tmp_path / "job.py"
    script.write_text(JOB)
    out = tmp_path / "samples.json"

    def night():
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.run(
            [sys.executable, str(script), str(args), str(out)], env=env, start_new_session=True,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        return proc.returncode

    assert night() == -signal.SIGKILL  # the batch's call resets the GPU: the job dies with it
    assert len(resets.read_text().splitlines()) == 1
    assert night() == -signal.SIGKILL  # resumed: the kernels run alone; the culprit's probe dies
    assert len(resets.read_text().splitlines()) == 2
    assert night() == 0  # resumed: the probe's kernel is quarantined, the rest measured
    assert len(resets.read_text().splitlines()) == 2
    samples = {k: (status, reason) for k, status, reason in json.loads(out.read_text())}
    assert samples[culprit.id][0] == GPU_RESET and "quarantined" in samples[culprit.id][1]
    assert all(samples[k.id][0] == "ok" for k in ks if k is not culprit)
    (rec,) = Quarantine(tmp_path / "registry" / "quarantine.jsonl").records()
    assert rec["kernel_id"] == culprit.id and rec["library"] == LIB
    assert night() == 0  # the next night never meets that reset again
    assert len(resets.read_text().splitlines()) == 2
    log = (tmp_path / "gpu-journal" / "journal.log").read_text()
    assert "running them one at a time" in log and f"quarantined {LIB}/{culprit.id}" in log


def test_quarantines_travel_in_a_testers_bundle_and_the_merge_keeps_them(tmp_path):
    """The small fleet hook: a tester's bundle carries its quarantine with the library's records, and the
    merged registry holds it (so every later merge sees which kernel took which device down)."""
    import sqlite3

    from fleet_helpers import synthetic_bundle
    from oto.config import validate_config
    from oto.fleet.merge import MergeSettings, merge
    from oto.hardware.profile import load_profile

    bundle = synthetic_bundle(tmp_path, name="q", quarantine=True)
    arch = load_profile(ROOT / "arch_profiles" / "gfx90c.yaml")
    config = validate_config({"arch": "gfx90c", "families": "all"})
    settings = MergeSettings("gfx90c", arch, config, numbers="simulated")
    merge([bundle], tmp_path / "out", settings)
    db = sqlite3.connect(tmp_path / "out" / "gfx90c" / "registry" / "registry.sqlite")
    rows = db.execute("SELECT kind, run_id FROM records WHERE status = ?", (GPU_RESET,)).fetchall()
    assert len(rows) == 1 and rows[0][0] == "failed" and rows[0][1].startswith("@")  # run_id@device


def test_the_registry_consolidation_merges_the_quarantine(tmp_path):
    from oto.registry.store import Store, consolidate

    dead_call(tmp_path, [kernel(7)], probe_of="x")
    j = GpuJournal(
        tmp_path / "journal", "gfx90c", Quarantine(tmp_path / "registry" / "quarantine.jsonl"), "gfx90c"
    )
    j.recover({"fake": lambda e, k: None})
    consolidate([], tmp_path / "registry" / "registry.sqlite")
    store = Store(tmp_path / "registry" / "registry.sqlite")
    assert [
        r["kernel_id"] for r in store.query("SELECT kernel_id FROM records WHERE status='gpu_reset'")
    ] == [kernel(7)["id"]]

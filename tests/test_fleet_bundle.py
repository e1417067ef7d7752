"""The tester's one command end to end (preflight, the run of one shard on the device profile, the bundle),
and the bundle: one checksummed archive with the registry slice, provenance, logs and the acceptance report,
and no API key, token or home path inside (a bundle made with a fake key and token set, its folder inside the
tester's home, is grepped byte for byte)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

import pytest
import yaml
from oto.fleet.bundle import BundleError, BundleSpec, Scrubber, write_bundle
from oto.fleet.intake import Expect, open_bundle
from oto.hardware.profile import load_profile
from oto.registry.job_files import read_job_file
from workflow_helpers import REPO

pytestmark = pytest.mark.slow
ARCH = load_profile(REPO / "arch_profiles" / "gfx90c.yaml")


def members(path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def test_the_tester_command_runs_preflight_then_the_shard_then_bundles(fleet_runs):
    proc = fleet_runs.proc_a
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert out.index("[ok  ] gpu") < out.index("Running:") < out.index("Bundle written:")
    # the maintainer's intake ran on it before the tester sends it
    check = "Merge check (the checks `oto merge` runs): this bundle would be accepted"
    assert out.index("Bundle written:") < out.index(check)
    assert "shard=1/2" in out and "device_profile=results/gfx90c/tester/device/gfx90c.yaml" in out
    assert "1 of 1 libraries of shard 1/2 finished" in out
    # a simulated night is not pointed to as this machine's tuned library
    assert "holds simulated numbers — not for installing" in out and "Your own tuned library" not in out
    assert fleet_runs.agent_requests >= 1  # the key was used (against the local stand-in API)
    b1 = fleet_runs.proc_b1.stdout
    assert "no ANTHROPIC_API_KEY: the run uses the surrogate search strategy alone" in b1


def test_the_run_used_the_device_profile(fleet_runs):
    """Ceilings of the run are the device's (8 CUs at 1.9 GHz: 1945.6 GFLOPS FP32), not the arch profile's."""
    ceilings = yaml.safe_load((fleet_runs.work_a / "results/gfx90c/ceilings.yaml").read_text())
    assert ceilings["theoretical"]["fp32"]["gflops"] == pytest.approx(1945.6)
    ceilings_b = yaml.safe_load((fleet_runs.work_b / "results/gfx90c/ceilings.yaml").read_text())
    assert ceilings_b["theoretical"]["fp32"]["gflops"] == pytest.approx(6 * 64 * 2 * 1.5)


def test_the_bundle_holds_everything_with_a_manifest_of_sha256_sums(fleet_runs):
    m = members(fleet_runs.bundle_a)
    lib = "Cijk_Ailk_Bljk_DB"
    for name in (
        "bundle.yaml",
        "MANIFEST.sha256",
        "config.yaml",
        "preflight.yaml",
        "profile/gfx90c.yaml",
        f"registry/{lib}.jsonl",
        f"results/{lib}/final.yaml",
        f"samples/{lib}/gen0.csv",
        f"samples/{lib}/final.csv",
        "results/acceptance.md",
        "results/acceptance.html",
        "results/ceilings.yaml",
        "logs/snakemake.log",
        f"logs/{lib}/gen0/benchmark.log",
        f"logs/{lib}/gen0/agent.jsonl",
    ):
        assert name in m, name
    listed = dict(reversed(line.split("  ", 1)) for line in m["MANIFEST.sha256"].decode().splitlines())
    assert set(listed) == set(m) - {"MANIFEST.sha256"}
    assert all(hashlib.sha256(m[n]).hexdigest() == s for n, s in listed.items())
    assert not any(name.startswith("results/Cijk_Ailk_Bjlk") for name in m)  # the other shard's library
    # the raw measurements the merge recomputes the claims from, as the run wrote them
    run = fleet_runs.work_a / "results/gfx90c" / lib
    assert m[f"samples/{lib}/final.csv"] == (run / "final_samples.csv").read_bytes()
    assert m[f"samples/{lib}/gen0.csv"] == (run / "gen0/samples.csv").read_bytes()


def test_provenance_names_device_versions_and_hashes(fleet_runs):
    d = yaml.safe_load(members(fleet_runs.bundle_a)["bundle.yaml"])
    assert d["schema"] == 2 and d["arch"] == "gfx90c" and d["shard"] == "1/2" and d["numbers"] == "simulated"
    assert d["libraries"] == ["Cijk_Ailk_Bljk_DB"] and d["finished"] == ["Cijk_Ailk_Bljk_DB"]
    dev = d["device"]
    assert dev["compute_units"] == 8 and dev["clock_mhz"] == 1900 and dev["memory_kind"] == "ddr4-3200"
    assert dev["kernel"] == "6.9.3-76060903-generic" and dev["rocm"] == "6.1.2-119"
    assert dev["driver"] == "amdgpu of kernel 6.9.3-76060903-generic"
    assert dev["cpu"] == "AMD Ryzen 7 5700U with Radeon Graphics" and dev["id"].startswith("d")
    p = d["provenance"]
    assert p["oto_version"] and p["logic_format"] and p["tensile_version"] is None  # simulated: no Tensile
    assert len(p["config_hash"]) == 12 and len(p["arch_profile_sha256"]) == 64
    assert (
        p["arch_profile_sha256"]
        == hashlib.sha256((REPO / "arch_profiles/gfx90c.yaml").read_bytes()).hexdigest()
    )
    assert len(p["device_profile_hash"]) == 64 and p["deck_source"]["kind"] == "manifest"
    assert d["agent_proposals"] >= 1
    profile = yaml.safe_load(members(fleet_runs.bundle_a)["profile/gfx90c.yaml"])
    assert profile["compute_units"] == 8 and profile["device"]["id"] == dev["id"]


def test_the_registry_slice_holds_every_measurement_failures_included(fleet_runs, tmp_path):
    lib = "Cijk_Ailk_Bljk_DB"
    on_disk = []
    for f in sorted((fleet_runs.work_a / "results/gfx90c" / lib).glob("gen*/registry.jsonl")):
        on_disk += read_job_file(f).records
    (tmp_path / "slice.jsonl").write_bytes(members(fleet_runs.bundle_a)[f"registry/{lib}.jsonl"])
    res = read_job_file(tmp_path / "slice.jsonl")
    assert not res.problems and len(res.records) == len(on_disk)
    kinds = {r["kind"] for r in res.records}
    assert {"proposed", "built", "benchmarked"} <= kinds
    key = ("kind", "kernel_id", "size", "generation", "score")
    assert sorted(tuple(r[k] for k in key) for r in res.records) == sorted(
        tuple(r[k] for k in key) for r in on_disk
    )


def test_no_key_token_or_home_path_anywhere_in_the_bundle(fleet_runs):
    from fleet_helpers import FAKE_KEY, FAKE_TOKEN

    raw = fleet_runs.bundle_a.read_bytes()
    tar_stream = gzip.decompress(raw)  # headers and contents, as bytes
    home = str(fleet_runs.home).encode()
    work = str(fleet_runs.work_a).encode()
    for needle in (FAKE_KEY.encode(), FAKE_KEY[-12:].encode(), FAKE_TOKEN.encode(), home, work, b"/home/"):
        assert needle not in tar_stream and needle not in raw, needle
    # the run itself wrote them: the scrubbing is real (the audit log had the home path, the log the folder)
    logs = b"".join(
        p.read_bytes() for p in (fleet_runs.work_a / "results/gfx90c/logs").rglob("*") if p.is_file()
    )
    assert work in logs or home in logs
    with tarfile.open(fleet_runs.bundle_a, "r:gz") as tar:
        assert all(m.uname == "" and m.gname == "" and m.uid == 0 and m.isreg() for m in tar.getmembers())


def test_a_resumed_night_reruns_nothing_and_bundles_again(fleet_runs):
    from fleet_helpers import oto

    first = sorted((fleet_runs.work_b / "bundles").glob("*.oto.tar.gz"))
    assert fleet_runs.proc_b2.returncode == 0, fleet_runs.proc_b2.stderr[-2000:]
    assert "oto tester: config/config.yaml, shard 2/2" in fleet_runs.proc_b2.stdout  # the last run's config
    d = yaml.safe_load(members(fleet_runs.bundle_b2)["bundle.yaml"])
    assert d["shard"] == "2/2" and d["libraries"] == ["Cijk_Ailk_Bjlk_DB"]  # the second night's shard only
    again = oto(fleet_runs.work_b, "tester", "bundle", env=fleet_runs.tmp_env)
    assert again.returncode == 0 and "Bundle written" in again.stdout
    assert len(sorted((fleet_runs.work_b / "bundles").glob("*.oto.tar.gz"))) >= len(first)
    rerun = oto(
        fleet_runs.work_b, "tester", "run", "--root", str(fleet_runs.machine_b), env=fleet_runs.tmp_env
    )
    assert rerun.returncode == 0 and "Nothing to be done" in rerun.stdout + rerun.stderr
    assert "shard 2/2" in rerun.stdout


def test_the_tester_bundle_passes_the_merge_checks(fleet_runs):
    for b in fleet_runs.bundles:
        accepted = open_bundle(b, Expect("gfx90c", ARCH, numbers="simulated"))
        assert accepted.records and accepted.finals


def test_a_bundle_that_would_leak_is_not_written(tmp_path, fleet_runs):
    results = fleet_runs.work_a / "results/gfx90c"
    spec = BundleSpec(
        arch="gfx90c",
        shard="1/2",
        libraries=["Cijk_Ailk_Bljk_DB"],
        config={"secret_path": str(fleet_runs.home)},
        profile=load_profile(results / "tester/device/gfx90c.yaml"),
        arch_profile=ARCH,
        arch_profile_file=REPO / "arch_profiles/gfx90c.yaml",
        results=results,
    )

    class Leaky(Scrubber):
        def text(self, s: str) -> str:  # a scrubber that forgets to scrub
            return s

    with pytest.raises(BundleError, match="still carries the home folder"):
        write_bundle(spec, tmp_path, Leaky({"HOME": str(fleet_runs.home)}, fleet_runs.work_a))
    assert not list(tmp_path.glob("*.oto.tar.gz"))


def test_the_scrubber():
    s = Scrubber({"HOME": "/home/alice", "MY_API_KEY": "abcd1234efgh", "PATH": "/usr/bin"}, "/home/alice/oto")
    text = (
        "key abcd1234efgh, sk-ant-api03-XYZxyz0123456789, /home/alice/oto/results, /home/alice/.cache, "
        + "/home/bob"
    )
    out = s.text(text)
    assert out == "key [REDACTED], [REDACTED], $WORKDIR/results, ~/.cache, ~"
    assert s.leaks(out) == [] and s.leaks(text)
    assert json.loads(s.text(json.dumps({"p": "/home/alice/x"}))) == {"p": "~/x"}
    assert io.BytesIO  # noqa: B018 - imported for the byte-level checks above


def test_a_night_config_layered_over_a_capped_workflow_config_bundles_what_ran(tmp_path):
    """A night's --configfile that leaves deck.max_sizes out runs capped by config/config.yaml (Snakemake
    layers the two): its bundle records that config, and its own merge check accepts it (it read the night
    file alone, uncapped, and rejected the tester's honest bundle)."""
    from fleet_helpers import FLEET_CONFIG, make_root, oto
    from workflow_helpers import make_workdir

    work = make_workdir(tmp_path, {**FLEET_CONFIG, "deck": {"max_sizes": 4}})
    (work / "night.yaml").write_text(yaml.safe_dump(FLEET_CONFIG))
    (work / ".tmp").mkdir()
    machine = make_root(tmp_path)
    args = ("--configfile", "night.yaml", "--root", str(machine), "--cores", "2", "--shard", "1/2")
    proc = oto(work, "tester", "run", *args, env={"TMPDIR": str(work / ".tmp")})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "this bundle would be accepted" in proc.stdout and "REJECT" not in proc.stderr
    bundle = sorted((work / "bundles").glob("*.oto.tar.gz"))[-1]
    config = yaml.safe_load(members(bundle)["config.yaml"])
    assert config["deck"]["max_sizes"] == 4 and config["seed"] == FLEET_CONFIG["seed"]
    final = yaml.safe_load((work / "results/gfx90c/Cijk_Ailk_Bljk_DB/final.yaml").read_text())
    assert len(final["sizes"]) == 4

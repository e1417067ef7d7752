"""A fake machine for the tester's preflight: a file-system root with KFD topology, amdgpu sysfs, /proc and
captured command outputs (tests/data/fleet), read through oto.fleet.device.read_facts(root, runner)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from workflow_helpers import FAST_CONFIG, make_workdir

DATA = Path(__file__).resolve().parent / "data" / "fleet"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_root(
    tmp: Path,
    *,
    kfd: bool = True,
    rocminfo: bool = True,
    dmidecode: str | None = "dmidecode_ddr4_4gb_32gb.txt",
    vram_bytes: int = 2 << 30,
    on_ac: bool = True,
    power_profile: str | None = "Balanced",
    display_manager: str | None = "inactive",
    machine_id: str = "0123456789abcdef0123456789abcdef",
    cus: int = 8,
    clock_mhz: int = 1900,
    cpu: str = "AMD Ryzen 7 5700U with Radeon Graphics",
    name: str = "machine",
) -> Path:
    """An Acer Aspire 5 with a Ryzen 7 5700U (gfx90c, 8 CUs at 1900 MHz), 4 + 32 GB DDR4-3200, a 2 GiB
    carve-out, run from a TTY on Pop!_OS, unless told otherwise."""
    root = tmp / name
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    if kfd:
        write(nodes / "0" / "properties", (DATA / "kfd_node_cpu.txt").read_text())
        node = (
            (DATA / "kfd_node_gfx90c_8cu.txt")
            .read_text()
            .replace("local_mem_size 536870912", f"local_mem_size {vram_bytes}")
            .replace("simd_count 32", f"simd_count {4 * cus}")
            .replace("max_engine_clk_fcompute 1900", f"max_engine_clk_fcompute {clock_mhz}")
        )
        write(nodes / "1" / "properties", node)
    dev = root / "sys/class/drm/card1/device"
    write(dev / "vendor", "0x1002\n")
    write(dev / "device", "0x1638\n")
    write(dev / "mem_info_vram_total", f"{vram_bytes}\n")
    write(dev / "mem_info_gtt_total", f"{16 << 30}\n")
    write(dev / "pp_dpm_sclk", (DATA / "pp_dpm_sclk_1900.txt").read_text().replace("1900", str(clock_mhz)))
    write(dev / "power_dpm_force_performance_level", "auto\n")
    write(root / "sys/class/drm/card1-eDP-1/status", "connected\n")
    write(root / "sys/class/power_supply/ACAD/type", "Mains\n")
    write(root / "sys/class/power_supply/ACAD/online", "1\n" if on_ac else "0\n")
    write(root / "sys/class/power_supply/BAT1/type", "Battery\n")
    write(root / "proc/cpuinfo", f"processor\t: 0\nmodel name\t: {cpu}\n")
    write(root / "proc/sys/kernel/osrelease", "6.9.3-76060903-generic\n")
    write(root / "opt/rocm/.info/version", "6.1.2-119\n")
    write(root / "etc/machine-id", machine_id + "\n")
    captured = root / "captured"
    if rocminfo:
        info = (DATA / "rocminfo_gfx90c_8cu.txt").read_text()
        info = info.replace("Compute Unit:            8 ", f"Compute Unit:            {cus} ")
        info = info.replace("(MHz):   1900", f"(MHz):   {clock_mhz}")
        info = info.replace("AMD Ryzen 7 5700U with Radeon Graphics", cpu)
        write(captured / "rocminfo.txt", info)
    if dmidecode:
        write(captured / "dmidecode_-t_17.txt", (DATA / dmidecode).read_text())
    if power_profile:
        write(captured / "system76-power_profile.txt", f"Power Profile: {power_profile}\n")
    if display_manager:
        write(captured / "systemctl_is-active_display-manager.txt", display_manager + "\n")
    return root


def runner(root: Path):
    from oto.fleet.tester import captured_runner

    return captured_runner(root)


# One library per shard of 2 (DB NN and NT), one generation: a night in about a minute of simulation.
FLEET_CONFIG = {**FAST_CONFIG, "max_generations": 1}
FAKE_KEY = "sk-ant-api03-FLEETTESTKEY-0123456789abcdefghijklmnopqrstuv"
FAKE_TOKEN = "tok-FLEET-SECRET-987654321"


def oto(work: Path, *args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """The ``oto`` command in ``work`` (the installed package: this checkout)."""
    return subprocess.run(
        [sys.executable, "-m", "oto.cli", *args],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
    )


def tester_run(base: Path, machine: Path, shard: str, config: dict | None = None, env: dict | None = None):
    """A tester's night in a fresh copy of the repository under ``base``: ``oto tester run``; returns the work
    folder, the finished process and the bundle it wrote."""
    base.mkdir(parents=True, exist_ok=True)
    work = make_workdir(base, config or FLEET_CONFIG)
    private_tmp = work / ".tmp"  # the GPU mutex lives in the temp folder: other test runs stay out
    private_tmp.mkdir()
    env = {"TMPDIR": str(private_tmp), **(env or {})}
    # the test config (config/config.yaml), not the night-long config/tester.yaml the checkout also has
    args = ("--configfile", "config/config.yaml", "--root", str(machine), "--cores", "2")
    proc = oto(work, "tester", "run", "--shard", shard, *args, env=env)
    bundles = sorted((work / "bundles").glob("*.oto.tar.gz"))
    return work, proc, bundles[-1] if bundles else None


class FleetRuns:
    """Three tester nights on two simulated laptops (the session fixture ``fleet_runs``):

    * ``a``: an 8-CU Ryzen 7 5700U with DDR4-3200, shard 1/2, with an API key (a local stand-in API answers)
      and a token in the environment, its folder inside the tester's home;
    * ``b1``: a 6-CU Ryzen 3 5300U with LPDDR4x, shard 1/2 (the same libraries as ``a``: replicated);
    * ``b2``: the same laptop the next night, shard 2/2, in the same folder.
    """

    def __init__(self, base: Path):
        from oto.tensile.params import canonical
        from test_agent import FakeAPI, message, tool_use

        self.base = base
        self.home = base / "home" / "tester"
        self.machine_a = make_root(base, name="aspire5")
        self.machine_b = make_root(
            base,
            name="thinkbook",
            cus=6,
            clock_mhz=1500,
            cpu="AMD Ryzen 3 5300U with Radeon Graphics",
            dmidecode="dmidecode_lpddr4.txt",
            machine_id="fedcba9876543210fedcba9876543210",
        )
        api = FakeAPI()
        proposals = [
            {
                "params": canonical(
                    {"ThreadTile": [2, 4], "WorkGroup": [16, 8, 1], "DepthU": 8, "VectorWidth": 2}
                ),
                "rationale": "smaller macro tile for the small FP64 sizes of this deck",
            },
            {
                "params": canonical(
                    {"ThreadTile": [4, 2], "WorkGroup": [8, 16, 1], "DepthU": 16, "VectorWidth": 1}
                ),
                "rationale": "deeper unroll with scalar loads",
            },
        ]
        api.default = (200, message([tool_use({"proposals": proposals})]), {}, 0.0)
        api.thread.start()
        try:
            agent = {"base_url": api.url, "backoff_s": 0, "max_retries": 1, "timeout_s": 5}
            env = {"ANTHROPIC_API_KEY": FAKE_KEY, "OTO_TEST_TOKEN": FAKE_TOKEN, "HOME": str(self.home)}
            self.work_a, self.proc_a, self.bundle_a = tester_run(
                self.home, self.machine_a, "1/2", {**FLEET_CONFIG, "agent": agent}, env=env
            )
            self.agent_requests = len(api.requests)
        finally:
            api.server.shutdown()
            api.server.server_close()
        self.work_b, self.proc_b1, self.bundle_b1 = tester_run(base / "b", self.machine_b, "1/2")
        self.tmp_env = {"TMPDIR": str(self.work_b / ".tmp")}
        self.proc_b2 = oto(
            self.work_b, "tester", "run", "--shard", "2/2", "--root", str(self.machine_b), env=self.tmp_env
        )
        self.bundle_b2 = sorted((self.work_b / "bundles").glob("*.oto.tar.gz"))[-1]

    @property
    def bundles(self) -> list[Path]:
        return [self.bundle_a, self.bundle_b1, self.bundle_b2]


LIBRARY = "Cijk_Ailk_Bljk_DB"


def synthetic_bundle(
    tmp: Path,
    *,
    name: str = "bundle",
    machine: Path | None = None,
    library: str = LIBRARY,
    shard: str = "1/1",
    score: float = 1.2,
    gflops: float = 1.0,
    numbers: str = "simulated",
    winner_solution: int = 0,
    created: float = 1.7e9,
) -> Path:
    """A small, valid bundle written by oto.fleet.bundle.write_bundle from result files made up here (no
    workflow run): one library, its shipped solution ``winner_solution`` winning every deck size with
    ``score`` and ``gflops``, registry records of two sizes (one benchmarked, one failed)."""
    import json

    from oto.deck.sources import SHIPPED_MANIFEST, read_manifest
    from oto.files import write_yaml
    from oto.fleet.bundle import BundleSpec, Scrubber, write_bundle
    from oto.fleet.device import device_profile, read_facts
    from oto.gemm import Library
    from oto.hardware.ceilings import ceilings_document
    from oto.hardware.profile import load_profile
    from oto.registry.job_files import write_job_file
    from oto.registry.records import config_hash, protocol_of, run_id, size_key
    from oto.tensile.params import candidate_id, canonical
    from workflow_helpers import REPO

    arch_file = REPO / "arch_profiles" / "gfx90c.yaml"
    arch = load_profile(arch_file)
    machine = machine or make_root(tmp, name=f"{name}-machine")
    profile = device_profile(arch, read_facts(machine, runner(machine)), "arch_profiles/gfx90c.yaml")
    deck = read_manifest(SHIPPED_MANIFEST).libraries[library]
    params = canonical(deck.solutions[winner_solution]["params"])
    kid = candidate_id(params)
    lib = Library.parse(library)
    results = tmp / name / "results" / "gfx90c"
    config = {"arch": "gfx90c", "families": [lib.family.code], "backend": "sim", "seed": 1, "shard": shard}
    rows = [
        {
            "size_index": i,
            "winner": kid,
            "score": score,
            "ci_low": score * 0.97,
            "ci_high": score * 1.03,
            "gflops": gflops,
            "generation": 0,
            "verdict": "win" if score > 1.02 else "tie",
        }
        for i in range(len(deck.sizes))
    ]
    final = {
        "library": library,
        "family": lib.family.code,
        "pattern": lib.pattern,
        "provenance": {"backend": "sim", "numbers": numbers, "model_version": 1},
        "generations": 1,
        "converged": False,
        "convergence": {"converged": False, "reason": "x"},
        "sizes": deck.sizes,
        "per_size": rows,
        "kernels": {kid: params},
        "summary": {"geomean_score": score, "wins": len(rows), "ties": 0, "losses": 0, "failures": {}},
    }
    write_yaml(results / library / "final.yaml", final)
    base = {
        "library": library,
        "family": lib.family.code,
        "pattern": lib.pattern,
        "arch": "gfx90c",
        "generation": 0,
        "proposer": "seed",
        "protocol": protocol_of({"backend": "sim", "numbers": numbers}, config),
        "config_hash": config_hash(config),
        "backend": "sim",
        "numbers": numbers,
        "tool_versions": json.dumps({"oto": "0.1.0"}),
        "run_id": run_id(config),
        "recorded_at": created,
        "params": json.dumps(params, sort_keys=True),
        "kernel_id": kid,
        "reason": "",
    }
    records = [
        {**base, "kind": "proposed", "status": "new", "size": ""},
        {**base, "kind": "built", "status": "ok", "size": ""},
        {
            **base,
            "kind": "benchmarked",
            "status": "ok",
            "size": size_key(deck.sizes[0]),
            "score": score,
            "ci_low": score * 0.97,
            "ci_high": score * 1.03,
            "time_us": 120.5,
            "gflops": gflops,
        },
        {**base, "kind": "failed", "status": "timeout", "size": size_key(deck.sizes[1]), "reason": "killed"},
    ]
    write_job_file(results / library / "gen0" / "registry.jsonl", records)
    write_yaml(results / "ceilings.yaml", ceilings_document(profile))
    spec = BundleSpec(
        arch="gfx90c",
        shard=shard,
        libraries=[library],
        config=config,
        profile=profile,
        arch_profile=arch,
        arch_profile_file=arch_file,
        results=results,
    )
    out, _ = write_bundle(spec, tmp / name / "out", Scrubber({}, tmp / name), created=created)
    return out


def rebuild(path: Path, change, out: Path | None = None, manifest: bool = True) -> Path:
    """The bundle at ``path`` with its members changed by ``change(members: dict[str, bytes])``, the manifest
    recomputed (or left as it was: ``manifest=False``), written to ``out``."""
    import tarfile

    from oto.fleet.bundle import MANIFEST, Member, archive_bytes, manifest_text

    with tarfile.open(path, "r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    change(members)
    if manifest:
        members[MANIFEST] = manifest_text(Member(n, d) for n, d in members.items() if n != MANIFEST).encode()
    out = out or path.with_name("changed-" + path.name)
    out.write_bytes(archive_bytes([Member(n, d) for n, d in members.items()], 1.7e9))
    return out

"""A fake machine for the tester's preflight: a file-system root with KFD topology, amdgpu sysfs, /proc and
captured command outputs (tests/data/fleet), read through oto.fleet.device.read_facts(root, runner)."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
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


def make_780m_root(tmp: Path, name: str = "780m") -> Path:
    """A Framework 13 with a Ryzen 7 7840U (gfx1103, the Radeon 780M: 12 CUs of 2 SIMD32 at 2700 MHz), LPDDR5
    at 6400 MT/s and a 512 MiB carve-out, as KFD, rocminfo and dmidecode describe it."""
    root = make_root(tmp, name=name, cus=12, clock_mhz=2700, vram_bytes=512 << 20, dmidecode=None,
                     cpu="AMD Ryzen 7 7840U w/ Radeon 780M Graphics")  # fmt: skip
    edits = {
        "sys/class/kfd/kfd/topology/nodes/1/properties": [
            ("simd_count 48", "simd_count 24"),
            ("simd_per_cu 4", "simd_per_cu 2"),
            ("gfx_target_version 90012", "gfx_target_version 110003"),
            ("device_id 5688", "device_id 5567"),
            ("wave_front_size 64", "wave_front_size 32"),
        ],
        "captured/rocminfo.txt": [
            ("gfx90c", "gfx1103"),
            ("5688(0x1638)", "5567(0x15bf)"),
            ("AMD Radeon Graphics", "AMD Radeon 780M"),
            ("64(0x40)", "32(0x20)"),
        ],
        "sys/class/drm/card1/device/device": [("0x1638", "0x15bf")],
    }
    for rel, pairs in edits.items():
        text = (root / rel).read_text()
        for old, new in pairs:
            assert old in text, (rel, old)
            text = text.replace(old, new)
        write(root / rel, text)
    lpddr5 = (DATA / "dmidecode_lpddr4.txt").read_text().replace("LPDDR4", "LPDDR5").replace("4266", "6400")
    write(root / "captured/dmidecode_-t_17.txt", lpddr5)
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
# the backend a final's provenance names for its kind of numbers
BACKEND_OF = {"simulated": "sim", "replayed": "replay", "measured": "tensile"}
# Tuned variants of a shipped DB solution (legal, resolved as Tensile would build them): the synthetic
# bundles' winner and rivals.
VARIANTS = {"winner": {"DepthU": 16}, "slow": {"WorkGroupMapping": 1}, "other": {"StaggerU": 0}}


def variant(library: str, name: str, solution: int = 0) -> tuple[str, dict]:
    """(kernel id, parameters) of a tuned variant of the library's shipped solution ``solution``."""
    from oto.deck.sources import SHIPPED_MANIFEST, read_manifest
    from oto.gemm import Library
    from oto.hardware.profile import load_profile
    from oto.tensile import legality
    from oto.tensile.params import candidate_id, canonical
    from workflow_helpers import REPO

    deck = read_manifest(SHIPPED_MANIFEST).libraries[library]
    limits = legality.Limits.from_profile(load_profile(REPO / "arch_profiles" / "gfx90c.yaml"))
    params = legality.resolve(
        Library.parse(library), canonical({**deck.solutions[solution]["params"], **VARIANTS[name]}), limits
    )
    return candidate_id(params), dict(params)


def race_samples(
    sizes: list,
    references: dict,
    kernels: dict,
    numbers: str,
    reps: int = 5,
    spread: float = 0.0,
    family="DB",
    failed_references=(),
    hung_references=(),
):
    """A samples table (samples.csv layout) of a race at ``sizes``: per size its reference and each kernel of
    ``kernels`` ({id: (score, gflops) or a per-size list of them, None: timed out}), ``reps`` launches each,
    interleaved. Times follow from the GFLOPS (the reference's from the kernel's score); ``spread`` varies
    them by a fixed pattern (no randomness). At the sizes ``failed_references`` names every launch of the
    reference fails validation; at those ``hung_references`` names its first launch hangs (times out)."""
    import pandas as pd
    from oto.gemm import Family, gemm_flops
    from oto.measurement.scoring import MEASUREMENT_COLUMNS, SAMPLE_COLUMNS

    pattern = [0.0, 1.0, -1.0, 0.5, -0.5, 0.25, -0.25, 0.75, -0.75]
    rows, seq = [], 0
    for i, size in enumerate(sizes):
        flops = gemm_flops(Family.parse(family), *map(int, size[:4]))
        ref_time = None
        for spec in kernels.values():
            spec = spec[i] if isinstance(spec, list) else spec
            if spec is not None and ref_time is None:
                ref_time = flops / (spec[1] * 1e3) * spec[0]
        ref_time = ref_time or flops / 1e3
        for rep in range(reps):
            order = [(references[i], "reference", (1.0, None))]
            order += [(k, "candidate", v[i] if isinstance(v, list) else v) for k, v in kernels.items()]
            for j, (kid, role, spec) in enumerate(order):
                wobble = 1 + spread * pattern[(rep + 3 * j) % len(pattern)]
                if spec is None:
                    t, status, reason = float("nan"), "timeout", "no completion within 5000000 us"
                elif role == "reference" and i in failed_references:
                    t, status, reason = float("nan"), "validation_failed", "max error 3e2"
                elif role == "reference" and i in hung_references and rep == 0:
                    t, status, reason = float("nan"), "timeout", "no completion within 5000000 us"
                else:
                    t, status, reason = ref_time / spec[0] * wobble, "ok", ""
                m, n, b, k = map(int, size[:4])
                rows.append((seq, kid, role, i, m, n, b, k, rep, t, status, reason, numbers,
                             float("nan"), float("nan"), float("nan"), "", -1, "plan", "none"))  # fmt: skip
                seq += 1
    return pd.DataFrame(rows, columns=[*SAMPLE_COLUMNS, *MEASUREMENT_COLUMNS])


def synthetic_bundle(
    tmp: Path,
    *,
    name: str = "bundle",
    machine: Path | None = None,
    library: str = LIBRARY,
    shard: str = "1/1",
    score: float | list = 1.2,
    gflops: float = 1.0,
    numbers: str = "simulated",
    created: float = 1.7e9,
    rivals: dict[str, float | list] | None = None,
    spread: float = 0.0,
    rationale: str = "smaller macro tile for the small FP64 sizes of this deck",
    winner: str = "winner",
    quarantine: bool = False,
    failed_references: tuple[int, ...] = (),
    hung_references: tuple[int, ...] = (),
) -> Path:
    """A small, valid bundle written by oto.fleet.bundle.write_bundle from result files made up here (no
    workflow run), as a tester's oto would have made them from its samples: one library; a finalize race at
    every deck size between each size's reference and a tuned kernel (``variant(library, winner)``) measured
    at ``score`` x the reference and ``gflops``, plus ``rivals`` ({variant name: score, or a list per size});
    its final.yaml scored from those samples as the finalize stage scores them (a kernel slower than the
    reference loses to it); one tuning generation at two sizes (measured at the first, timed out at the
    second) with its registry records; with ``quarantine`` also the tuned kernel quarantined as gpu_reset by
    the GPU-reset journal. At the deck sizes ``failed_references`` names, every launch of the reference
    fails validation, and final.yaml ships the fastest kernel that passed there, as finalize does; at those
    ``hung_references`` names its first launch hangs, which disqualifies it there (its other launches still
    time it)."""
    from collections import Counter

    from oto.config import validate_config
    from oto.deck.sources import SHIPPED_MANIFEST, read_manifest
    from oto.files import atomic_write_text, write_yaml
    from oto.fleet.bundle import BundleSpec, Scrubber, write_bundle
    from oto.fleet.device import device_profile, read_facts
    from oto.gemm import Library
    from oto.hardware.ceilings import ceilings_document
    from oto.hardware.profile import load_profile
    from oto.measurement.scoring import score_library
    from oto.measurement.selection import floor_failed_winners, per_size_rows, race_status, summarise
    from oto.registry.job_files import write_job_file
    from oto.registry.records import generation_records
    from oto.tensile import legality
    from workflow_helpers import REPO

    arch_file = REPO / "arch_profiles" / "gfx90c.yaml"
    arch = load_profile(arch_file)
    machine = machine or make_root(tmp, name=f"{name}-machine")
    profile = device_profile(arch, read_facts(machine, runner(machine)), "arch_profiles/gfx90c.yaml")
    deck = read_manifest(SHIPPED_MANIFEST).libraries[library]
    refs = deck.references(list(range(len(deck.sizes))), legality.Limits.from_profile(arch))
    references = {i: r["id"] for i, r in refs.items()}
    kid, params = variant(library, winner)
    n = len(deck.sizes)
    scores = score if isinstance(score, list) else [score] * n
    kernels = {kid: [(s, gflops) for s in scores]}
    params_of = {kid: params, **{r["id"]: r["params"] for r in refs.values()}}
    for rival, rs in (rivals or {}).items():
        rid, rparams = variant(library, rival)
        params_of[rid] = rparams
        rs = rs if isinstance(rs, list) else [rs] * n
        kernels[rid] = [(x, gflops * x / s) for x, s in zip(rs, scores, strict=True)]
    lib = Library.parse(library)
    config = {"arch": "gfx90c", "families": [lib.family.code], "backend": "sim", "seed": 1, "shard": shard}
    scoring = validate_config({"arch": "gfx90c", "families": "all"})
    results = tmp / name / "results" / "gfx90c"
    final_df = race_samples(
        deck.sizes, references, kernels, numbers, spread=spread, family=lib.family.code,
        failed_references=failed_references, hung_references=hung_references,
    )  # fmt: skip
    atomic_write_text(results / library / "final_samples.csv", final_df.to_csv(index=False))
    final_scores = score_library(final_df, lib, deck.sizes, profile, scoring).to_dict("records")
    rows = per_size_rows(final_scores, deck.sizes, lib, profile, 0.02, 0)
    status = race_status(final_scores)
    for r in rows:
        r.update(shipped=references[r["size_index"]])
        r["shipped_status"] = status.get((r["size_index"], r["shipped"]))
    rows = floor_failed_winners(rows, final_scores)
    final = {
        "library": library,
        "family": lib.family.code,
        "pattern": lib.pattern,
        "provenance": {"backend": BACKEND_OF[numbers], "numbers": numbers, "model_version": 1},
        "generations": 1,
        "converged": False,
        "convergence": {"converged": False, "reason": "x"},
        "sizes": deck.sizes,
        "per_size": rows,
        "kernels": {r["winner"]: params_of[r["winner"]] for r in rows if r["winner"]},
        "summary": summarise(rows, Counter()),
    }
    write_yaml(results / library / "final.yaml", final)
    tuning = [deck.sizes[0], deck.sizes[1]]
    gen_df = race_samples(
        tuning, references, {kid: [(scores[0], gflops), None]}, numbers, family=lib.family.code
    )
    atomic_write_text(results / library / "gen0" / "samples.csv", gen_df.to_csv(index=False))
    gen_scores = score_library(gen_df, lib, tuning, profile, scoring).to_dict("records")
    cands = {
        "library": library,
        "generation": 0,
        "sizes": tuning,
        "kernels": [
            {"id": kid, "params": params, "roles": ["candidate"], "proposer": "seed", "rationale": rationale}
        ],
        "rejected": [],
    }
    build = {"provenance": final["provenance"], "kernels": [{"id": kid, "status": "ok"}]}
    records = generation_records(cands, build, gen_scores, config, "gfx90c", now=created)
    write_job_file(results / library / "gen0" / "registry.jsonl", records)
    if quarantine:
        from oto.registry.gpu_journal import GPU_RESET, Quarantine
        from oto.registry.records import size_key

        proposed = next(r for r in records if r.get("kernel_id") == kid)
        Quarantine(results / "registry" / "quarantine.jsonl").add(
            {**proposed, "kind": "failed", "status": GPU_RESET, "size": size_key(deck.sizes[1]),
             "generation": -1, "reason": "the GPU call running it alone died with its process", "run_id": ""}
        )  # fmt: skip
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


class Zeros(io.RawIOBase):
    """``n`` zero bytes, read as a stream (never held)."""

    def __init__(self, n: int):
        self.left = n

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


def with_zero_logs(good: Path, out: Path, count: int, size: int) -> Path:
    """``good`` plus ``count`` logs of ``size`` zero bytes, listed in the manifest, written as a stream."""
    from oto.fleet.bundle import MANIFEST

    with tarfile.open(good, "r:gz") as src:
        members = {m.name: src.extractfile(m).read() for m in src.getmembers()}
    zero_sha = hashlib.sha256()
    left = size
    while left:
        zero_sha.update(bytes(min(left, 1 << 20)))
        left -= min(left, 1 << 20)
    logs = {f"logs/zero{i}.log": zero_sha.hexdigest() for i in range(count)}
    manifest = members[MANIFEST].decode() + "".join(f"{h}  {n}\n" for n, h in logs.items())
    members[MANIFEST] = "".join(
        sorted(manifest.splitlines(keepends=True), key=lambda x: x.split("  ")[1])
    ).encode()
    with tarfile.open(out, "w:gz", compresslevel=9) as tar:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name in logs:
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, Zeros(size))
    return out

"""The tensile backend: builds and times candidates with the real ``Tensile`` benchmark program.

Same interface as ``sim`` (:mod:`oto.backends.base`); every number it returns is ``measured``.

- **Batches.** Kernels are split into batches of ``tensile.batch_size``; each batch is one Tensile
  invocation per step (build, measure) in the batch's folder ``<workdir>/tensile/batch-<hash>/``
  (``config-<step>.yaml``, ``out/``, ``tensile-<step>.log``), so every run's log is kept. The candidates go
  in as one ``ForkParameters: Groups`` dimension (exact bundles, no cartesian fork).
- **build** runs Tensile with a stand-in client (``tensile_runtime.py null-client``): kernel generation,
  gfx assembly and the benchmark library, nothing timed. Outcome per kernel: ``ok`` (in the solutions YAML),
  ``rejected`` (Tensile's ``reject:`` reasons), ``register_overflow`` (the kernel writer's
  ``overflowedResources``: a named warning, or ``Generating kernel source resulted in error N``),
  ``compile_error`` (Tensile exited non-zero or timed out; the batch is bisected so one bad kernel does not
  take the others with it).
- **measure** runs the prebuilt client (``tensile.prebuilt_client``) directly, one **sweep** per call
  (:mod:`oto.backends.sweeps`, :mod:`oto.tensile.client`): the plan's repetition r becomes a call whose
  problems are the sizes r names and whose solutions are every kernel r names, the size's reference (the spoof
  floor) included, so each candidate is timed seconds from its reference in the same pass over the problem.
  oto writes the call's ``ClientParameters.ini`` (problem blocks in a permuted order) and a copy of the build
  batches' benchmark libraries (solutions renumbered in a permuted order, code objects of every batch
  listed); nothing is rebuilt. The sizes' problem blocks come from Tensile (one run of the batch's build
  config with the real sizes and the build-only client). Samples carry the order the client really ran them
  in (runs × problems × solutions), the call as their ``sweep`` and the call's telemetry. Repetitions beyond
  ``tensile.max_benchmarks`` sweeps per call take more calls, each freshly permuted: a measured cell is never
  reused. -1 GFlops → ``validation_failed``; a call that dies keeps its finished rows and re-runs the rest
  with the solutions split in halves, so a kernel that crashes (``crash``) or hangs (``timeout``) alone loses
  only its own cells; a results file with fewer rows or columns than planned keeps what it has and the missing
  cells are failures naming the file. Calls are kept in ``<workdir>/tensile/client/call-NNNN/``.
- **Telemetry** (:mod:`oto.hardware.telemetry`, ``tensile.telemetry``): a sampler reads the driver's
  gpu_metrics (else pp_dpm_sclk, else rocm-smi) at a fixed rate during each call; each call's median clock,
  temperature and power go with its samples (``clock_telemetry: per_sweep``), or a note says why none.
- **Start-up.** Tensile probes the assembler (~50 s) at every start unless ``--asm-cache`` names a cache:
  the first run on the machine writes it (under a lock) next to the results, every later run reads it.
  oto's own probe of Tensile's version (every job's provenance) is kept beside it, ``probe.json``, and
  asked again only when Tensile, its Python or oto's runtime script changes (2.8 s -> 0.1 s per job).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import math
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from oto.backends.base import BuildResult, Capabilities, Costs, Kernel, MeasurePlan, Problem, Sample, Size
from oto.backends.sweeps import plan_sweeps, roles_of
from oto.hardware.detect import detect_gpu
from oto.hardware.telemetry import Sampler, TelemetrySettings, find_source, summarise
from oto.registry.gpu_journal import GPU_RESET, GpuJournal, InFlight, Quarantine
from oto.tensile.benchmark_config import APU_GLOBAL_PARAMETERS, benchmark_config
from oto.tensile.client import (
    ClientFilesError,
    ClientIni,
    ProblemBlock,
    client_files,
    compose_ini,
    compose_library,
    load_library,
    read_call,
    run_call,
    write_library,
)
from oto.tensile.install import (
    REGISTRATION_FIELDS,
    RUNTIME_SCRIPT,
    Settings,
    TensileUnavailable,
    cached_probe,
    probe_cache_path,
)
from oto.tensile.outputs import (
    generation_errors,
    match_solutions,
    name_matches,
    parse_log,
    read_solutions,
    resource_reason,
    solution_matches,
    writer_failures,
)

log = logging.getLogger(__name__)


@dataclass
class Run:
    folder: Path
    rc: int | None  # None: killed at the timeout
    seconds: float
    log: Path
    timed_out: bool = False

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 6) -> str:
        keep = [ln.strip() for ln in self.log_text().splitlines() if ln.strip()]
        return " | ".join(keep[-lines:])


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


class TensileBackend:
    name = "tensile"
    numbers = "measured"
    rocblas_client = "binary"  # rocBLAS's rocblas-bench on the GPU Tensile's client runs on (verify, compare)
    # the real GPU is what it is: its name and donor reach Tensile, the nominal clock scales telemetry
    PROFILE_FIELDS = (*REGISTRATION_FIELDS, "clock_mhz")

    def __init__(self, profile: Mapping[str, Any], tensile_config: Mapping[str, Any] | None, stream: str):
        self.profile = profile
        self.settings = Settings.from_config(tensile_config, profile)
        self.telemetry = TelemetrySettings.from_config(tensile_config)
        self.stream = stream
        self.launch_timeout_us = self.settings.timeout_s * 1e6  # one invocation runs many launches
        self._probe: dict[str, Any] | None = None
        self._source: tuple[Any, str] | None = None
        self._journal: GpuJournal | None = None

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], profile: Mapping[str, Any], stream: str
    ) -> TensileBackend:
        return cls(profile, config["tensile"], stream=stream)

    @classmethod
    def costs(cls, config: Mapping[str, Any]) -> Costs:
        # Start-up and build: bench/RESULTS.md "Tensile start-up overhead" (warm start-up 3.9-5.9 s per
        # invocation; 39.1 s of work for a batch of 32 kernels). Per launch: the client's cool-down
        # (SleepPercent) and warm-ups; ~20 us of enqueue and event timing per launch is an assumption (no GPU
        # was available to measure it).
        g = APU_GLOBAL_PARAMETERS
        return Costs(
            startup_s=5.0,
            build_s_per_kernel=1.2,
            launch_overhead_us=20.0,
            warmups_per_pair=int(g["NumWarmups"]),
            cooldown_share=float(g["SleepPercent"]) / 100,
            gpu_time_scale=1.0,
            source="bench/RESULTS.md (Tensile start-up and build, measured); client cool-down and warm-ups",
        )

    @property
    def nominal_mhz(self) -> float:
        """The profile's clock, which telemetry is checked against (read when measuring: mutate and emit ask
        only for the provenance, and their profile views do not carry it)."""
        return float(self.profile["clock_mhz"])

    # -- facts
    def probe(self) -> dict[str, Any]:
        """Tensile's version and whether it knows the target ISA natively (cached per backend, and per
        project while the install is unchanged); {} when the probe failed."""
        if self._probe is None:
            cache = probe_cache_path(self.settings)
            self._probe = cached_probe(self.settings.command, self.settings.register, cache) or {}
        return self._probe

    def telemetry_source(self) -> tuple[Any, str]:
        """(source or None, what it is or why there is none), found once per backend."""
        if self._source is None:
            self._source = find_source(self.telemetry)
        return self._source

    @property
    def telemetry_why(self) -> str:
        return self.telemetry_source()[1]

    def sampler(self) -> Sampler:
        source, what = self.telemetry_source()
        return Sampler(source, self.telemetry.rate_hz, what if source else "")

    @property
    def capabilities(self) -> Capabilities:
        """The client's own order, reported; one clock per sweep where a telemetry source reads."""
        telemetry = "per_sweep" if self.telemetry_source()[0] is not None else "none"
        return Capabilities("reported", telemetry, self.sweeps_per_call)

    def quarantined(self, library: str) -> dict[str, str]:
        """From this machine's quarantine, those of this device (the journal's)."""
        return {kid: why for (lib, kid), why in self.journal().quarantined().items() if lib == library}

    def provenance(self) -> dict[str, Any]:
        """Tensile's version and the device. A failed probe determines nothing: both facts it would have given
        are 'unknown', never a definite-looking default."""
        p = self.probe()
        native = p.get("native", {}).get(self.settings.isa) if p else None
        gpu = detect_gpu()
        return {
            "backend": self.name,
            "numbers": self.numbers,
            "arch": self.profile["arch"],
            "isa": self.settings.isa,
            "device": gpu["physical"] or "unknown",
            "device_seen_as": gpu["effective"] or "unknown",
            "tensile_version": p.get("version", "unknown") if p else "unknown",
            "isa_registered_at_run_time": "unknown" if native is None else not native,
            "probe": "ok"
            if p
            else f"failed: `{shlex.join([*self.settings.command, 'probe'])}` gave no answer",
            "prebuilt_client": self.settings.prebuilt_client,
            "stream": self.stream,
            "capabilities": self.capabilities.as_dict(),
            "telemetry": self.telemetry_why,
        }

    # -- the GPU-reset journal (oto.registry.gpu_journal)
    def journal(self) -> GpuJournal:
        """This machine's journal of client calls in flight and its quarantine, keyed by the GPU the calls
        run on (its physical arch as the driver reports it, else the profile's)."""
        if self._journal is None:
            device = detect_gpu()["physical"] or str(self.profile["arch"])
            self._journal = GpuJournal(
                self.settings.journal, device, Quarantine(self.settings.quarantine), str(self.profile["arch"])
            )
        return self._journal

    def _probe_alone(self, entry: InFlight, kernel: Mapping[str, Any]) -> None:
        """Run one kernel of a dead client call alone, from that call's own files (its library holds the
        kernel's solution; its ini the problems): one sweep, the result discarded."""
        folder = Path(entry.context["folder"])
        lib_path = Path(entry.context["library_file"])
        doc = load_library(lib_path)
        library, _ = compose_library([(doc, int(kernel["solution"]), lib_path)])
        probe = folder / f"probe-{kernel['id']}"
        probe.mkdir(parents=True, exist_ok=True)
        write_library(library, probe / lib_path.name)
        base = ClientIni.read(folder / "ClientParameters.ini")
        results = probe / "results.csv"
        (probe / "ClientParameters.ini").write_text(
            compose_ini(base, probe / lib_path.name, base.values("code-object"), results, base.problems(), 1)
        )
        ini = probe / "ClientParameters.ini"
        run = run_call(self.settings.prebuilt_client, ini, results, self.settings.timeout_s)
        if run.rc != 0:
            raise RuntimeError(f"client rc {run.rc}{' (timed out)' if run.timed_out else ''}; log {run.log}")

    # -- one Tensile invocation
    def _invoke(self, folder: Path, config: Mapping[str, Any], client: str, step: str) -> Run:
        folder.mkdir(parents=True, exist_ok=True)
        cfg_path = folder / f"config-{step}.yaml"
        cfg_path.write_text(yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=120))
        cache = self.settings.asm_cache.resolve()
        cmd = [
            *self.settings.command,
            "tensile",
            *self.settings.register,
            "--arch",
            self.settings.isa,
            *self.settings.compiler_args,
            "--asm-cache",
            str(cache),
            "--prebuilt-client",
            client,
            str(cfg_path.resolve()),
            str((folder / "out").resolve()),
        ]
        log_path = folder / f"tensile-{step}.log"
        # The first run on the machine writes the assembler cache; others wait for it instead of probing.
        guard = _locked(cache) if not cache.exists() else contextlib.nullcontext()
        with guard, open(log_path, "w") as fh:
            fh.write("$ " + shlex.join(cmd) + "\n")
            fh.flush()
            t0 = time.monotonic()
            proc = subprocess.Popen(
                cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True
            )
            try:
                rc: int | None = proc.wait(timeout=self.settings.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # Tensile and its client, not just the wrapper
                proc.wait()
                rc, timed_out = None, True
            seconds = time.monotonic() - t0
            fh.write(f"\n# oto: rc={rc} timed_out={timed_out} seconds={seconds:.1f}\n")
        return Run(folder, rc, seconds, log_path, timed_out)

    def _null_client(self, root: Path) -> str:
        script = root / "null-client.sh"
        if not script.exists():
            root.mkdir(parents=True, exist_ok=True)
            script.write_text(
                "#!/bin/sh\n# build-only runs: write an empty results file, time nothing\n"
                f'exec {shlex.quote(sys.executable)} {shlex.quote(str(RUNTIME_SCRIPT))} null-client "$@"\n'
            )
            script.chmod(0o755)
        return str(script.resolve())

    def _folder(self, root: Path, kernels: Sequence[Kernel]) -> Path:
        """One folder per batch, shared by build and measure: Tensile's solution cache lives in its out/."""
        digest = hashlib.sha256(",".join(sorted(k.id for k in kernels)).encode()).hexdigest()[:10]
        return root / f"batch-{digest}"

    def _config(self, problem: Problem, kernels: Sequence[Kernel], sizes, benchmarks: int) -> dict:
        return benchmark_config(
            problem.problem_type, [k.params for k in kernels], sizes, self.settings.isa, benchmarks
        )

    @staticmethod
    def _outputs(run: Run) -> tuple[Path | None, Path | None]:
        data = sorted((run.folder / "out" / "1_BenchmarkProblems").glob("*_00/Data"))
        if not data:
            return None, None
        return data[0] / "00_Final.yaml", data[0] / "00_Final.csv"

    # -- build
    def build(self, problem: Problem, kernels: Sequence[Kernel], workdir: Path) -> list[BuildResult]:
        root = Path(workdir) / "tensile"
        results: dict[str, BuildResult] = {}
        batches = [
            list(kernels[i : i + self.settings.batch_size])
            for i in range(0, len(kernels), self.settings.batch_size)
        ]
        manifest = []
        for batch in batches:
            folder = self._build_batch(problem, batch, root, results)
            manifest.append({"folder": folder.name, "kernels": [k.id for k in batch]})
        root.mkdir(parents=True, exist_ok=True)
        (root / "batches.yaml").write_text(yaml.safe_dump({"batches": manifest}, sort_keys=False))
        return [results[k.id] for k in kernels]

    def _build_batch(
        self, problem: Problem, batch: list[Kernel], root: Path, results: dict[str, BuildResult]
    ) -> Path:
        folder = self._folder(root, batch)
        size = [[64, 64, 1, 64]]  # sizes are not part of Tensile's solution cache; measure sets the real ones
        run = self._invoke(folder, self._config(problem, batch, size, 1), self._null_client(root), "build")
        yaml_path, _ = self._outputs(run)
        text = run.log_text()
        rejections, overflows = parse_log(text)
        codes = generation_errors(text)
        failures = writer_failures(text)
        if yaml_path is not None and yaml_path.exists() and run.rc == 0:
            sols = read_solutions(yaml_path)
            column = match_solutions(sols, {k.id: k.params for k in batch})
            built = {k.id: (k.params, sols[column[k.id]]) for k in batch if k.id in column}
            for k in batch:
                if k.id in column:
                    bpe = _bytes_per_element(problem)
                    hit = sols[column[k.id]]
                    res = {"lds_bytes": int(hit.get("LdsNumElements", 0)) * bpe} if bpe else {}
                    results[k.id] = BuildResult(k.id, "ok", "", res)
                else:
                    results[k.id] = _dropped(k, rejections, overflows, codes, failures, built, run.log)
            return folder
        # Nothing left to benchmark: every kernel was rejected, or the kernel writer failed on the rest
        # (Tensile then stops with "No valid solutions found" before the client step).
        if "0 valid solutions" in text or ((codes or failures) and "No valid solutions found" in text):
            for k in batch:
                results[k.id] = _dropped(k, rejections, overflows, codes, failures, {}, run.log)
            return folder
        if len(batch) > 1:  # isolate the kernel that broke the run; the others still build
            half = len(batch) // 2
            self._build_batch(problem, batch[:half], root, results)
            self._build_batch(problem, batch[half:], root, results)
            return folder
        k = batch[0]
        why = (
            f"Tensile timed out after {self.settings.timeout_s:.0f} s"
            if run.timed_out
            else f"Tensile exited with rc {run.rc}"
        )
        results[k.id] = BuildResult(k.id, "compile_error", f"{why}; log {run.log}: {run.tail(3)}")
        return folder

    # -- measure (one client call per sweep: oto.backends.sweeps, oto.tensile.client)
    def measure(self, problem: Problem, plan: MeasurePlan, workdir: Path) -> list[Sample]:
        launches = list(plan.launches)
        if not launches:
            return []
        if not self.settings.prebuilt_client:
            raise TensileUnavailable(
                "config field 'tensile.prebuilt_client' is not set: the tensile backend times kernels with a "
                "prebuilt tensile_client (see docs/tensile.md)"
            )
        if not Path(self.settings.prebuilt_client).exists():
            raise TensileUnavailable(
                f"config field 'tensile.prebuilt_client': {self.settings.prebuilt_client} does not exist"
            )
        root = Path(workdir) / "tensile"
        wanted = sorted({la.kernel_id for la in launches})
        for kid in wanted:
            if kid not in plan.kernels:
                raise ValueError(f"launch names kernel {kid!r} that the plan does not list")
        # A call left in flight by a process that died (a GPU reset took the job down) is settled first:
        # its kernels run alone, and the one that takes the GPU down is quarantined on this device.
        journal = self.journal()
        for note in journal.recover({"tensile_client": self._probe_alone}):
            log.warning("GPU-reset journal: %s", note)
        banned = self.quarantined(problem.library.name)
        sizes = [tuple(s.as_list() if isinstance(s, Size) else list(s)) for s in plan.sizes]
        located, missing = self._client_solutions(root, plan, [k for k in wanted if k not in banned])
        blocks, why_blocks = self._problem_blocks(problem, root, located, sizes)
        roles = roles_of(launches)
        out = _MeasureRun(self, root, sizes, roles, problem.library.name)
        for group in _call_groups(plan_sweeps(launches, f"{self.stream}:{len(sizes)}"), self.sweeps_per_call):
            first = group[0]
            reps = [sw.rep for sw in group]
            for p in first.problems:
                for k in first.solutions:
                    if k in banned:
                        out.fail_cells([(k, p, r) for r in reps], GPU_RESET, f"quarantined: {banned[k]}")
                    elif k in missing or why_blocks:
                        out.fail_cells([(k, p, r) for r in reps], "crash", missing.get(k) or why_blocks)
            sols = [k for k in first.solutions if k in located]
            if sols and not why_blocks:
                out.sweep(list(first.problems), sols, reps, located, blocks)
        return out.samples

    @property
    def sweeps_per_call(self) -> int:
        return max(1, int(self.settings.max_benchmarks))

    def _client_solutions(
        self, root: Path, plan: MeasurePlan, wanted: list[str]
    ) -> tuple[dict[str, _Located], dict[str, str]]:
        """Where each kernel's solution is: its build batch's benchmark library and index, found through the
        batch's solutions file (same order as the library's indices). Kernels not found, with the reason."""
        located: dict[str, _Located] = {}
        errors: list[str] = []
        for folder, order in self._batch_folders(root, wanted):
            data = sorted((folder / "out" / "1_BenchmarkProblems").glob("*_00/Data/00_Final.yaml"))
            try:
                if not data:
                    raise ClientFilesError(
                        f"{folder}: Tensile wrote no solutions file (was the batch built?)"
                    )
                sols = read_solutions(data[0])
                ini, lib = client_files(folder / "out")
                doc = load_library(lib)
            except (ClientFilesError, ValueError) as exc:
                errors.append(str(exc))
                continue
            # one to one: two ids never share a solution (Tensile merges what it resolves as one kernel),
            # given in the batch's fork order as build gave them: measure finds the kernel build said built
            ids = [k for k in order if k in wanted] + [k for k in wanted if k not in order]
            column = match_solutions(sols, {k: plan.kernels[k].params for k in ids if k not in located})
            for kid, j in column.items():
                located[kid] = _Located(folder, ini, lib, doc, j, plan.kernels[kid].params)
        why = "; ".join(errors) or "Tensile did not benchmark this kernel (not in its solutions file)"
        return located, {kid: why for kid in wanted if kid not in located}

    def _batch_folders(self, root: Path, wanted: list[str]) -> list[tuple[Path, list[str]]]:
        """The build batches holding the wanted kernels, each with its kernels in fork order (the build's
        manifest; else the folders build would have used)."""
        manifest = root / "batches.yaml"
        left, folders = set(wanted), []
        if manifest.exists():
            for b in (yaml.safe_load(manifest.read_text()) or {}).get("batches", []):
                if left & set(b.get("kernels", [])):
                    folders.append((root / str(b["folder"]), [str(k) for k in b["kernels"]]))
                    left -= set(b["kernels"])
        rest = sorted(left)
        size = self.settings.batch_size
        for i in range(0, len(rest), size):
            part = rest[i : i + size]
            folders.append((self._folder(root, [Kernel(k, {}) for k in part]), part))
        return folders

    def _problem_blocks(
        self, problem: Problem, root: Path, located: dict[str, _Located], sizes: list
    ) -> tuple[dict[tuple[int, ...], ProblemBlock], str]:
        """The client's problem blocks (sizes with the strides Tensile derives) for every plan size: read from
        a batch's ini when it already holds them, else Tensile writes them: the batch's own build config with
        these sizes, run with the build-only client (its solution cache matches, nothing is regenerated)."""
        if not located:
            return {}, ""
        first = located[sorted(located)[0]]
        want = {tuple(s[:4]) for s in sizes}
        blocks = {b.size[:4]: b for b in ClientIni.read(first.ini).problems()}
        if want <= set(blocks):
            return blocks, ""
        built = first.folder / "config-build.yaml"
        try:
            config = yaml.safe_load(built.read_text())
            group = config["BenchmarkProblems"][0][1]
            group["BenchmarkFinalParameters"] = [{"ProblemSizes": [{"Exact": list(s[:4])} for s in sizes]}]
        except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError) as exc:
            return {}, f"{built}: the batch's build config is unreadable ({exc})"
        run = self._invoke(first.folder, config, self._null_client(root), "measure")
        try:
            ini, _ = client_files(first.folder / "out")
            blocks = {b.size[:4]: b for b in ClientIni.read(ini).problems()}
        except ClientFilesError as exc:
            return {}, f"Tensile did not write the client's parameters ({exc}); log {run.log}: {run.tail(3)}"
        lacking = sorted(want - set(blocks))
        if lacking:
            return {}, f"Tensile's client parameters lack size(s) {lacking[:3]}; log {run.log}: {run.tail(3)}"
        return blocks, ""


@dataclass
class _Located:
    folder: Path  # the build batch
    ini: Path  # its ClientParameters.ini
    library: Path  # its benchmark library
    doc: dict  # the library, loaded
    index: int  # the kernel's solution index in it
    params: Mapping[str, Any]  # the kernel's parameters (the journal records them)


def _call_groups(sweeps: list, per_call: int) -> list[list]:
    """Consecutive sweeps with the same cells share one call (the client repeats its order), up to
    ``per_call`` of them; every other sweep is a call of its own."""
    groups: list[list] = []
    for sw in sweeps:
        last = groups[-1] if groups else None
        if (
            last is not None
            and len(last) < per_call
            and set(last[0].problems) == set(sw.problems)
            and set(last[0].solutions) == set(sw.solutions)
        ):
            last.append(sw)
        else:
            groups.append([sw])
    return groups


class _MeasureRun:
    """The samples of one ``measure``: client calls in the order they ran, each a sweep, each launch a sample
    with its real position, its sweep and the sweep's telemetry."""

    def __init__(self, backend: TensileBackend, root: Path, sizes: list, roles: dict, library: str):
        self.be, self.root, self.sizes, self.roles, self.library = backend, root, sizes, roles, library
        self.samples: list[Sample] = []
        self.calls = root / "client"
        self.calls.mkdir(parents=True, exist_ok=True)
        self.sweep_id = 0

    def _role(self, kid: str, p: int) -> str:
        return self.roles.get((kid, p), "candidate")

    def _add(self, k: str, p: int, r: int, t: float, status: str, reason: str, tele, sweep: int) -> None:
        self.samples.append(
            Sample(
                seq=len(self.samples), kernel_id=k, role=self._role(k, p), size_index=p, rep=r, time_us=t,
                status=status, reason=reason, clock_mhz=tele.clock_mhz if tele else math.nan, sweep=sweep,
                temperature_c=tele.temperature_c if tele else math.nan,
                power_w=tele.power_w if tele else math.nan,
                telemetry_note=tele.note if tele else "no telemetry: the launch never ran",
            )
        )  # fmt: skip

    def fail_cells(self, cells, status: str, reason: str, tele=None) -> None:
        """Failed samples for (kernel, size, rep) cells the client did not time (NaN, with the reason); a
        cell that never ran carries no reading (its call's note says why)."""
        for k, p, r in cells:
            self._add(k, p, r, math.nan, status, reason, None, -1)
            if tele is not None:
                self.samples[-1] = replace(self.samples[-1], telemetry_note=tele.note)

    def _folder(self) -> Path:
        n = len(list(self.calls.glob("call-*")))
        while (self.calls / f"call-{n:04d}").exists():
            n += 1
        folder = self.calls / f"call-{n:04d}"
        folder.mkdir(parents=True)
        return folder

    def sweep(self, problems: list[int], sols: list[str], reps: list[int], located, blocks) -> None:
        """One client call: ``problems`` in this order, ``sols`` in this order at each, ``len(reps)`` runs. A
        call that dies leaves its finished rows; the rest is re-run with the solutions split in halves, so
        one bad kernel does not cost the others, and a kernel that fails alone gets the failure."""
        be = self.be
        folder = self._folder().resolve()  # the client runs in it: every path it is given is absolute
        code_objects = list(
            dict.fromkeys(c for k in sols for c in ClientIni.read(located[k].ini).values("code-object"))
        )
        try:
            library, names = compose_library(
                [(located[k].doc, located[k].index, located[k].library) for k in sols]
            )
        except ClientFilesError as exc:
            self.fail_cells([(k, p, r) for r in reps for p in problems for k in sols], "crash", str(exc))
            return
        lib_path = folder / ("TensileLibrary" + located[sols[0]].library.suffix)
        write_library(library, lib_path)
        results = folder / "results.csv"
        base = ClientIni.read(located[sols[0]].ini)
        ini = folder / "ClientParameters.ini"
        sizes = [tuple(self.sizes[p][:4]) for p in problems]
        ini.write_text(
            compose_ini(base, lib_path, code_objects, results, [blocks[s] for s in sizes], len(reps))
        )
        sampler = be.sampler()
        in_flight = [
            {"id": k, "library": self.library, "params": located[k].params, "solution": j}
            for j, k in enumerate(sols)
        ]
        context = {"folder": str(folder), "library_file": str(lib_path), "sizes": [list(s) for s in sizes]}
        with be.journal().call("tensile_client", in_flight, context):  # durable before the GPU sees it
            run = run_call(be.settings.prebuilt_client, ini, results, be.settings.timeout_s, sampler)
        tele = summarise(sampler.log, run.started, run.ended, be.nominal_mhz, be.telemetry_why)
        got = read_call(run, names, sizes, len(reps))
        sweep = self.sweep_id
        self.sweep_id += 1
        missing: list[tuple[int, int, int]] = []  # (run, problem position, solution position) not measured
        for i, r in enumerate(reps):  # the order the client ran: run, problem, solution
            for pi, p in enumerate(problems):
                for j, k in enumerate(sols):
                    cell = got.cells.get((i, pi, j))
                    if cell is None:
                        missing.append((i, pi, j))
                        continue
                    status, t, reason = cell
                    self._add(k, p, r, t, status, reason, tele, sweep)
        if not missing:
            return
        where = f"call {folder.name}, log {run.log}"
        cells = [(sols[j], problems[pi], reps[i]) for i, pi, j in missing]
        if got.finished:  # the client finished but its file lacks cells: recorded, never re-used or guessed
            self.fail_cells(cells, "crash", f"no result in the client's CSV: {got.problem}; {where}", tele)
            return
        again = sorted({j for _, _, j in missing})
        if len(again) > 1:  # re-run what is left with the solutions split in halves
            rest = [problems[pi] for pi in sorted({pi for _, pi, _ in missing})]
            runs = [reps[i] for i in sorted({i for i, _, _ in missing})]
            half = len(again) // 2
            for part in (again[:half], again[half:]):
                self.sweep(rest, [sols[j] for j in part], runs, located, blocks)
            return
        if run.timed_out:
            status, why = "timeout", f"client killed after {be.settings.timeout_s:.0f} s"
        else:
            status = "crash"
            why = f"client exited with rc {run.rc} before timing this size" + (
                f" ({got.problem})" if got.problem else ""
            )
        self.fail_cells(cells, status, f"{why}; {where}: {run.tail(2)}", tele)


def _bytes_per_element(problem: Problem) -> int:
    try:
        return int(problem.library.family.a.bytes)
    except AttributeError:
        return 0


def _dropped(
    k: Kernel,
    rejections,
    overflows,
    codes: list[int],
    failures=(),
    built: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]] | None = None,
    log: Path | None = None,
) -> BuildResult:
    """Why a kernel of a finished run is not in Tensile's solutions file, in Tensile's own words: the kernel
    writer's named failures and overflows, ``reject:`` reasons, the nameless writer errors; ``built`` (id ->
    (params, the solution it became)) tells a kernel Tensile merged into another of the batch."""
    for name, code, msg in overflows:
        if name_matches(name, k.params):
            return BuildResult(
                k.id, "register_overflow", f"Tensile: overflowed resources, errorCode={code}: {msg}"
            )
    for name, status, msg in failures:
        if name_matches(name, k.params):
            return BuildResult(k.id, status, f"Tensile's kernel writer: {msg}")
    for name, reasons in rejections:
        if name_matches(name, k.params):
            return BuildResult(k.id, "rejected", "Tensile: " + "; ".join(reasons or ["rejected"]))
    if codes:  # accepted by SolutionStructs, then the kernel writer gave up (the log names no kernel)
        return BuildResult(k.id, "register_overflow", resource_reason(codes))
    for other, (params, solution) in (built or {}).items():
        if other != k.id and solution_matches(solution, k.params) and solution_matches(solution, params):
            return BuildResult(
                k.id, "rejected", f"Tensile built it as the same kernel as {other} of this batch"
            )
    every = sorted({r for _, rs in rejections for r in rs})
    reason = "Tensile left it out of its solutions file and its log names no reason"
    if every:
        reason += " (reasons it gave for others of this batch: " + "; ".join(every) + ")"
    return BuildResult(k.id, "compile_error", reason + (f"; log {log}" if log else ""))

"""The tensile backend: builds and times candidates with the real ``Tensile`` benchmark program.

Same interface as ``sim`` (:mod:`oto.backends.base`); every number it returns is ``measured``.

- **Batches.** Kernels are split into batches of ``tensile.batch_size``; each batch is one Tensile
  invocation per step (build, measure) in the batch's folder ``<workdir>/tensile/batch-<hash>/``
  (``config-<step>.yaml``, ``out/``, ``tensile-<step>.log``), so every run's log is kept. The candidates go
  in as one ``ForkParameters: Groups`` dimension (exact bundles, no cartesian fork).
- **build** runs Tensile with a stand-in client (``tensile_runtime.py null-client``): kernel generation,
  gfx assembly and the benchmark library, nothing timed. Outcome per kernel: ``ok`` (in the solutions YAML),
  ``rejected`` (Tensile's ``reject:`` reasons), ``register_overflow`` (``overflowed resources`` warning),
  ``compile_error`` (Tensile exited non-zero or timed out; the batch is bisected so one bad kernel does not
  take the others with it).
- **measure** re-runs the same batch config with the real client (``tensile.prebuilt_client``); Tensile's
  solution cache matches, so no kernel is regenerated. The results CSV (:mod:`oto.tensile.results_csv`)
  columns are mapped to kernels through the solutions YAML; -1 GFlops → ``validation_failed``; rows missing
  after a client crash → ``crash``; a run killed at ``tensile.timeout_s`` → ``timeout``. Failed batches are
  bisected and re-run, so the rest of the generation is never lost.
- **Launch order.** Tensile times all solutions of one problem, then the next, ``NumBenchmarks`` times; the
  plan's launches are answered from that data (seq = plan order). The drift model sees the client's order
  only through the repetitions; this is documented in docs/tensile.md.
- **Start-up.** Tensile probes the assembler (~50 s) at every start unless ``--asm-cache`` names a cache:
  the first run on the machine writes it (under a lock) next to the results, every later run reads it.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from oto.backends.base import BuildResult, Costs, Kernel, MeasurePlan, Problem, Sample, Size
from oto.tensile.benchmark_config import APU_GLOBAL_PARAMETERS, benchmark_config
from oto.tensile.install import RUNTIME_SCRIPT, Settings, TensileUnavailable, probe
from oto.tensile.outputs import name_matches, parse_log, read_solutions, solution_matches, solution_name
from oto.tensile.results_csv import TensileCsvError, read_results

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

    def __init__(self, profile: Mapping[str, Any], tensile_config: Mapping[str, Any] | None, stream: str):
        self.profile = profile
        self.settings = Settings.from_config(tensile_config, profile)
        self.stream = stream
        self._probe: dict[str, Any] | None = None

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

    # -- facts
    def probe(self) -> dict[str, Any]:
        """Tensile's version and whether it knows the target ISA natively (cached per backend)."""
        if self._probe is None:
            self._probe = probe(self.settings.command) or {}
        return self._probe

    def provenance(self) -> dict[str, Any]:
        p = self.probe()
        return {
            "backend": self.name,
            "numbers": self.numbers,
            "arch": self.profile["arch"],
            "isa": self.settings.isa,
            "tensile_version": p.get("version", "unknown"),
            "isa_registered_at_run_time": not p.get("native", {}).get(self.settings.isa, True),
            "prebuilt_client": self.settings.prebuilt_client,
            "stream": self.stream,
        }

    # -- one Tensile invocation
    def _invoke(self, folder: Path, config: Mapping[str, Any], client: str, step: str) -> Run:
        folder.mkdir(parents=True, exist_ok=True)
        cfg_path = folder / f"config-{step}.yaml"
        cfg_path.write_text(yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=120))
        cache = self.settings.asm_cache.resolve()
        cmd = [
            *self.settings.command,
            "tensile",
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
        if yaml_path is not None and yaml_path.exists() and run.rc == 0:
            sols = read_solutions(yaml_path)
            for k in batch:
                hit = next((s for s in sols if solution_matches(s, k.params)), None)
                if hit is not None:
                    bpe = _bytes_per_element(problem)
                    res = {"lds_bytes": int(hit.get("LdsNumElements", 0)) * bpe} if bpe else {}
                    results[k.id] = BuildResult(k.id, "ok", "", res)
                else:
                    results[k.id] = _dropped(k, rejections, overflows)
            return folder
        if "0 valid solutions" in text:
            for k in batch:
                results[k.id] = _dropped(k, rejections, overflows)
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

    # -- measure
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
        reps = min(max(la.rep for la in launches) + 1, self.settings.max_benchmarks)
        sizes = [s.as_list() if isinstance(s, Size) else list(s) for s in plan.sizes]
        # Reuse the build batches so Tensile's solution cache matches and nothing is regenerated.
        batches = self._measure_batches(root, plan, wanted)
        cells: dict[tuple[str, int, int], tuple[str, float, str]] = {}
        for batch in batches:
            self._measure_batch(problem, batch, sizes, reps, root, cells)
        samples = []
        for seq, la in enumerate(launches):
            key = (la.kernel_id, la.size_index, la.rep % reps)
            status, t, reason = cells.get(key, ("crash", math.nan, "no result recorded for this launch"))
            samples.append(Sample(seq, la.kernel_id, la.role, la.size_index, la.rep, t, status, reason))
        return samples

    def _measure_batches(self, root: Path, plan: MeasurePlan, wanted: list[str]) -> list[list[Kernel]]:
        manifest = root / "batches.yaml"
        left = set(wanted)
        batches: list[list[Kernel]] = []
        if manifest.exists():
            for b in (yaml.safe_load(manifest.read_text()) or {}).get("batches", []):
                ids = [kid for kid in b.get("kernels", []) if kid in left]
                if ids:
                    batches.append([plan.kernels[kid] for kid in ids])
                    left -= set(ids)
        rest = [plan.kernels[kid] for kid in wanted if kid in left]
        size = self.settings.batch_size
        batches += [rest[i : i + size] for i in range(0, len(rest), size)]
        return batches

    def _measure_batch(
        self,
        problem: Problem,
        batch: list[Kernel],
        sizes: list[list[int]],
        reps: int,
        root: Path,
        cells: dict[tuple[str, int, int], tuple[str, float, str]],
    ) -> None:
        folder = self._folder(root, batch)
        for stale in (folder / "out" / "1_BenchmarkProblems").glob("*_00/Data/*.csv"):
            stale.unlink()  # the build run's empty results file must not pass for this run's
        config = self._config(problem, batch, sizes, reps)
        run = self._invoke(folder, config, self.settings.prebuilt_client, "measure")
        yaml_path, csv_path = self._outputs(run)
        by_size: dict[tuple[int, ...], list[int]] = {}
        for i, s in enumerate(sizes):
            by_size.setdefault(tuple(int(x) for x in s[:4]), []).append(i)
        complete = True
        try:
            if yaml_path is None or not yaml_path.exists():
                raise FileNotFoundError(f"{folder}: Tensile wrote no solutions file")
            sols = read_solutions(yaml_path)
            names = [solution_name(s) for s in sols]
            table = read_results(
                csv_path,
                names if all(names) else None,  # 4.44 leaves SolutionNameMin empty: check the count
                expected_indices=4,
                expected_count=len(sols),
            )
        except (FileNotFoundError, TensileCsvError, ValueError) as exc:
            sols, table, complete, problem_msg = [], None, False, str(exc)
        else:
            problem_msg = table.truncated
            complete = not table.truncated and run.rc == 0
        column = {
            k.id: next((j for j, s in enumerate(sols) if solution_matches(s, k.params)), None) for k in batch
        }
        filled: set[tuple[str, int, int]] = set()
        if table is not None:
            for row in table.rows:
                if row.run >= reps:
                    continue
                for size_index in by_size.get(tuple(row.sizes), []):
                    for k in batch:
                        j = column[k.id]
                        if j is None:
                            continue
                        g = row.gflops[j]
                        key = (k.id, size_index, row.run)
                        if g > 0 and math.isfinite(g):
                            cells[key] = ("ok", row.time_us(j), "")
                        elif g == -1:
                            cells[key] = (
                                "validation_failed",
                                math.nan,
                                "client reported -1 GFlops: wrong results or failed predicates",
                            )
                        else:
                            cells[key] = ("crash", math.nan, f"client reported {g} GFlops (kernel skipped)")
                        filled.add(key)
        missing = [
            (k, i, r)
            for k in batch
            for i in range(len(sizes))
            for r in range(reps)
            if (k.id, i, r) not in filled
        ]
        if not missing:
            return
        if not complete and len(batch) > 1:  # rerun the halves so one bad kernel does not cost the others
            half = len(batch) // 2
            for part in (batch[:half], batch[half:]):
                self._measure_batch(problem, part, sizes, reps, root, cells)
            return
        for k, i, r in missing:
            if column.get(k.id) is None and table is not None:
                status, why = "crash", "Tensile did not benchmark this kernel (not in its solutions file)"
            elif run.timed_out:
                status, why = "timeout", f"Tensile/client killed after {self.settings.timeout_s:.0f} s"
            else:
                status = "crash"
                why = f"client exited with rc {run.rc} before timing this size" + (
                    f" ({problem_msg})" if problem_msg else ""
                )
            cells[(k.id, i, r)] = (status, math.nan, f"{why}; log {run.log}")


def _bytes_per_element(problem: Problem) -> int:
    try:
        return int(problem.library.family.a.bytes)
    except AttributeError:
        return 0


def _dropped(k: Kernel, rejections, overflows) -> BuildResult:
    for name, code, msg in overflows:
        if name_matches(name, k.params):
            return BuildResult(
                k.id, "register_overflow", f"Tensile: overflowed resources, errorCode={code}: {msg}"
            )
    for name, reasons in rejections:
        if name_matches(name, k.params):
            return BuildResult(k.id, "rejected", "Tensile: " + "; ".join(reasons or ["rejected"]))
    every = sorted({r for _, rs in rejections for r in rs})
    reason = "Tensile dropped it: not in the solutions file"
    if every:
        reason += " (reasons in this batch: " + "; ".join(every) + ")"
    return BuildResult(k.id, "rejected", reason)

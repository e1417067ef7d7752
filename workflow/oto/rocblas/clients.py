"""Running rocBLAS's own benchmark client on one GEMM size with one library installation: the runner
interface ``verify`` and ``compare`` use, its real implementation and its simulated one.

- An **arm** is a library installation as a user gets it: oto's tuned library through
  ``ROCBLAS_TENSILE_LIBPATH`` (and, for the gfx900 label, ``HSA_OVERRIDE_GFX_VERSION=9.0.0``), the stock
  spoof (rocBLAS's own gfx900 libraries under the override), or the upstream path (a ROCm whose rocBLAS
  supports gfx90c natively, no override). It also says which kernel it runs at each (library, size), from
  the deck and the tuned logic: the journal records it, and the simulated GPU times it.
- A **call** is one ``rocblas-bench`` invocation: one library's GEMM at one size. Each call is its own
  process with its own timeout, so a crash, a hang or a malformed output costs that size only.
- :class:`RocblasBenchRunner` runs the real binary (``rocblas-bench -f gemm... -v 1``), with the arm's
  environment, journalled by the GPU-reset journal (:mod:`oto.registry.gpu_journal`: a size whose call took
  the GPU down is run alone on resume, and quarantined if it does it again).
- :class:`SimulatedClientRunner` answers from the simulated GPU through the same interface: the arm's kernel
  at the size, timed with the simulator's noise on one virtual clock shared by every arm (so interleaving
  and drift behave as on the GPU), a norm error from a model of rounding; every result says ``simulated``.
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from oto.backends import backend_type, job_stream, resolve
from oto.backends.base import Kernel, Launch, MeasurePlan, Problem
from oto.backends.sim import SimBackend
from oto.config import config_defaults
from oto.gemm import Library
from oto.registry.gpu_journal import GPU_RESET, GpuJournal, InFlight
from oto.registry.records import size_key
from oto.rocblas.bench_output import parse_bench_output

Size = tuple[int, int, int, int]  # M, N, batch, K
# Outcomes of one client call. verify and compare judge them: a result can be ok and still fail verification.
RESULT_CLASSES = ("ok", "crash", "timeout", "malformed", "unsupported", "too_large", GPU_RESET)

# rocBLAS's type names (clients/include/rocblas_datatype2string.hpp) for Tensile's data-type chars.
ROCBLAS_TYPES = {
    "S": "f32_r",
    "D": "f64_r",
    "C": "f32_c",
    "Z": "f64_c",
    "H": "f16_r",
    "B": "bf16_r",
    "I8": "i8_r",
    "I": "i32_r",
}
_PRECISION = {"S": "s", "D": "d", "C": "c", "Z": "z", "H": "h"}  # rocblas_<x>gemm


@dataclass(frozen=True)
class Arm:
    """One library installation (see the module doc)."""

    name: str  # tuned | spoof | upstream
    libpath: str | None = None  # ROCBLAS_TENSILE_LIBPATH; None: rocBLAS's own libraries
    env: Mapping[str, str] = field(default_factory=dict)  # e.g. HSA_OVERRIDE_GFX_VERSION for the spoof
    kernels: Mapping[tuple[str, Size], str] = field(default_factory=dict)  # (library, size) -> kernel id
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # kernel id -> parameters
    bench: str | None = None  # its own rocblas-bench (another ROCm's: the upstream path); None: the runner's

    def kernel(self, library: str, size: Size) -> str:
        """The kernel this arm runs for ``library`` at ``size``; '' when nobody said."""
        return str(self.kernels.get((library, tuple(size)), ""))

    def environment(self) -> dict[str, str]:
        """The variables this arm sets (and unsets: ROCBLAS_TENSILE_LIBPATH when it is rocBLAS's own)."""
        out = dict(self.env)
        if self.libpath:
            out["ROCBLAS_TENSILE_LIBPATH"] = str(self.libpath)
        return out


@dataclass(frozen=True)
class ClientResult:
    arm: str
    library: str
    size: Size
    status: str  # one of RESULT_CLASSES
    time_us: float  # mean time of one call over the hot iterations (NaN unless ok)
    gflops: float
    norm_error: float | None  # relative Frobenius norm error of the verification; None: not verified
    reason: str
    numbers: str  # measured | simulated
    kernel_id: str = ""
    log: str = ""  # the call's output file, where there is one


class ClientRunner(Protocol):
    """Runs one library's GEMM at one size on one arm (see the module doc)."""

    numbers: str  # measured | simulated

    def run(self, arm: Arm, library: str, size: Size, verify: bool) -> ClientResult: ...

    def run_calls(self, calls: Sequence[tuple[Arm, str, Size]], verify: bool) -> list[ClientResult]:
        """The calls ``(arm, library, size)`` in this order, one result each."""
        ...

    def provenance(self) -> dict[str, Any]: ...


def bench_arguments(library: str, size: Size, verify: bool, iters: int, cold_iters: int) -> list[str] | str:
    """rocblas-bench's arguments for ``library``'s GEMM at ``size`` (clients/benchmarks/client.cpp options),
    or why the client cannot run it: the ``gemm`` function of the family's precision (``_ex`` with the
    a/b/c/d/compute types for mixed-precision families, ``_strided_batched`` for a batch, ``_batched`` for
    the pointer-array ``_GB`` families), transposes from the pattern, the tightest leading dimensions and
    strides."""
    lib = Library.parse(library)
    fam = lib.family
    if fam.initial_strides_ab or fam.initial_strides_cd:
        return (
            f"{library}: a problem type with initial strides (UseInitialStrides); rocBLAS's GEMM API and its "
            "clients do not call it directly"
        )
    a, dest, compute = fam.a.char, fam.dest.char, fam.compute.char
    if any(c not in ROCBLAS_TYPES for c in (a, dest, compute)):
        return f"{library}: no rocBLAS type for {fam.code}"
    m, n, batch, k = (int(x) for x in size)
    plain = a == dest == compute and a in _PRECISION
    function = "gemm" + ("_batched" if not fam.strided_batched else "_strided_batched" if batch > 1 else "")
    function += "" if plain else "_ex"  # a pointer-array (_GB) family is batched even for one matrix
    ta = ("C" if lib.conjugate_a else "T") if lib.transpose_a else "N"
    tb = ("C" if lib.conjugate_b else "T") if lib.transpose_b else "N"
    lda = k if lib.transpose_a else m
    ldb = n if lib.transpose_b else k
    args = ["-f", function]
    if plain:
        args += ["-r", _PRECISION[a]]
    else:
        args += ["--a_type", ROCBLAS_TYPES[a], "--b_type", ROCBLAS_TYPES[a], "--c_type", ROCBLAS_TYPES[dest],
                 "--d_type", ROCBLAS_TYPES[dest], "--compute_type", ROCBLAS_TYPES[compute]]  # fmt: skip
    args += ["--transposeA", ta, "--transposeB", tb, "-m", str(m), "-n", str(n), "-k", str(k)]
    args += ["--lda", str(lda), "--ldb", str(ldb), "--ldc", str(m)]
    if not plain:
        args += ["--ldd", str(m)]
    if "batched" in function:
        args += ["--batch_count", str(batch)]
    if "strided" in function:
        args += ["--stride_a", str(lda * (m if lib.transpose_a else k)), "--stride_b",
                 str(ldb * (k if lib.transpose_b else n)), "--stride_c", str(m * n)]  # fmt: skip
        if not plain:
            args += ["--stride_d", str(m * n)]
    args += ["-i", str(int(iters)), "-j", str(int(cold_iters))]
    if verify:
        args += ["-v", "1"]
    return args


@dataclass
class RocblasBenchRunner:
    """The real ``rocblas-bench``, one process per call, killed with its process group at ``timeout_s``."""

    bench: str  # path of rocblas-bench
    folder: Path  # where each call's output is kept (call-NNNN.log)
    journal: GpuJournal
    timeout_s: float = 600.0
    iters: int = 10
    cold_iters: int = 2
    numbers: str = "measured"
    _calls: int = 0

    def provenance(self) -> dict[str, Any]:
        return {"client": "rocblas-bench", "path": self.bench, "numbers": self.numbers,
                "iters": self.iters, "cold_iters": self.cold_iters, "timeout_s": self.timeout_s}  # fmt: skip

    def recover(self) -> list[str]:
        """Settle calls a dead process left in flight (run alone; a size that dies again is quarantined)."""
        return self.journal.recover({"rocblas-bench": self._probe})

    def _probe(self, entry: InFlight, kernel: Mapping[str, Any]) -> None:
        ctx = entry.context
        rc, _, timed_out = self._spawn(list(ctx["command"]), dict(ctx["env"]), self.folder / "probe.log")
        if rc != 0:
            raise RuntimeError(f"rocblas-bench rc {rc}{' (timed out)' if timed_out else ''}")

    def _spawn(self, cmd: list[str], env: Mapping[str, str], log: Path) -> tuple[int | None, float, bool]:
        log.parent.mkdir(parents=True, exist_ok=True)
        full = {**os.environ, **env}
        if "ROCBLAS_TENSILE_LIBPATH" not in env:  # rocBLAS's own libraries: nothing of another arm leaks in
            full.pop("ROCBLAS_TENSILE_LIBPATH", None)
        if "HSA_OVERRIDE_GFX_VERSION" not in env:
            full.pop("HSA_OVERRIDE_GFX_VERSION", None)
        t0 = time.monotonic()
        with open(log, "w") as fh:
            fh.write("$ " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())))
            fh.write(" " + shlex.join(cmd) + "\n")
            fh.flush()
            try:
                proc = subprocess.Popen(
                    cmd, stdout=fh, stderr=subprocess.STDOUT, env=full, start_new_session=True
                )
            except OSError as exc:
                fh.write(f"# oto: could not start rocblas-bench: {exc}\n")
                return 127, 0.0, False
            try:
                rc: int | None = proc.wait(timeout=self.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc, timed_out = None, True
            seconds = time.monotonic() - t0
            fh.write(f"\n# oto: rc={rc} timed_out={timed_out} seconds={seconds:.1f}\n")
        return rc, seconds, timed_out

    def run_calls(self, calls: Sequence[tuple[Arm, str, Size]], verify: bool) -> list[ClientResult]:
        return [self.run(arm, library, size, verify) for arm, library, size in calls]  # each its own process

    def run(self, arm: Arm, library: str, size: Size, verify: bool) -> ClientResult:
        size = tuple(int(x) for x in size)  # type: ignore[assignment]
        kid = arm.kernel(library, size)

        def result(status: str, reason: str, log: str = "", **kw: Any) -> ClientResult:
            fields = {"time_us": math.nan, "gflops": math.nan, "norm_error": None, **kw}
            return ClientResult(arm.name, library, size, status, reason=reason, numbers=self.numbers,
                                kernel_id=kid, log=log, **fields)  # fmt: skip

        banned = self.journal.quarantined().get((library, kid)) if kid else None
        if banned:
            return result(GPU_RESET, f"quarantined: {banned}")
        args = bench_arguments(library, size, verify, self.iters, self.cold_iters)
        if isinstance(args, str):
            return result("unsupported", args)
        self._calls += 1
        log = (
            self.folder
            / f"call-{self._calls:04d}-{arm.name}-{library}-{size_key(size).replace(',', 'x')}.log"
        )
        cmd = [arm.bench or self.bench, *args]
        env = arm.environment()
        context = {"command": cmd, "env": env, "sizes": [list(size)], "arm": arm.name}
        in_flight = [{"id": kid or f"{arm.name}@{size_key(size)}", "library": library}]
        with self.journal.call("rocblas-bench", in_flight, context):
            rc, _, timed_out = self._spawn(cmd, env, log)
        text = log.read_text(errors="replace")
        tail = " | ".join(ln.strip() for ln in text.splitlines()[-3:] if ln.strip())
        if timed_out:
            return result("timeout", f"rocblas-bench killed after {self.timeout_s:.0f} s", str(log))
        if rc != 0:
            return result("crash", f"rocblas-bench exited with rc {rc}: {tail}", str(log))
        return read_result(text, arm, library, size, kid, self.numbers, str(log), verify)


def read_result(
    text: str, arm: Arm, library: str, size: Size, kid: str, numbers: str, log: str, verify: bool
) -> ClientResult:
    """The one result row of a finished rocblas-bench call, checked against the call: a missing or
    malformed row, a row of another size, or no norm where verification was asked is ``malformed``."""
    out = parse_bench_output(text, log or "rocblas-bench output")

    def malformed(why: str) -> ClientResult:
        return ClientResult(
            arm.name, library, size, "malformed", math.nan, math.nan, None, why, numbers, kid, log
        )

    if out.problems:
        return malformed("; ".join(out.problems[:2]))
    if len(out.rows) != 1:
        return malformed(f"{len(out.rows)} result rows where one call prints one")
    row = out.rows[0]
    if row.size[0] != size[0] or row.size[1] != size[1] or row.size[3] != size[3]:
        return malformed(f"the result is for size {list(row.size)}, the call asked for {list(size)}")
    if verify and row.norm_error is None:
        return malformed("no norm_error column: the client did not verify (-v 1)")
    return ClientResult(
        arm.name, library, size, "ok", row.time_us, row.gflops, row.norm_error, "", numbers, kid, log
    )


# ---- the simulated GPU behind the same interface ----

# Integer accumulation is exact (rocBLAS checks int8/int32 GEMMs bit for bit: sum_error_tolerance 0).
UNIT_ROUNDOFF = {"S": 2.0**-24, "D": 2.0**-53, "C": 2.0**-24, "Z": 2.0**-53, "H": 2.0**-11, "B": 2.0**-8,
                 "I": 0.0, "I8": 0.0}  # fmt: skip


class SimulatedClientRunner:
    """rocblas-bench answered by the simulated GPU (see the module doc); every result says ``simulated``.

    One simulated GPU and one noise stream serve every arm, so calls share one virtual clock and its drift,
    as calls on one APU do. A call is ``cold_iters`` + ``iters`` launches of the arm's kernel at the size;
    its time is the mean of the hot ones. Verification: a kernel the model fails validation on gives a norm
    error of 1 (a wrong result is as far from the reference as the reference is from zero); any other gives
    the expected rounding error of a K-term sum in the compute type, u·sqrt(K)."""

    numbers = "simulated"

    def __init__(
        self,
        profile: Mapping[str, Any],
        config: Mapping[str, Any],
        iters: int,
        cold_iters: int,
        stream: str = "rocblas-clients",
    ):
        self.profile = profile
        self.iters, self.cold_iters = int(iters), int(cold_iters)
        self.backend = SimBackend.from_config(config, profile, stream)

    def provenance(self) -> dict[str, Any]:
        return {"client": "simulated rocblas-bench", "numbers": self.numbers, "iters": self.iters,
                "cold_iters": self.cold_iters, **self.backend.provenance()}  # fmt: skip

    def recover(self) -> list[str]:
        return []  # nothing in flight on a simulated GPU

    def run(self, arm: Arm, library: str, size: Size, verify: bool) -> ClientResult:
        return self.run_calls([(arm, library, size)], verify)[0]

    def run_calls(self, calls: Sequence[tuple[Arm, str, Size]], verify: bool) -> list[ClientResult]:
        """The calls in order on one virtual clock: each library's calls are one plan of the simulated GPU
        (``cold_iters`` + ``iters`` launches per call, in the calls' order), so a batch costs what one
        measurement costs, and its drift is the drift between the calls."""
        results: list[ClientResult | None] = [None] * len(calls)
        by_library: dict[str, list[int]] = {}
        for j, (arm, library, size) in enumerate(calls):
            size = tuple(int(x) for x in size)  # type: ignore[assignment]
            kid = arm.kernel(library, size)
            args = bench_arguments(library, size, verify, self.iters, self.cold_iters)
            why = args if isinstance(args, str) else ""
            if not why and (not kid or kid not in arm.params):
                why = f"arm {arm.name!r} names no kernel for {library} at {list(size)}"
            if why:
                nan = math.nan
                results[j] = ClientResult(arm.name, library, size, "unsupported", nan, nan, None, why,
                                          self.numbers, kid)  # fmt: skip
            else:
                by_library.setdefault(library, []).append(j)
        for library, js in by_library.items():
            for j, res in zip(js, self._measure(library, [calls[j] for j in js], verify), strict=True):
                results[j] = res
        return results  # type: ignore[return-value]

    def _measure(
        self, library: str, calls: Sequence[tuple[Arm, str, Size]], verify: bool
    ) -> list[ClientResult]:
        lib = Library.parse(library)
        problem = Problem(lib, self.profile, {})
        runs = self.cold_iters + self.iters
        sizes: dict[Size, int] = {}
        kernels: dict[str, Kernel] = {}
        launches = []
        for j, (arm, _, size) in enumerate(calls):
            size = tuple(int(x) for x in size)  # type: ignore[assignment]
            kid = arm.kernel(library, size)
            kernels.setdefault(kid, Kernel(kid, dict(arm.params[kid])))
            si = sizes.setdefault(size, len(sizes))
            launches += [Launch(kid, "candidate", si, j * runs + r) for r in range(runs)]
        plan = MeasurePlan(kernels, [list(s) for s in sizes], launches)
        run = self.backend.simulate(problem, plan)
        times, status, reason = run.times.tolist(), run.status.tolist(), run.reason.tolist()
        if run.launches != launches:  # the backend ran them in its own order: put them back in the calls'
            where = {(la.kernel_id, la.size_index, la.rep): i for i, la in enumerate(run.launches)}
            at = [where[(la.kernel_id, la.size_index, la.rep)] for la in launches]
            times, status, reason = [times[i] for i in at], [status[i] for i in at], [reason[i] for i in at]
        out = []
        for j, (arm, _, size) in enumerate(calls):  # call j's launches: j*runs ... j*runs + runs-1
            size = tuple(int(x) for x in size)  # type: ignore[assignment]
            mine = slice(j * runs, (j + 1) * runs)
            kid = launches[j * runs].kernel_id
            out.append(
                self._result(arm, lib, size, kid, times[mine], status[mine], reason[mine], problem, verify)
            )
        return out

    def _result(self, arm: Arm, lib: Library, size: Size, kid: str, times: list[float], status: list[str],
                reason: list[str], problem: Problem, verify: bool) -> ClientResult:  # fmt: skip
        """One call's result from its launches (cold ones first), in the order they ran."""

        def result(status: str, reason: str, **kw: Any) -> ClientResult:
            fields = {"time_us": math.nan, "gflops": math.nan, "norm_error": None, **kw}
            return ClientResult(arm.name, lib.name, size, status, reason=reason, numbers=self.numbers,
                                kernel_id=kid, **fields)  # fmt: skip

        failed = [i for i, st in enumerate(status) if st not in ("ok", "validation_failed")]
        if failed:  # a hang, a crash, a problem too large for the device: the call reports no time
            first = status[failed[0]]
            return result(first if first in RESULT_CLASSES else "crash", reason[failed[0]])
        wrong = "validation_failed" in status
        timed = [
            t for t, st in zip(times[self.cold_iters :], status[self.cold_iters :], strict=True) if st == "ok"
        ]
        if timed:
            t = sum(timed) / len(timed)
        else:  # a kernel with wrong results still takes its time: the model's, without noise
            t = float(self.backend.ground_truth(problem, arm.params[kid], [list(size)])[0])
        flops = lib.family.flops_per_mac * size[0] * size[1] * size[2] * size[3]
        norm = None
        if verify:
            u = UNIT_ROUNDOFF.get(lib.family.compute.char, 2.0**-24)
            norm = 1.0 if wrong else u * math.sqrt(size[3])
        return result("ok", "", time_us=t, gflops=flops / (t * 1e3) if t > 0 else math.nan, norm_error=norm)


def arm_kernels(
    library: str, sizes: Sequence[Sequence[int]], kernel_of_size: Sequence[str]
) -> dict[tuple[str, Size], str]:
    """An arm's (library, size) -> kernel map from a library's sizes and the kernel at each."""
    return {
        (library, tuple(int(x) for x in s[:4])): str(k) for s, k in zip(sizes, kernel_of_size, strict=True)
    }


def client_runner(
    config: Mapping[str, Any],
    profile: Mapping[str, Any],
    backend: str,
    journal: GpuJournal | None = None,
    libraries: Sequence[str] = (),
) -> tuple[ClientRunner | None, str]:
    """(the runner verify and compare use on ``backend``, or None, and what it is or why there is none), as
    the backend declares it (``rocblas_client``, :data:`oto.backends.base.ROCBLAS_CLIENTS`): ``binary`` runs
    the real ``rocblas-bench`` (config ``rocblas.bench``, else the one on PATH), journalled by ``journal``;
    ``model`` answers through the same interface from the simulated GPU; ``none`` has no client, so the
    clients are skipped there. ``libraries``: the libraries a job's calls are for, where a job serves only
    some (a verify job): the simulated client draws that job's own noise (with one stream for every job,
    each library's verify hung at the same launches, so at the same deck sizes)."""
    cfg = {**config_defaults("rocblas"), **(config.get("rocblas") or {})}
    kind = backend_type(backend).rocblas_client
    if kind == "model":
        stream = "/".join(["rocblas-clients", *sorted(libraries)])
        runner = SimulatedClientRunner(profile, config, int(cfg["iters"]), int(cfg["cold_iters"]), stream)
        return runner, "simulated rocblas-bench (the simulated GPU's model)"
    if kind != "binary":
        return (
            None,
            f"backend {backend!r} has no rocBLAS client (real or simulated): verify and compare skipped",
        )
    bench = cfg["bench"] or shutil.which("rocblas-bench")
    if not bench or not Path(bench).exists():
        if cfg["bench"]:
            why = f"config field 'rocblas.bench': {cfg['bench']} does not exist"
        else:
            why = "no rocblas-bench on PATH and config field 'rocblas.bench' is not set"
        return None, why + ": verify and compare skipped"
    if journal is None:
        raise ValueError("the real rocBLAS client runs journalled: pass the GPU-reset journal")
    folder = Path(str(cfg["calls"]).format(arch=profile["arch"]))
    runner = RocblasBenchRunner(
        str(bench), folder, journal, float(cfg["timeout_s"]), int(cfg["iters"]), int(cfg["cold_iters"])
    )
    return runner, f"rocblas-bench at {bench}"


def stage_client(
    config: Mapping[str, Any], profile: Mapping[str, Any], stage: str, libraries: Sequence[str] = ()
) -> tuple[ClientRunner | None, str]:
    """:func:`client_runner` for ``stage`` (verify, compare) on the backend the run resolves to, journalled
    where it runs the real binary, with any calls a dead process left in flight run first (alone,
    quarantined if they die again)."""
    backend = resolve(config, profile, job_stream("rocblas", stage))
    journal = backend.journal() if backend.rocblas_client == "binary" else None  # type: ignore[attr-defined]
    runner, what = client_runner(config, profile, backend.name, journal, libraries)
    if runner is not None:
        runner.recover()
    return runner, what

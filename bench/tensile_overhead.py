"""Tensile start-up overhead: the assembler probe paid once per machine, and its share of a generation.

Every start of Tensile probes the assembler for each SupportedISA (~50 s) unless ``--asm-cache`` names a
cache. The tensile backend writes the cache once (``tensile.asm_cache``, kept with the results) and batches
a generation's kernels into few invocations. This benchmark runs the backend's real build path:

1. a cold invocation (no cache: pays the probe and writes the cache),
2. warm invocations with the cache, one per batch of ``--kernels`` shipped SGEMM NT solutions,

and reads Tensile's own "Benchmark Step ... <seconds>s" line to split each run into start-up and work. It
prints one row per run and the start-up share of the generation: build runs measured here plus the
measurement runs, whose start-up is the same warm start-up and whose client time is projected from the
simulated GPU's noise-free kernel times at the library's 64 tuning sizes (warm-up + repetitions, plus
Tensile's 50% cool-down sleep); there is no GPU here. On a GPU machine pass ``--client-seconds`` with the
client time of one measurement batch.
Target: start-up < 5% of a generation's wall time.

    OTO_TENSILE_PYTHON=<venv>/bin/python python bench/tensile_overhead.py [--kernels 32] [--batch 32]

Without Tensile it says so and exits 0 without numbers.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from oto.backends.base import Kernel, Problem  # noqa: E402
from oto.backends.tensile import TensileBackend  # noqa: E402
from oto.gemm import Library  # noqa: E402
from oto.tensile import legality  # noqa: E402
from oto.tensile.install import tensile_python_from_path  # noqa: E402
from oto.tensile.logic_writer import problem_type  # noqa: E402
from oto.tensile.params import CandidateError, candidate_id, canonical  # noqa: E402

STEP = re.compile(r"# Benchmark Step: \S+ - 00_Final ([0-9.]+)s")
LIBRARY = "Cijk_Ailk_Bjlk_SB"


def shipped_kernels(n: int) -> list[Kernel]:
    path = REPO.parent / "shared" / "reference" / "rocblas-vega10" / f"vega10_{LIBRARY}.yaml"
    if not path.exists():
        raise SystemExit(f"{path} not found (shared reference data)")
    doc = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    lib, out, seen = Library.parse(LIBRARY), [], set()
    for sol in doc[5]:
        try:
            p = canonical(
                {k: sol[k] for k in ("ThreadTile", "WorkGroup", "DepthU", "VectorWidth") if k in sol}
            )
        except CandidateError:
            continue
        kid = candidate_id(p)
        if kid not in seen and legality.check(lib, p).valid:
            seen.add(kid)
            out.append(Kernel(kid, p))
        if len(out) == n:
            break
    return out


def projected_client_seconds(profile, prob: Problem, kernels: list[Kernel], reps: int) -> float:
    """Client seconds to time every kernel at the library's 64 tuning sizes: (1 warm-up + reps) launches,
    each followed by Tensile's SleepPercent (50%) cool-down, plus ~50 µs launch overhead."""
    from oto.backends.sim import SimBackend
    from oto.deck.tuning_sizes import tuning_indices

    path = REPO.parent / "shared" / "reference" / "rocblas-vega10" / f"vega10_{LIBRARY}.yaml"
    rows = [r[0][:4] for r in yaml.load(path.read_text(), Loader=yaml.CSafeLoader)[7]]
    sizes = [rows[i] for i in tuning_indices(rows, 64)]
    sim = SimBackend(profile, {}, seed=1, stream="bench")
    total_us = sum(float((sim.ground_truth(prob, k.params, sizes) + 50.0).sum()) for k in kernels)
    return total_us * (1 + reps) * 1.5 / 1e6


def split(log: Path, wall: float) -> tuple[float, float]:
    m = STEP.search(log.read_text(errors="replace"))
    start = float(m.group(1)) if m else float("nan")
    return start, wall - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=32, help="kernels in the generation")
    ap.add_argument("--batch", type=int, default=32, help="kernels per Tensile invocation")
    ap.add_argument("--client-seconds", type=float, default=None, help="measured client time per batch")
    args = ap.parse_args()
    python = os.environ.get("OTO_TENSILE_PYTHON") or tensile_python_from_path()
    if not python:
        print("Tensile not installed (set OTO_TENSILE_PYTHON or put `Tensile` on PATH): nothing measured.")
        return 0
    profile = yaml.safe_load((REPO / "arch_profiles" / "gfx90c.yaml").read_text())
    lib = Library.parse(LIBRARY)
    prob = Problem(lib, profile, problem_type(LIBRARY))
    kernels = shipped_kernels(args.kernels)
    rows = []
    with tempfile.TemporaryDirectory(prefix="oto-tensile-bench-") as tmp:
        cache = Path(tmp) / "results" / "asmcache.yaml"
        cfg = {"python": python, "asm_cache": str(cache), "batch_size": args.batch}
        be = TensileBackend(profile, cfg, "bench")
        # 1. cold: one kernel, no cache yet
        t0 = time.perf_counter()
        be.build(prob, kernels[:1], Path(tmp) / "cold")
        wall = time.perf_counter() - t0
        log = next((Path(tmp) / "cold" / "tensile").glob("*/tensile-build.log"))
        rows.append(("cold (probe, writes cache)", 1, wall, *split(log, wall)))
        # 2. warm: the generation's kernels in batches, cache reused
        t0 = time.perf_counter()
        res = be.build(prob, kernels, Path(tmp) / "warm")
        gen_wall = time.perf_counter() - t0
        for log in sorted((Path(tmp) / "warm" / "tensile").glob("*/tensile-build.log")):
            text = log.read_text(errors="replace")
            secs = float(re.search(r"seconds=([0-9.]+)", text).group(1))
            n = len(re.findall(r"ThreadTile", (log.parent / "config-build.yaml").read_text())) or args.batch
            rows.append((f"warm batch {log.parent.name}", n, secs, *split(log, secs)))
    ok = sum(r.status == "ok" for r in res)
    print(f"Tensile via {python}; {len(kernels)} kernels ({ok} built), batch {args.batch}\n")
    print(f"{'run':42s} {'kernels':>7s} {'wall s':>8s} {'start-up s':>10s} {'work s':>8s}")
    for name, n, wall, start, work in rows:
        print(f"{name:42s} {n:7d} {wall:8.1f} {start:10.1f} {work:8.1f}")
    warm = [r for r in rows[1:]]
    start_total = sum(r[3] for r in warm)
    # measurement runs: same number of invocations, same warm start-up, plus client time
    n_inv = len(warm)
    client = args.client_seconds
    if client is None:
        client = projected_client_seconds(profile, prob, kernels, reps=5) / n_inv
        print(f"(measurement client time projected from the simulated GPU: {client:.0f} s per batch)")
    generation = gen_wall + n_inv * (start_total / n_inv + client)
    share = 2 * start_total / generation
    cold_share = 2 * n_inv * rows[0][3] / (generation - 2 * start_total + 2 * n_inv * rows[0][3])
    print(
        f"\ngeneration (build measured + measure projected): {generation:.0f} s; start-up with cache "
        f"{2 * start_total:.1f} s = {share:.1%} (target < 5%); without cache it would be {cold_share:.1%}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Reading a big workload file: what a dry-run pays once per run for ``deck.workload`` (or a workload deck).

Writes the same application's GEMMs in each form oto reads (``--lines`` calls, sizes drawn with a fixed seed
from a few hundred shapes): a ``ROCBLAS_LAYER=2`` bench log (one line per call), a ``ROCBLAS_LAYER=4``
profile (one entry per line, its ``call_count`` 3) and a PyTorch TunableOp untuned file, and times
``oto.deck.workload.read_workload`` on each (the parse cache off: what the first dry-run of a file pays).
No target; the figure is compared as a ratio within one run (``--tree`` times another checkout's parser
on the same files).

    python bench/workload_parse_bench.py [--lines 50000] [--repeat 3] [--tree DIR]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_files(folder: Path, lines: int, seed: int = 1) -> dict[str, Path]:
    rng = random.Random(seed)
    dims = [64, 96, 128, 256, 384, 512, 768, 1024, 2048]
    bench, profile, tunableop = [], [], []
    for _ in range(lines):
        m, n, k = rng.choice(dims), rng.choice(dims), rng.choice(dims)
        bench.append(
            f"./rocblas-bench -f gemm -r f32_r --transposeA N --transposeB N -m {m} -n {n} -k {k} --alpha 1 "
            f"--lda {m} --ldb {k} --beta 0 --ldc {m}"
        )
        profile.append(
            f"- {{ rocblas_function: \"rocblas_sgemm\", atomics_mode: 1, transA: 'N', transB: 'N', M: {m}, "
            f"N: {n}, K: {k}, alpha: 1.0, lda: {m}, ldb: {k}, beta: 0.0, ldc: {m}, call_count: 3 }}"
        )
        tunableop.append(f"GemmTunableOp_float_NN,nn_{m}_{n}_{k}_ld_{m}_{k}_{m}")
    out = {}
    for name, text in (("bench.log", bench), ("profile.yaml", profile), ("untuned.csv", tunableop)):
        out[name] = folder / name
        out[name].write_text("\n".join(text) + "\n")
    return out


TIMER = """
import sys, time
sys.path.insert(0, {workflow!r})
from pathlib import Path
from oto.deck import workload
workload.CACHE = None
t = time.perf_counter()
w = workload.read_workload(Path({path!r}))
print(time.perf_counter() - t, len(w.gemms), w.weight, len(w.problems))
"""


def timed(tree: Path, path: Path) -> tuple[float, str]:
    """One parse of ``path`` by ``tree``'s parser in a fresh interpreter: (seconds, what it read)."""
    code = TIMER.format(workflow=str(tree / "workflow"), path=str(path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = proc.stdout.split()
    return float(out[0]), f"{out[1]} GEMMs, {out[2]} calls, {out[3]} problems"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3, help="parses per file and tree; the fastest is reported")
    ap.add_argument("--tree", type=Path, help="another checkout whose parser is timed on the same files")
    args = ap.parse_args(argv)
    trees = [("this tree", REPO)] + ([("--tree", args.tree)] if args.tree else [])
    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(Path(tmp), args.lines)
        print(f"workload parse bench: {args.lines} lines per file, fastest of {args.repeat}, cache off\n")
        print("| file | " + " | ".join(f"{n} (s)" for n, _ in trees) + " | what was read |")
        print("|---|" + "---|" * (len(trees) + 1))
        for name, path in files.items():
            # the trees take turns, so a load that comes and goes falls on both alike
            runs = [[timed(tree, path) for _, tree in trees] for _ in range(args.repeat)]
            best = [min(r[t][0] for r in runs) for t in range(len(trees))]
            read = statistics.mode(run[1] for rs in runs for run in rs)
            print(f"| {name} | {' | '.join(f'{b:.2f}' for b in best)} | {read} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""One budgeted generation's decision at many libraries: before and after the budget job (issue #31).

Before (commit 851acdb), every mutate job of a budgeted generation g >= 1 read every library's deck.yaml,
gen g-1 selection.yaml and every samples.csv so far, and allocated alone: one decision per library, each as
dear as the whole. Now one budget job per generation decides for all (``generation_budget``, written to
budget/gen<g>.yaml) and each mutate job reads its own entry (``read_budget``). On a finished results folder
(read only; the budget file is written to a temporary folder), times with ``time.perf_counter``:

* the decision from the files (what the budget job does, and what each mutate job did before), ``--repeat``
  times, the median;
* the budget job's writing of its file, and one mutate job's reading of it (the median of ``--repeat``);
* with ``--old-checkout DIR`` (a checkout of 851acdb), the old per-job decision itself
  (``oto.measurement.budget.starved_reason`` of that checkout, in a fresh Python), for one library;

and prints per generation: before = libraries × the old decision, after = one budget job + libraries × one
read. Both exclude a job's start-up (the same for both; bench/RESULTS.md has it per job).

    python bench/budget_job_bench.py --results /tmp/fulldeck/equal/results/gfx90c --generation 2 \\
        [--hours 1.26] [--max-generations 4] [--repeat 3] [--old-checkout DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from oto.files import write_yaml  # noqa: E402
from oto.measurement.budget import BudgetInputs, generation_budget  # noqa: E402
from oto.measurement.budget_file import read_budget, starved_reason  # noqa: E402

# The old per-job decision, run in a fresh Python on the old checkout's package (argv: checkout, inputs json).
OLD_DECISION = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/workflow")
from oto.measurement.budget import BudgetInputs, starved_reason
a = json.loads(Path(sys.argv[2]).read_text())
inputs = BudgetInputs(a["hours"], *([Path(p) for p in a[k]] for k in ("decks", "selections", "samples")))
start = time.perf_counter()
reason = starved_reason(a["library"], a["generation"], inputs, a["max_generations"])
print(json.dumps({"seconds": time.perf_counter() - start, "reason": reason}))
"""


def inputs(results: Path, generation: int, hours: float) -> tuple[list[str], BudgetInputs]:
    """The files rule budget reads for ``generation`` (rules/common.smk ``budget_inputs``), by library."""
    libs = sorted(p.parent.name for p in results.glob("*/deck.yaml"))
    return libs, BudgetInputs(
        hours,
        [results / lib / "deck.yaml" for lib in libs],
        [results / lib / f"gen{generation - 1}" / "selection.yaml" for lib in libs],
        [results / lib / f"gen{g}" / "samples.csv" for lib in libs for g in range(generation)],
    )


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=Path, required=True, help="a results/<arch> folder with gen<g-1> done")
    ap.add_argument("--generation", type=int, default=2)
    ap.add_argument("--hours", type=float, default=1.263564206578775)
    ap.add_argument("--max-generations", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--old-checkout", type=Path, help="a checkout of 851acdb: time its per-job decision too")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    libs, budget = inputs(args.results, args.generation, args.hours)
    size = sum(os.path.getsize(p) for p in (*budget.decks, *budget.selections, *budget.samples))
    print(
        f"{len(libs)} libraries, gen{args.generation}: {len(budget.samples)} samples.csv, "
        f"{size / 1e6:.1f} MB read"
    )
    decide, doc = timed(lambda: generation_budget(budget, args.generation, args.max_generations), args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"gen{args.generation}.yaml"
        write, _ = timed(lambda: write_yaml(path, doc), args.repeat)
        read, _ = timed(
            lambda: starved_reason(read_budget(path, args.generation, libs), libs[0]), args.repeat
        )
        file_kb = path.stat().st_size / 1e3
    out = {
        "libraries": len(libs),
        "generation": args.generation,
        "bytes_read": size,
        "decision_s": decide,
        "write_s": write,
        "read_s": read,
        "budget_file_kb": file_kb,
        "starved": sorted(k for k, a in doc["allocations"].items() if a["decision"] == "starved"),
    }
    if args.old_checkout:
        with tempfile.TemporaryDirectory() as tmp:
            spec = Path(tmp) / "inputs.json"
            spec.write_text(
                json.dumps(
                    {
                        "hours": args.hours,
                        "generation": args.generation,
                        "max_generations": args.max_generations,
                        "library": libs[0],
                        "decks": [str(p) for p in budget.decks],
                        "selections": [str(p) for p in budget.selections],
                        "samples": [str(p) for p in budget.samples],
                    }
                )  # fmt: skip
            )
            runs = [
                json.loads(
                    subprocess.run(
                        [sys.executable, "-c", OLD_DECISION, str(args.old_checkout), str(spec)],
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout  # fmt: skip
                )
                for _ in range(args.repeat)
            ]
        out["old_decision_s"] = statistics.median(r["seconds"] for r in runs)
        new_reason = starved_reason(doc, libs[0])
        out["old_reason_matches"] = all(r["reason"] == new_reason for r in runs)
    old = out.get("old_decision_s", decide)
    before, after = len(libs) * old, decide + write + len(libs) * read
    out.update(before_s=before, after_s=after)
    print(
        f"decision from the files {decide:.2f} s (median of {args.repeat}); budget file {file_kb:.1f} kB: "
        f"written in {write * 1e3:.1f} ms, read by one mutate job in {read * 1e3:.1f} ms"
    )
    if "old_decision_s" in out:
        print(
            f"old per-job decision (851acdb, {args.old_checkout}): {out['old_decision_s']:.2f} s, the same "
            f"reason for {libs[0]}: {out['old_reason_matches']}"
        )
    print(
        f"per generation: before {len(libs)} × {old:.2f} s = {before:.1f} s; after {decide:.2f} + "
        f"{write:.3f} + {len(libs)} × {read:.4f} s = {after:.2f} s (ratio {before / after:.1f})"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``oto override``: the best shipped kernel for every GEMM of a workload, written as rocBLAS's
``ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH`` file for a stock install (:mod:`oto.deck.override` has the format and
the selection, :mod:`oto.deck.workload` the workload files).

Each size is decided by measured times where ``--measured`` gives any, else by the simulated GPU of
``--profile``; the file's header and the summary say which numbers chose the kernels, and a simulated choice
is a model's guess until measured on the GPU."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oto.deck.model import DeckError
from oto.deck.override import Scorer, plan_override, read_measured_csv, workload_gemms, write_override
from oto.deck.sources import deck_from_rocblas_dir
from oto.deck.workload import FORMATS, WorkloadError, read_workload
from oto.hardware.profile import ProfileError, load_profile, profile_argument
from oto.hardware.simulated.scorer import SimulatedScorer
from oto.tensile.dat_reader import DatFileError
from oto.tensile.labels import StockLibrary


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="oto override",
        description="Write rocBLAS's override file: per GEMM of your workload, the fastest kernel your "
        "installed rocBLAS already ships (no new library needed). Use it with "
        "`export ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH=FILE`; undo with "
        "`unset ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH`.",
    )
    ap.add_argument(
        "--workload",
        required=True,
        action="append",
        type=Path,
        help="a TunableOp untuned or results CSV, or a rocBLAS bench log or profile YAML (repeatable)",
    )
    ap.add_argument("--format", choices=FORMATS, default="auto", help="the workload files' format")
    ap.add_argument(
        "--deck",
        required=True,
        type=Path,
        help="the installed rocBLAS library folder (e.g. /opt/rocm/lib/rocblas/library): its kernels and "
        "their solution indices",
    )
    ap.add_argument(
        "--arch",
        help="the arch whose library rocBLAS loads (default: the --profile GPU's stock library, the one its "
        "owners run spoofed: gfx900 for a gfx90c under HSA_OVERRIDE_GFX_VERSION=9.0.0, gfx1100 for a "
        "gfx1103; one of the two is needed)",
    )
    ap.add_argument(
        "--profile",
        help="arch profile of the simulated GPU that times the kernels: a file or an arch (gfx1103)",
    )
    ap.add_argument("--seed", type=int, default=0, help="the simulated GPU's seed")
    ap.add_argument(
        "--measured",
        type=Path,
        help="CSV of measured times (library,M,N,B,K,solution_index,time_us); they decide where they exist",
    )
    ap.add_argument("--out", required=True, type=Path, help="the override file to write")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    if not (args.arch or args.profile):
        # no default: gfx900's library read for a 780M's workload would pick kernels its rocBLAS never loads
        ap.error(
            "give --profile (your GPU: an arch name or a profile file) or --arch (the arch whose library "
            "rocBLAS loads: gfx900 for a gfx90c run as 9.0.0, gfx1100 for a gfx1103 run as 11.0.0)"
        )

    try:
        profile = load_profile(profile_argument(args.profile)) if args.profile else None
        runs = StockLibrary.of(profile) if profile else None  # the library the GPU's owners run
        arch = args.arch or runs.arch
        workloads = [read_workload(p, args.format) for p in args.workload]
        deck = deck_from_rocblas_dir(args.deck, arch)
        scorers: list[Scorer] = []
        if args.measured:
            scorers.append(read_measured_csv(args.measured))
        if profile is not None:
            scorers.append(SimulatedScorer(profile, args.seed))
        if not scorers:
            ap.error("give --profile (the simulated GPU) or --measured (a CSV of measured times), or both")
        gemms, uncovered = workload_gemms(workloads)
        plan = plan_override(gemms, deck, scorers, uncovered)
    except (WorkloadError, DeckError, DatFileError, ProfileError) as exc:
        print(f"oto override: {exc}", file=sys.stderr)
        return 1

    for w in workloads:
        print(w.summary(uncovered=False))  # the plan's list below holds them
    if not plan.lines:
        print(
            f"oto override: no GEMM of the workload has a shipped kernel; {args.out} not written",
            file=sys.stderr,
        )
        return 1
    kinds = ", ".join(plan.numbers)
    notes = sorted({c.label for c in plan.choices.values()})
    if "simulated" in plan.numbers:
        notes.append("simulated choices are a model's guess: measure on the GPU before relying on them")
    write_override(args.out, plan, notes)
    changed = sum(c.changes_pick for c in plan.choices.values())
    print(
        f"{args.out}: {len(plan.lines)} override lines for {len(plan.choices)} library sizes "
        f"({changed} differ from rocBLAS's own pick); numbers: {kinds}"
    )
    for lib, (stock, chosen) in sorted(plan.saved().items()):
        if stock > 0:
            saved = 1 - chosen / stock
            print(f"  {lib}: weighted time {stock:.1f} -> {chosen:.1f} us ({kinds}), {saved:.1%} saved")
    for u in plan.uncovered:
        print(f"  uncovered: {u.where}: {u.what} (weight {u.weight}): {u.reason}")
    for lib, size, weight, why in plan.unsolved:
        print(f"  no kernel: {lib} {list(size)} (weight {weight}): {why}")
    if "simulated" in plan.numbers:
        print("  the simulated GPU chose these kernels: measure on your GPU before relying on them")
    print(f"use: export ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH={args.out.resolve()}")
    if runs is not None and arch == runs.arch and runs.arch != profile["arch"]:  # a spoofed library
        override = runs.hsa_override_gfx_version
        print(f"  (with HSA_OVERRIDE_GFX_VERSION={override}: rocBLAS loads {arch}'s library)")
    print("undo: unset ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH")
    return 0

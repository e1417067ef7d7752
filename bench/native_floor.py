"""The native floor on upstream's own logic folder for a GPU (issue #30): what the files hold and how the
floor reads them, on the simulated GPU.

    python bench/native_floor.py [--native FOLDER] [--arch gfx1103] [--sizes 32]

FOLDER is a copy of upstream's ``Tensile/Logic/asm_full/<arch>`` (ROCm/rocm-libraries, projects/rocblas/...;
default ``$OTO_NATIVE_LOGIC`` or ``/work/data/native/<arch>``). oto ships none and this bench keeps none: it
says so and exits 0 when the folder is absent. For every logic file of the folder whose library the arch's
spoof deck holds, it prints what the file holds (schedule, architecture, device ids, solutions, exact rows,
the efficiency field), plans a run of that library with ``deck.native_floor`` pointing at the folder as the
workflow does (:func:`oto.run.plan.plan_run`, :func:`oto.deck.sources.load_run_deck`), checks each native
kernel against the arch's legality, and times the native floor against the spoof floor at the library's
tuning sizes on the **simulated** GPU (noise-free): ``native / spoof`` time > 1 means the spoof floor is
faster.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from oto.deck.sources import load_run_deck  # noqa: E402
from oto.deck.tuning_sizes import tuning_indices  # noqa: E402
from oto.gemm import Library  # noqa: E402
from oto.hardware.profile import load_profile  # noqa: E402
from oto.hardware.simulated.performance import SimGPU  # noqa: E402
from oto.measurement.selection import geomean  # noqa: E402
from oto.run.plan import plan_run  # noqa: E402
from oto.tensile import legality  # noqa: E402
from oto.tensile.logic_reader import read_logic_file  # noqa: E402
from oto.tensile.params import short_name  # noqa: E402


def native_folder(arch: str, given: str | None) -> Path:
    return Path(given or os.environ.get("OTO_NATIVE_LOGIC") or f"/work/data/native/{arch}")


def describe(path: Path) -> list[str]:
    """What a native logic file holds, as oto's logic reader reads it."""
    lf = read_logic_file(path)
    names = [s.get("SolutionNameMin") or "unnamed" for s in lf.solutions]
    waves = sorted({int(s.get("WavefrontSize", 64)) for s in lf.solutions})
    return [
        f"{path.name}: schedule {lf.schedule!r}, architecture {lf.architecture!r}, "
        f"devices {lf.device_names}, Tensile >= {lf.minimum_required_version}",
        f"  {len(lf.solutions)} solution(s) {names} (wave{'/'.join(map(str, waves))}), "
        f"{len(lf.exact_rows)} exact row(s) of {lf.key_length} numbers, metric {lf.perf_metric}: "
        + ", ".join(f"{list(r[0])} -> solution {r[1]} at {r[2]:g}" for r in lf.exact_rows[:3]),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--native", default=None, help="upstream's logic folder for the arch")
    ap.add_argument("--arch", default="gfx1103")
    ap.add_argument("--sizes", type=int, default=32, help="tuning sizes per library")
    args = ap.parse_args(argv)
    folder = native_folder(args.arch, args.native)
    files = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if not files:
        print(f"native floor bench: no logic files in {folder}: nothing to read (copy upstream's there)")
        return 0
    profile = load_profile(ROOT / "arch_profiles" / f"{args.arch}.yaml")
    limits = legality.Limits.from_profile(profile)
    gpu = SimGPU(profile, seed=1)
    prefix = f"{args.arch}_"
    libraries = [f.stem.removeprefix(prefix) for f in files if f.stem.startswith(prefix)]
    print(f"native floor bench: {folder} ({len(files)} file(s)), {args.arch}, simulated GPU, noise-free\n")
    for f in files:
        print("\n".join(describe(f)))
    cfg = {
        "arch": args.arch,
        "families": sorted({Library.parse(name).family.code for name in libraries}),
        "deck": {"native_floor": {"path": str(folder)}},
    }
    plan = plan_run(cfg)
    _, deck, _ = load_run_deck(plan.deck, plan.libraries)
    print(
        "\n| library | native kernel(s) | legal here | tuning sizes | native / spoof floor time, geomean "
        "| min | max | 1024^3 (if a deck size) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    geomeans: list[float] = []
    for name in libraries:
        lib = deck.libraries.get(name)
        if lib is None or lib.native_floor is None:
            print(f"| {name} | not in the {args.arch} deck or no native floor attached | | | | | | |")
            continue
        idx = tuning_indices(lib.sizes, args.sizes)
        native = lib.native_references(idx, limits)
        spoof = lib.references(idx, limits)
        kernels = sorted({short_name(r["params"]) for r in native.values()})
        legal = all(legality.check(Library.parse(name), r["params"], limits).valid for r in native.values())
        ratios = []
        for i in idx:
            m, n, b, k = lib.sizes[i][:4]
            t_native = gpu.true_time_us(lib.family, native[i]["params"], m, n, b, k, lib.pattern)
            t_spoof = gpu.true_time_us(lib.family, spoof[i]["params"], m, n, b, k, lib.pattern)
            ratios.append(float(np.asarray(t_native) / np.asarray(t_spoof)))
        geo = geomean(ratios)
        at = next((i for i, s in enumerate(lib.sizes) if list(s[:4]) == [1024, 1024, 1, 1024]), None)
        big = ""
        if at is not None:
            one, ref = lib.native_references([at], limits), lib.references([at], limits)
            t_n = float(gpu.true_time_us(lib.family, one[at]["params"], 1024, 1024, 1, 1024, lib.pattern))
            t_s = float(gpu.true_time_us(lib.family, ref[at]["params"], 1024, 1024, 1, 1024, lib.pattern))
            big = f"{t_n / 1000:.2f} ms vs {t_s / 1000:.2f} ms ({t_n / t_s:.2f}x)"
        shown = ", ".join(kernels) if len(kernels) <= 2 else f"{len(kernels)} kernels, e.g. {kernels[0]}"
        print(
            f"| {name} | {shown} | {'yes' if legal else 'NO'} | {len(idx)} | {geo:.2f}x "
            f"| {min(ratios):.2f}x | {max(ratios):.2f}x | {big} |"
        )
        geomeans.append(geo)
    if geomeans:
        slower = sum(1 for g in geomeans if g > 1)
        print(
            f"\n{len(geomeans)} libraries: native / spoof floor time, geomean over them "
            f"{geomean(geomeans):.2f}x; the native floor is slower in "
            f"{slower} of {len(geomeans)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``oto predict``: what the simulated GPU expects at one size, for the spoof kernel, the best shipped kernel
and a given kernel (GFLOPS, % of peak, the limiting bound), so a tester can compare a real figure with the
model in one line. Like ``oto plan`` it reads the model, never a GPU; every line says so."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml


def main(argv: Sequence[str]) -> int:
    from oto.gemm import FamilyCodeError, Library
    from oto.hardware.profile import ProfileError, profile_argument, validate_profile
    from oto.hardware.simulated.performance import MODEL_VERSION, SimGPU
    from oto.hardware.simulated.predict import best_of, predict

    ap = argparse.ArgumentParser(
        prog="oto predict",
        description="Print what the simulated GPU expects at one size: the spoof kernel (the shipped "
        "solution the library picks there), the best shipped kernel, and a given kernel: GFLOPS, % of peak "
        "and the bound that limits it. Numbers are simulated (docs/simulator.md).",
    )
    ap.add_argument(
        "--profile",
        required=True,
        help="arch or device profile file (a calibrated one included), or an arch: arch_profiles/ARCH.yaml",
    )
    ap.add_argument("--library", required=True, help="library, e.g. Cijk_Ailk_Bljk_HB")
    ap.add_argument("--size", required=True, help="M,N,B,K")
    ap.add_argument("--kernel", help="a kernel's parameters: JSON text, or a JSON/YAML file")
    ap.add_argument(
        "--logic",
        help="folder of logic files of the shipped kernels (default: the deck oto ships of the library the "
        "profile's owners run, its stock_library: vega10's for gfx90c, navi31's for gfx1103)",
    )
    ap.add_argument("--seed", type=int, default=0, help="the simulated chip's seed (default 0)")
    args = ap.parse_args(argv)
    try:
        size = [float(x) for x in args.size.split(",")]
        if len(size) != 4 or min(size) < 1:
            raise ValueError
    except ValueError:
        ap.error(f"--size: {args.size!r} is not M,N,B,K (four numbers, each at least 1)")
    try:
        lib = Library.parse(args.library)
        profile_file = profile_argument(args.profile)
        profile = validate_profile(yaml.safe_load(profile_file.read_text()), str(profile_file))
        shipped, spoof, source = _shipped(lib.name, args.logic, size, profile["stock_library"]["arch"])
        given = _kernel(args.kernel) if args.kernel else None
    except (FamilyCodeError, ProfileError, ValueError, OSError, KeyError, yaml.YAMLError) as exc:
        print(f"oto predict: {exc}", file=sys.stderr)
        return 2
    gpu = SimGPU(profile, seed=args.seed)
    where = f"{args.library} at {','.join(str(int(x)) for x in size)} on {profile['arch']} ({profile_file})"
    print(f"oto predict: {where}; SIMULATED (model {MODEL_VERSION}), not measured; shipped kernels: {source}")
    rows = []
    if spoof is not None:
        rows.append(predict(gpu, lib, spoof, size, "spoof"))
    if shipped:
        rows.append(best_of(gpu, lib, shipped, size, "best shipped"))
    if given is not None:
        rows.append(predict(gpu, lib, given, size, "given kernel"))
    for row in rows:
        print(row.line())
    return 0


def _shipped(
    library: str, logic: str | None, size: list[float], stock_arch: str
) -> tuple[list[dict], dict | None, str]:
    """The library's shipped kernels, the one it picks at ``size`` (nearest row in log size) and where they
    came from: ``logic``, or else the manifest oto ships of ``stock_arch``'s library (the spoof the owners
    run)."""
    import numpy as np

    from oto.hardware.simulated.predict import nearest_row

    if logic:
        from oto.hardware.simulated.calibration import load_recorded

        files = [f for f in load_recorded(logic) if f.library.name == library]
        if not files:
            raise ValueError(f"{logic}: no logic file of {library}")
        f = files[0]
        built = f.solutions_as_built()
        return built, built[f.winner[nearest_row(f.sizes, size)]], str(logic)
    from oto.deck.sources import read_manifest, shipped_manifest

    manifest = shipped_manifest(stock_arch)
    deck = read_manifest(manifest, checked=[library]).libraries.get(library)
    if deck is None:
        raise ValueError(
            f"library {library} is not in {manifest.name}, {stock_arch}'s shipped deck (try --logic DIR)"
        )
    kernels = [s["params"] for s in deck.solutions]
    row = nearest_row(np.array(deck.sizes, dtype=float)[:, :4], size)
    return kernels, kernels[int(deck.shipped[row][0])], f"{stock_arch}'s shipped deck ({manifest.name})"


def _kernel(text: str) -> dict:
    path = Path(text)
    data = yaml.safe_load(path.read_text()) if path.is_file() else json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"--kernel: {text!r} is not a mapping of Tensile parameters")
    return data.get("params", data)

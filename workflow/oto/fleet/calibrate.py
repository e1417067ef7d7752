"""``oto calibrate --bundles DIR --arch A``: a device's chip constants, fitted to the races measured on it.

A tester's bundle holds what a shipped logic file never does: every candidate's time at every tuning size
(the registry records ``benchmarked`` with status ``ok``; failures and timings flagged ``bad_timing`` never
are). The bundles are read through the merge's checked intake (:func:`oto.fleet.intake.open_bundle`), grouped
by device, and each device's sizes are split in two (:func:`held_out_sizes`): the chip constants of its
device profile are fitted to the races at the fit sizes with the physics held
(:func:`oto.hardware.simulated.calibration.fit`, only the constants these races pin down:
:func:`identifiable`), and judged on the held-out sizes — the share of kernel pairs at a size the model orders
as measured, and the measured winner's rank under the model, before and after (:func:`race_agreement`).
Simulated races are fitted and judged on the virtual chip that ran them (:func:`chip_seed`).

The calibrated device profile names the bundles it came from (``calibration.inputs``) and goes to
``results/<arch>/calibrated/<device id>.yaml`` (``--out``): the runs, ``oto plan`` and the tester's next night
read it through the config's ``device_profile``, the merge reads it for that device's ceilings
(:func:`calibrated_profiles`). A device with too few races, a fit that does not converge, or one that drives a
constant to a bound, is reported and gets no profile (docs/simulator.md, "A chip's own constants").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from oto.fleet.intake import Accepted, Expect, Rejected, open_bundle
from oto.gemm import Library
from oto.hardware.device_profile import DeviceProfileError, check_device_profile
from oto.hardware.profile import ProfileError, load_profile, profile_path, validate_profile

if TYPE_CHECKING:  # the fit (and pandas) loads only when a device is calibrated, not when the tester or the
    from oto.hardware.simulated.calibration import FitResult, Knob, RecordedFile  # merge read a profile
    from oto.hardware.simulated.performance import Physics, SimGPU

CALIBRATED = "calibrated"  # results/<arch>/calibrated/<device id>.yaml
TIE = 0.02  # measured times closer than this (relative) order no pair
MIN_SENSITIVITY = 0.05  # RMS d log(time) / d log(constant) over the races below which a constant is held
MAX_RELATIVE_ERROR = 0.05  # a fitted constant these races determine less well than this is held instead


@dataclass
class Race:
    """The measured races of one library on one device: every kernel's time at every size it ran."""

    library: Library
    kernels: list[dict[str, Any]]  # parameters, by index
    sizes: np.ndarray  # (rows, 4) M, N, batch, K
    kernel: np.ndarray  # (rows,) index into kernels
    time_us: np.ndarray  # (rows,) measured (drift-normalised) time

    def size_keys(self) -> list[str]:
        return [",".join(str(int(x)) for x in s) for s in self.sizes]

    def as_recorded(self, rows: np.ndarray) -> RecordedFile:
        """The rows as a RecordedFile (each row's "winner" is the kernel it timed), for the fit."""
        from oto.hardware.simulated.calibration import RecordedFile

        sizes = self.sizes[rows]
        m, n, b, k = sizes.T
        gflops = 2 * m * n * b * k / self.time_us[rows] / 1e3  # read back with 2 flops per MAC: the time
        return RecordedFile(
            self.library.name, self.library, self.kernels, np.ones((len(self.kernels), 3), dtype=np.int64),
            sizes, self.kernel[rows], gflops, np.zeros(len(rows), dtype=np.int64),
            np.zeros(len(self.kernels), dtype=np.int64), tensile_flops_per_mac=2,
        )  # fmt: skip


def races_of(bundles: Sequence[Accepted]) -> list[Race]:
    """Every benchmarked, ok record of the bundles (one device's), per library."""
    per: dict[str, dict[str, Any]] = {}
    for b in bundles:
        for lib, records in sorted(b.records.items()):
            r = per.setdefault(lib, {"kernels": {}, "rows": []})
            for rec in records:
                if rec.get("kind") != "benchmarked" or rec.get("status") != "ok":
                    continue  # failed launches, hangs, validation failures, timings flagged bad_timing
                t = rec.get("time_us")
                if not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
                    continue
                params = json.loads(rec["params"]) if isinstance(rec["params"], str) else rec["params"]
                idx = r["kernels"].setdefault(rec["kernel_id"], (len(r["kernels"]), params))[0]
                r["rows"].append(([int(x) for x in str(rec["size"]).split(",")], idx, float(t)))
    out = []
    for lib, r in sorted(per.items()):
        if not r["rows"]:
            continue
        kernels = [p for _, p in sorted(r["kernels"].values(), key=lambda ip: ip[0])]
        sizes = np.array([row[0] for row in r["rows"]], dtype=np.float64)
        out.append(
            Race(Library.parse(lib), kernels, sizes, np.array([row[1] for row in r["rows"]]),
                 np.array([row[2] for row in r["rows"]]))
        )  # fmt: skip
    return out


def held_out_sizes(race: Race) -> np.ndarray:
    """(rows,) bool: the rows at the library's held-out sizes. A library's sizes, ordered by the SHA-256 of
    "<library> <M,N,B,K>", alternate fit, held out, fit, ...: fixed before any fit, never chosen by one."""
    keys = race.size_keys()
    order = sorted(set(keys), key=lambda s: hashlib.sha256(f"{race.library.name} {s}".encode()).hexdigest())
    held = set(order[1::2])
    return np.array([k in held for k in keys])


def race_agreement(gpu: SimGPU, races: Sequence[Race], rows: Sequence[np.ndarray]) -> dict[str, Any]:
    """On the given rows of each race: the share of kernel pairs at a size (measured more than TIE apart)
    that the model orders as measured, and the measured winner's rank among the size's kernels under the
    model (share of them simulated faster; 0 = first), median over sizes."""
    agree = pairs = 0
    ranks = []
    for race, sel in zip(races, rows, strict=True):
        idx = np.flatnonzero(sel)
        if not len(idx):
            continue
        sim = np.empty(len(idx))
        fam, pat = race.library.family, race.library.pattern
        for kk in np.unique(race.kernel[idx]):
            at = race.kernel[idx] == kk
            m, n, b, k = race.sizes[idx[at]].T
            sim[at] = gpu.true_time_us(fam, race.kernels[kk], m, n, b, k, pat)
        keys = np.array(race.size_keys())[idx]
        for key in np.unique(keys):
            at = keys == key
            meas, model = race.time_us[idx][at], sim[at]
            if len(meas) < 2:
                continue
            i, j = np.triu_indices(len(meas), 1)
            apart = np.abs(np.log(meas[i] / meas[j])) > math.log1p(TIE)
            pairs += int(apart.sum())
            agree += int((np.sign(meas[i] - meas[j]) == np.sign(model[i] - model[j]))[apart].sum())
            w = int(np.argmin(meas))
            ranks.append(float(np.sum(model < model[w]) / (len(meas) - 1)))
    return {
        "pairs": pairs,
        "pair_agreement": agree / pairs if pairs else float("nan"),
        "sizes": len(ranks),
        "winner_rank_pct_median": float(np.median(ranks) * 100) if ranks else float("nan"),
    }


def identifiable(
    files: Sequence[RecordedFile],
    profile: Mapping[str, Any],
    physics: Physics,
    knobs: Sequence[Knob],
    chip_seed: int = 0,
) -> tuple[list[Knob], dict[str, float]]:
    """The knobs these races pin down: RMS over the rows of d log(simulated time) / d log(constant), at the
    profile's own figures, of at least MIN_SENSITIVITY (a 10% error in the constant moves the times by 0.5%
    RMS or more); the rest are held at the profile's figures. ``chip_seed``: :func:`chip_seed`."""
    from oto.hardware.simulated.calibration import get_value, winner_times, with_values
    from oto.hardware.simulated.performance import SimGPU

    def times(prof: Mapping[str, Any]) -> np.ndarray:
        gpu = SimGPU(prof, chip_seed, physics=physics)
        return np.concatenate([np.log(winner_times(gpu, f)) for f in files])

    base = times(profile)
    sens, keep = {}, []
    for k in knobs:
        v = get_value(k.name, physics, profile)
        step = 0.05 if v * 1.05 <= k.hi else -0.05
        _, prof = with_values([k.name], [v * (1 + step)], physics, profile)
        sens[k.name] = float(np.sqrt(np.mean(((times(prof) - base) / math.log1p(step)) ** 2)))
        if sens[k.name] >= MIN_SENSITIVITY:
            keep.append(k)
    return keep, sens


def chip_seed(bundles: Sequence[Accepted]) -> int | None:
    """The virtual chip a device's races are simulated on for the fit and its grading. Simulated races ran on
    the SimGPU of their run's seed, which picks the per-configuration ruggedness: judged on another seed they
    are another chip's (bench/RESULTS.md, "Correction: the noise-free figures above were another virtual
    chip's"); the seed is the one their finals' provenance names, None when they name none or several.
    Measured races have no seed: 0, the model's own chip, as ``oto calibrate`` fits logic files."""
    if all(b.descriptor.get("numbers") != "simulated" for b in bundles):
        return 0
    seeds = {
        int(prov["seed"])
        for b in bundles
        for final in b.finals.values()
        if isinstance(prov := final.get("provenance"), Mapping) and prov.get("seed") is not None
    }
    return seeds.pop() if len(seeds) == 1 else None


@dataclass
class DeviceCalibration:
    device: str
    bundles: list[Accepted]
    profile: dict[str, Any] | None  # the calibrated device profile (None: not written, see problems)
    result: FitResult | None
    knobs: list[Knob]
    sensitivity: dict[str, float]
    errors: dict[str, float]  # relative standard error of each constant when it was last fitted
    rows: int
    before: dict[str, Any]
    after: dict[str, Any]
    problems: list[str]


def calibrate_device(
    device: str,
    bundles: Sequence[Accepted],
    physics: Physics,
    iterations: int = 30,
    command: str = "",
    allow_bounds: bool = False,
) -> DeviceCalibration:
    """Fit one device's chip constants to its bundles' races at the fit sizes; judge on the held-out ones.
    ``allow_bounds``: a constant at its bound (a device that holds its peak clock, say) is named in the
    profile (``calibration.at_bound``) instead of refusing it; a fit that did not converge is always
    refused."""
    from oto.hardware.simulated.calibration import (
        MIN_CHIP_ROWS,
        at_bounds,
        calibrated_profile,
        chip_knobs,
        fit,
        fit_problems,
        relative_errors,
    )
    from oto.hardware.simulated.performance import SimGPU

    bundles = sorted(bundles, key=lambda b: b.created_at)
    # the device's facts as its latest night read them; one device at one operating point, a calibration of
    # its own (an arch profile's campaign points and calibration, gfx906's say, are not this device's)
    profile = dict(bundles[-1].profile)
    profile.pop("calibration", None)
    profile["timing"] = {k: v for k, v in (profile.get("timing") or {}).items() if k != "operating_points"}
    races = races_of(bundles)
    held = [held_out_sizes(r) for r in races]
    fit_files = [r.as_recorded(np.flatnonzero(~h)) for r, h in zip(races, held, strict=True) if (~h).any()]
    rows = sum(len(f.winner) for f in fit_files)
    empty = {"pairs": 0, "pair_agreement": float("nan"), "sizes": 0, "winner_rank_pct_median": float("nan")}
    seed = chip_seed(bundles)
    before = (
        race_agreement(SimGPU(profile, seed, physics=physics), races, held)
        if races and seed is not None
        else empty
    )
    calib = DeviceCalibration(device, list(bundles), None, None, [], {}, {}, rows, before, empty, [])
    if seed is None:
        seeds = sorted(
            {str((f.get("provenance") or {}).get("seed")) for b in bundles for f in b.finals.values()}
        )
        calib.problems.append(
            f"simulated bundles whose finals name no single seed (seeds: {', '.join(seeds) or 'no final'}): "
            "the virtual chip their races ran on is unknown, and another seed's is another chip"
        )
    if rows < MIN_CHIP_ROWS:
        calib.problems.append(
            f"{rows} measured races at the fit sizes: a chip fit needs at least {MIN_CHIP_ROWS} (the "
            f"learning curve, bench/RESULTS.md), {MIN_CHIP_ROWS - rows} more; tune more libraries, sizes or "
            "generations (benchmark.tuning_sizes, max_generations) or add the next night's bundle"
        )
    if calib.problems:
        return calib
    knobs, calib.sensitivity = identifiable(fit_files, profile, physics, chip_knobs(fit_files, profile), seed)
    while True:  # fit; hold the constant the races determine worst, if any is worse than MAX_RELATIVE_ERROR
        if not knobs:
            calib.problems.append("no chip constant moves these races' times enough to be fitted")
            return calib
        result = fit(
            fit_files,
            profile,
            physics,
            knobs=knobs,
            iterations=iterations,
            per_file=1_000_000,
            chip_seed=seed,
        )
        errors = relative_errors(fit_files, result.profile, physics, [k.name for k in knobs], seed)
        calib.errors.update(errors)
        worst = max(errors, key=errors.__getitem__)
        if errors[worst] <= MAX_RELATIVE_ERROR:
            break
        knobs = [k for k in knobs if k.name != worst]
    calib.knobs, calib.result = knobs, result
    calib.after = race_agreement(SimGPU(result.profile, seed, physics=physics), races, held)
    calib.problems = fit_problems(result, knobs)
    bounds = sorted(at_bounds(result.values, knobs))
    if calib.problems and not (allow_bounds and result.converged):
        return calib
    check = {
        "held_out_sizes": calib.after["sizes"],
        "held_out_pairs": calib.after["pairs"],
        "pair_agreement_before": _round(before["pair_agreement"]),
        "pair_agreement_after": _round(calib.after["pair_agreement"]),
        "winner_rank_pct_before": _round(before["winner_rank_pct_median"]),
        "winner_rank_pct_after": _round(calib.after["winner_rank_pct_median"]),
    }
    inputs = [{"name": b.path.name, "sha256": b.sha256} for b in bundles]
    numbers = "simulated" if any(b.descriptor.get("numbers") == "simulated" for b in bundles) else "measured"
    extra = {"device": device, "numbers": numbers, **({"at_bound": bounds} if bounds else {})}
    prof = calibrated_profile(
        result, knobs, source="bundles", inputs=inputs, command=command, check=check, extra=extra
    )
    calib.profile = prof
    return calib


def _round(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 4)


def calibrated_path(results: Path, arch: str, device: str) -> Path:
    return Path(results) / arch / CALIBRATED / f"{device}.yaml"


def calibrated_profiles(
    arch_dir: Path, arch_profile: Mapping[str, Any], numbers: str = "measured"
) -> dict[str, dict[str, Any]]:
    """Device id -> its calibrated device profile under ``<arch_dir>/calibrated/`` (checked against the arch
    profile; a file that fails the check is left out, with the reason on stderr; one fitted on simulated
    bundles only where the merge takes simulated ``numbers``)."""
    out = {}
    folder = Path(arch_dir) / CALIBRATED
    for path in sorted(folder.glob("d*.yaml")) if folder.is_dir() else []:
        try:
            prof = load_profile_file(path)
            check_device_profile(arch_profile, prof, str(path))
        except (ProfileError, DeviceProfileError) as exc:
            print(f"oto: ignoring the calibrated profile {path}: {exc}", file=sys.stderr)
            continue
        if prof["calibration"].get("numbers") == "simulated" and numbers != "simulated":
            print(f"oto: not using {path}: fitted on simulated bundles", file=sys.stderr)
            continue
        out[str(prof["device"]["id"])] = prof
    return out


def carry_calibration(
    device: Mapping[str, Any], path: Path, numbers: str = "measured"
) -> tuple[dict[str, Any], str | None]:
    """The tester's fresh device profile with the chip constants of its calibrated profile at ``path`` (the
    next night after ``oto calibrate --bundles``), when that profile was fitted on this device as it is now
    (same CUs, clock and memory) and on the kind of numbers this night takes (``numbers``: a fit on
    simulated bundles is for trying the command out, never a measured night's); with a line saying what was
    done, or None when there is no such file."""
    if not Path(path).is_file():
        return dict(device), None
    try:
        cal = load_profile_file(path)
    except ProfileError as exc:
        return dict(device), f"not using {path}: {exc}"
    fitted_on = cal["calibration"].get("numbers", "measured")
    if fitted_on == "simulated" and numbers != "simulated":
        return dict(device), f"not using {path}: it was fitted on simulated bundles, and this night measures"
    same = ("compute_units", "clock_mhz")
    facts = [cal.get(k) == device.get(k) for k in same] + [
        cal["memory"].get("peak_bandwidth_gbs") == device["memory"].get("peak_bandwidth_gbs"),
        (cal.get("device") or {}).get("id") == (device.get("device") or {}).get("id"),
    ]
    if not all(facts):
        return dict(device), f"not using {path}: it was calibrated on other device facts (CUs, clock, memory)"
    out = {**device, "timing": cal["timing"], "calibration": cal["calibration"]}
    out["memory"] = {**device["memory"], "sustained_bandwidth_gbs": cal["memory"]["sustained_bandwidth_gbs"]}
    return out, f"using the chip constants calibrated on this device's bundles ({path})"


def load_profile_file(path: Path) -> dict[str, Any]:
    """A profile whose file is named after its device, not its arch (validated, defaults filled in)."""
    import yaml

    return validate_profile(yaml.safe_load(Path(path).read_text()), str(path))


def main(argv: Sequence[str]) -> int:
    from oto.fleet.merge import MergeError, bundle_files
    from oto.hardware.simulated.calibration import write_fitted_profile
    from oto.hardware.simulated.performance import Physics, physics_file

    ap = argparse.ArgumentParser(
        prog="oto calibrate --bundles",
        description="Fit each device's chip constants to the measured races in its tester bundles (physics "
        "held), judge them on sizes the fit did not use, and write a calibrated device profile per device "
        "(docs/fleet.md, 'Calibrating a device').",
    )
    ap.add_argument("--bundles", required=True, nargs="+", help="bundle files or folders of bundles")
    ap.add_argument(
        "--arch", required=True, help="the arch of the devices (its arch profile checks the bundles)"
    )
    ap.add_argument(
        "--out", default="results", help="results folder: writes <out>/<arch>/calibrated/<device>.yaml"
    )
    ap.add_argument(
        "--numbers", choices=("measured", "simulated"), default="measured",
        help="which bundles to read (simulated: a simulated night, for trying the command out)",
    )  # fmt: skip
    ap.add_argument("--profiles", default="arch_profiles", help="folder of arch profiles")
    ap.add_argument("--iterations", type=int, default=30, help="Levenberg-Marquardt iterations at most")
    ap.add_argument("--json", default=None, help="write every device's figures here")
    ap.add_argument(
        "--allow-bounds",
        action="store_true",
        help="write a profile even when a constant ended at a bound (a device holding its peak clock, say); "
        "the profile names it (calibration.at_bound)",
    )
    args = ap.parse_args(argv)
    try:
        arch_profile = load_profile(profile_path(args.arch, args.profiles))
        files = bundle_files(args.bundles)
        physics = Physics.load(physics_file(arch_profile))  # the ISA family's: gfx9's or RDNA's
    except (ProfileError, MergeError, ValueError, OSError) as exc:
        print(f"oto calibrate: {exc}", file=sys.stderr)
        return 2
    expect = Expect(args.arch, arch_profile, args.numbers)
    by_device: dict[str, list[Accepted]] = {}
    for f in files:
        try:
            b = open_bundle(f, expect)
        except Rejected as exc:
            print(f"oto calibrate: {f}: rejected, nothing read from it: {exc}", file=sys.stderr)
            continue
        by_device.setdefault(b.device_id, []).append(b)
    if not by_device:
        print(f"oto calibrate: no {args.numbers} bundle of {args.arch} to calibrate from", file=sys.stderr)
        return 1
    command = "oto calibrate " + " ".join(argv)
    report, rc = {}, 0
    for device, bundles in sorted(by_device.items()):
        c = calibrate_device(device, bundles, physics, args.iterations, command, args.allow_bounds)
        report[device] = _describe(c)
        print(f"\ndevice {device}: {len(bundles)} bundle(s), {c.rows} races at the fit sizes")
        for name, s in sorted(c.sensitivity.items()):
            fitted = c.result.values.get(name) if c.result else None
            err = f", relative error {c.errors[name]:.3f}" if name in c.errors else ""
            state = f"fitted {fitted:.4g}" if fitted is not None else "held: these races do not determine it"
            print(f"  {name:40s} sensitivity {s:6.3f}{err}  {state}")
        print(
            f"  held-out sizes: pair agreement {_share(c.before['pair_agreement'])} -> "
            f"{_share(c.after['pair_agreement'])} of {c.before['pairs']} pairs; the measured winner's rank "
            f"under the model {_pct(c.before['winner_rank_pct_median'])} -> "
            f"{_pct(c.after['winner_rank_pct_median'])} (median over {c.before['sizes']} sizes)"
        )
        for p in c.problems:
            print(f"oto calibrate: device {device}: {p}", file=sys.stderr)
        if c.profile is None:
            rc = 1
            print(f"oto calibrate: device {device}: profile not written", file=sys.stderr)
            continue
        path = calibrated_path(Path(args.out), args.arch, device)
        path.parent.mkdir(parents=True, exist_ok=True)
        if refused := write_fitted_profile(c.profile, path):
            rc = 1
            print(f"oto calibrate: device {device}: {refused}", file=sys.stderr)
            continue
        print(f"  wrote {path} (use it: --config device_profile={path})")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=float) + "\n")
    return rc


def _share(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def _pct(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.1f}%"


def _describe(c: DeviceCalibration) -> dict[str, Any]:
    return {
        "bundles": [b.path.name for b in c.bundles],
        "rows": c.rows,
        "sensitivity": c.sensitivity,
        "relative_errors": c.errors,
        "fitted": dict(c.result.values) if c.result else {},
        "converged": c.result.converged if c.result else None,
        "before": c.before,
        "after": c.after,
        "problems": c.problems,
        "written": c.profile is not None,
    }

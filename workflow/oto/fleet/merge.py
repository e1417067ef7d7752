"""``oto merge``: many testers' bundles → one ``results/<arch>/``.

Every bundle is checked in full first (:mod:`oto.fleet.intake`); a rejected one merges nothing and is listed
with its reason, the others go on. Accepted bundles are kept, by their sha256, under
``results/<arch>/fleet/bundles/``, and every merge starts again from all of them, so a later bundle for the
same shard *adds* evidence and nothing is ever silently replaced (a byte-identical copy counts once).

Combining devices of different speed: a score is a ratio to the reference kernel (the shipped solution)
measured on the *same* device, so scores from an 8-CU and a 6-CU laptop are comparable while their GFLOPS
are not. Per library and deck size, the candidates are the kernels that won a final measurement on some
device; each candidate's score on a device is the geometric mean of every measurement of it at that size on
that device (its final and its registry records), and its merged score the geometric mean over the devices
that measured it. The best merged score wins the size; its interval spans every device's interval (a *win*
holds on every device that measured it). GFLOPS and % of the ceiling are kept per device (the device's own
roofline from its device profile); the logic file's exact row carries the median GFLOPS over devices.

Agreement: every (kernel, size) measured on two or more devices is a replicated measurement; the report
gives, per library, how many there are, the median and 90th-percentile relative difference of their scores,
the share whose intervals overlap, and the share of sizes where devices that finished the library picked the
same winner.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

import oto
from oto.deck.model import Deck, LibraryDeck, write_deck_yaml, write_library_yaml
from oto.deck.shards import Shard
from oto.deck.sources import load_deck
from oto.files import atomic_write_text, read_yaml, write_yaml
from oto.fleet import split_passthrough
from oto.fleet.bundle import SUFFIX, file_sha256
from oto.fleet.calibrate import CALIBRATED, calibrated_profiles
from oto.fleet.intake import Accepted, Expect, Limits, Rejected, open_bundle
from oto.gemm import Library
from oto.hardware.ceilings import ceilings_document, family_peak_gflops, roofline_gflops
from oto.measurement.selection import summarise, verdict
from oto.registry.records import size_key
from oto.registry.store import Store
from oto.reporting.figures import library_verdict
from oto.tensile.logic_writer import write_library_logic
from oto.tensile.params import canonical
from oto.tensile.provenance import logic_record, record_path, write_record

log = logging.getLogger(__name__)
STATE = "merge.yaml"


class MergeError(RuntimeError):
    pass


@dataclass
class MergeSettings:
    arch: str
    arch_profile: dict[str, Any]
    config: dict[str, Any]  # validated: deck, package.label, benchmark.tie_tolerance, tensile
    numbers: str = "measured"
    tensile_version: str | None = None
    limits: Limits = field(default_factory=Limits)


@dataclass
class Outcome:
    accepted: list[Accepted] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)
    duplicates: list[dict[str, str]] = field(default_factory=list)


def bundle_files(sources: Iterable[Path]) -> list[Path]:
    """The bundle archives named or found (one level deep) in the given files and folders."""
    out = []
    for src in sources:
        src = Path(src)
        if src.is_dir():
            out += sorted(p for p in src.rglob(f"*{SUFFIX}") if p.is_file() and not p.name.startswith("."))
        elif src.is_file():
            out.append(src)
        else:
            raise MergeError(f"{src}: no such file or folder")
    return out


def _guard(arch_dir: Path) -> None:
    """Never overwrite a tuning run: a merge writes into an empty folder or one an earlier merge wrote."""
    if not arch_dir.exists() or (arch_dir / "fleet" / STATE).is_file():
        return
    if any(arch_dir.glob("Cijk_*/gen*")) or any(
        p.name not in ("fleet", CALIBRATED) for p in arch_dir.iterdir()
    ):
        raise MergeError(
            f"{arch_dir} holds a tuning run or other files, not an earlier merge; merge into another folder "
            "(oto merge --out merged/)"
        )


def open_all(
    files: Sequence[Path], settings: MergeSettings, deck: Deck, pinned: str | None
) -> tuple[Outcome, str | None]:
    """Open every bundle; the first accepted Tensile version pins the rest (unless given)."""
    outcome = Outcome()
    by_sha: dict[str, Path] = {}
    deck_sizes = {name: lib.sizes for name, lib in deck.libraries.items()}
    for f in files:
        sha = file_sha256(f)
        if sha in by_sha:
            outcome.duplicates.append({"file": f.name, "same_as": by_sha[sha].name, "sha256": sha})
            continue
        expect = Expect(settings.arch, settings.arch_profile, settings.numbers, pinned, deck_sizes)
        try:
            b = open_bundle(f, expect, settings.limits)
        except Rejected as exc:
            outcome.rejected.append({"file": f.name, "sha256": sha, "reason": str(exc)})
            continue
        by_sha[sha] = f
        if pinned is None and isinstance(b.descriptor["provenance"].get("tensile_version"), str):
            pinned = b.descriptor["provenance"]["tensile_version"]
        outcome.accepted.append(b)
    return outcome, pinned


# -- combining one library ----------------------------------------------------------------------------------


def _geo(values: Iterable[float]) -> float | None:
    v = [x for x in values if x is not None and x > 0 and math.isfinite(x)]
    return float(np.exp(np.mean(np.log(v)))) if v else None


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def _observations(bundles: Sequence[Accepted], library: str, deck: LibraryDeck):
    """device → (kernel, size index) → measurements (finals and registry records); per device, the final
    winner of each size; every kernel's parameters."""
    index_of: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(deck.sizes):
        index_of[size_key(s)].append(i)
    obs: dict[str, dict[tuple[str, int], list[dict]]] = defaultdict(lambda: defaultdict(list))
    params: dict[str, dict] = {}
    final_winners: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for b in bundles:
        d = b.device_id
        final = b.finals.get(library)
        if final:
            for kid, p in final["kernels"].items():
                params[str(kid)] = canonical(p)
            for r in final["per_size"]:
                if r.get("winner"):
                    final_winners[d][r["size_index"]].add(r["winner"])
                    obs[d][(r["winner"], r["size_index"])].append(
                        {k: r.get(k) for k in ("score", "ci_low", "ci_high", "gflops")} | {"source": "final"}
                    )
        for rec in b.records.get(library, []):
            if rec["kind"] != "benchmarked":
                continue
            if rec.get("params"):
                params.setdefault(rec["kernel_id"], canonical(json.loads(rec["params"])))
            for i in index_of.get(rec["size"], []):
                obs[d][(rec["kernel_id"], i)].append(
                    {k: rec.get(k) for k in ("score", "ci_low", "ci_high", "gflops")} | {"source": "registry"}
                )
    return obs, params, final_winners


def _per_device(measurements: list[dict]) -> dict[str, Any]:
    """Repeated measurements of one kernel at one size on one device: geometric means of its final
    measurements (the full race against the other finalists) where it has any, else of its registry ones."""
    finals = [m for m in measurements if m["source"] == "final"]
    measurements = finals or measurements
    return {
        "score": _geo(m["score"] for m in measurements),
        "ci_low": _geo(m.get("ci_low") for m in measurements),
        "ci_high": _geo(m.get("ci_high") for m in measurements),
        "gflops": float(np.median([m["gflops"] for m in measurements if m.get("gflops")]))
        if any(m.get("gflops") for m in measurements)
        else None,
        "measurements": len(measurements),
    }


def agreement(obs: Mapping[str, Mapping[tuple[str, int], list[dict]]]) -> dict[str, Any]:
    """How well replicated measurements (same kernel and size on two or more devices) agree."""
    devices = sorted(obs)
    diffs, overlaps = [], []
    cells = 0
    keys = set().union(*(set(obs[d]) for d in devices)) if devices else set()
    for key in keys:
        there = [_per_device(obs[d][key]) for d in devices if key in obs[d]]
        if len(there) < 2:
            continue
        cells += 1
        for a, b in combinations(there, 2):
            if a["score"] and b["score"]:
                diffs.append(abs(math.exp(abs(math.log(a["score"] / b["score"]))) - 1))
            if None not in (a["ci_low"], a["ci_high"], b["ci_low"], b["ci_high"]):
                overlaps.append(a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"])
    return {
        "replicated": cells,
        "pairs": len(diffs),
        "median_difference": _round(float(np.median(diffs))) if diffs else None,
        "p90_difference": _round(float(np.percentile(diffs, 90))) if diffs else None,
        "intervals_overlap": _round(sum(overlaps) / len(overlaps)) if overlaps else None,
    }


def merge_library(
    library: str,
    deck: LibraryDeck,
    bundles: Sequence[Accepted],
    profiles: Mapping[str, Mapping],
    tolerance: float,
) -> dict[str, Any] | None:
    """The merged final of one library (final.yaml format, per-device figures under ``devices``), or None
    when no device finished it (its measurements are still merged into the registry)."""
    obs, params, final_winners = _observations(bundles, library, deck)
    if not any(final_winners.values()):
        return None
    lib = Library.parse(library)
    sizes = np.asarray([s[:4] for s in deck.sizes], dtype=float).reshape(-1, 4)
    roof = {
        d: roofline_gflops(profiles[d], lib.family, sizes[:, 0], sizes[:, 1], sizes[:, 2], sizes[:, 3])
        for d in obs
    }
    rows, winners = [], set()
    for i in range(len(deck.sizes)):
        best = None
        # Candidates: each device's final winner at this size; scored on every device that measured them.
        for k in sorted(set().union(*(w.get(i, set()) for w in final_winners.values()))):
            per = {d: _per_device(obs[d][(k, i)]) for d in sorted(obs) if (k, i) in obs[d]}
            per = {d: v for d, v in per.items() if v["score"]}
            if not per:
                continue
            merged = _geo(v["score"] for v in per.values())
            rank = (merged, len(per), k)
            if best is None or rank[:2] > best[0][:2]:
                best = (rank, k, per)
        if best is None:
            rows.append(
                {
                    "size_index": i,
                    "winner": None,
                    "score": None,
                    "ci_low": None,
                    "ci_high": None,
                    "gflops": None,
                    "ceiling_gflops": None,
                    "pct_ceiling": None,
                    "verdict": "loss",
                    "devices": {},
                }
            )
            continue
        (score, _, _), k, per = best
        lows = [v["ci_low"] for v in per.values() if v["ci_low"]]
        highs = [v["ci_high"] for v in per.values() if v["ci_high"]]
        lo, hi = (min(lows) if lows else score), (max(highs) if highs else score)
        devices = {}
        for d, v in per.items():
            ceiling = float(roof[d][i])
            devices[d] = {
                "score": _round(v["score"]),
                "ci_low": _round(v["ci_low"]),
                "ci_high": _round(v["ci_high"]),
                "gflops": _round(v["gflops"]),
                "ceiling_gflops": _round(ceiling),
                "pct_ceiling": _round(100 * v["gflops"] / ceiling) if v["gflops"] else None,
                "measurements": v["measurements"],
            }
        gflops = [v["gflops"] for v in per.values() if v["gflops"]]
        winners.add(k)
        rows.append(
            {
                "size_index": i,
                "winner": k,
                "score": _round(score),
                "ci_low": _round(lo),
                "ci_high": _round(hi),
                "gflops": _round(float(np.median(gflops))) if gflops else None,
                # % of a ceiling is per device (under `devices`): devices have different ceilings.
                "ceiling_gflops": None,
                "pct_ceiling": None,
                "verdict": verdict(score, lo, hi, tolerance),
                "n_devices": len(per),
                "devices": devices,
            }
        )
    same = []
    finished = [d for d in final_winners if final_winners[d]]
    for i in range(len(deck.sizes)):
        picks = [frozenset(final_winners[d][i]) for d in finished if final_winners[d].get(i)]
        if len(picks) >= 2:
            same.append(len(set(picks)) == 1)
    summary = summarise(rows, Counter())
    per_device = {}
    for d in sorted(obs):
        mine = [b.finals[library] for b in bundles if b.device_id == d and library in b.finals]
        drows = [r for f in mine for r in f["per_size"] if r.get("winner")]
        pct = [100 * r["gflops"] / float(roof[d][r["size_index"]]) for r in drows]
        per_device[d] = {
            "finished": bool(mine),
            "bundles": sum(1 for b in bundles if b.device_id == d),
            "sizes_with_winner": len({r["size_index"] for r in drows}),
            "geomean_score": _round(_geo(r["score"] for r in drows)),
            "median_gflops": _round(float(np.median([r["gflops"] for r in drows]))) if drows else None,
            "median_pct_ceiling": _round(float(np.median(pct))) if pct else None,
            "theoretical_gflops": _round(family_peak_gflops(profiles[d], lib.family)),
        }
    provs = [b.finals[library].get("provenance") or {} for b in bundles if library in b.finals]
    return {
        "library": library,
        "family": lib.family.code,
        "pattern": lib.pattern,
        "provenance": {
            "numbers": provs[0].get("numbers"),
            "backend": sorted({str(p.get("backend")) for p in provs}),
            "merged_from": sorted({b.sha256[:16] for b in bundles}),
            "devices": sorted(obs),
        },
        "generations": max(
            int(b.finals[library].get("generations") or 0) for b in bundles if library in b.finals
        ),
        "converged": all(bool(b.finals[library].get("converged")) for b in bundles if library in b.finals),
        "convergence": {"converged": None, "reason": f"merged from {len(obs)} device(s)", "history": []},
        "tuning_summary": {},
        "sizes": deck.sizes,
        "per_size": rows,
        "kernels": {k: params[k] for k in sorted(winners)},
        "shipped_kernels": len({int(s[0]) for s in deck.shipped}),
        "summary": summary,
        "verdict": library_verdict(summary, tolerance),
        "fleet": {
            "devices": per_device,
            "agreement": {
                **agreement(obs),
                "same_winner": _round(sum(same) / len(same)) if same else None,
                "sizes_compared": len(same),
            },
        },
    }


# -- the whole merge ---------------------------------------------------------------------------------------


def _device_rows(accepted: Sequence[Accepted]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for b in sorted(accepted, key=lambda b: b.created_at):
        d = b.profile["device"]
        row = out.setdefault(
            b.device_id,
            {
                "cpu": d.get("cpu"),
                "gpu_name": d.get("gpu_name"),
                "compute_units": b.profile["compute_units"],
                "clock_mhz": b.profile["clock_mhz"],
                "memory": b.profile["memory"]["kind"],
                "peak_bandwidth_gbs": b.profile["memory"]["peak_bandwidth_gbs"],
                "fp32_ceiling_gflops": _round(family_peak_gflops(b.profile, "SB")),
                "kernel": d.get("kernel"),
                "rocm": d.get("rocm"),
                "tensile": b.descriptor["provenance"].get("tensile_version"),
                "bundles": 0,
                "shards": [],
            },
        )
        row["bundles"] += 1
        if b.shard not in row["shards"]:
            row["shards"].append(b.shard)
    return out


def _shard_coverage(accepted: Sequence[Accepted], libraries: Sequence[str]) -> dict[str, Any]:
    """Per shard count used: which shards arrived, which are still missing, and who replicated which."""
    out = {}
    for n in sorted({Shard.parse(b.shard).count for b in accepted}):
        got: dict[int, set[str]] = defaultdict(set)
        for b in accepted:
            s = Shard.parse(b.shard)
            if s.count == n:
                got[s.index].add(b.device_id)
        out[str(n)] = {
            "received": {str(i): sorted(got[i]) for i in sorted(got)},
            "missing": [i for i in range(1, n + 1) if i not in got],
            "replicated": [i for i in sorted(got) if len(got[i]) > 1],
        }
    return out


def merge(
    sources: Sequence[Path],
    out: Path,
    settings: MergeSettings,
) -> dict[str, Any]:
    """Merge the bundles in ``sources`` (files or folders) with every bundle merged before into
    ``out/<arch>/``. Returns the merge document (also written to ``fleet/merge.yaml``)."""
    arch_dir = Path(out) / settings.arch
    _guard(arch_dir)
    kept = arch_dir / "fleet" / "bundles"
    state_path = arch_dir / "fleet" / STATE
    state = read_yaml(state_path) if state_path.is_file() else {}
    pinned = settings.tensile_version or (state or {}).get("tensile_version")
    deck = load_deck(settings.config["deck"]["source"], settings.config["deck"]["path"])
    files = bundle_files([kept]) if kept.is_dir() else []
    files += [f for f in bundle_files(sources) if f.parent.resolve() != kept.resolve()]
    outcome, pinned = open_all(files, settings, deck, pinned)
    kept.mkdir(parents=True, exist_ok=True)
    for b in outcome.accepted:
        target = kept / f"{b.sha256[:16]}{SUFFIX}"
        if not target.exists():
            shutil.copyfile(b.path, target)
    # a device's ceilings: its calibrated profile where `oto calibrate --bundles` wrote one, else its bundle's
    calibrated = calibrated_profiles(arch_dir, settings.arch_profile)
    profiles = {b.device_id: calibrated.get(b.device_id, b.profile) for b in outcome.accepted}
    tol = float(settings.config["benchmark"]["tie_tolerance"])
    libraries = sorted({lib for b in outcome.accepted for lib in (*b.records, *b.finals)})
    label = settings.config["package"]["label"]
    prefix = "vega10" if label == "gfx900" else settings.arch_profile["tensile"]["logic_prefix"]
    logic_dir = arch_dir / "logic"
    if logic_dir.is_dir():
        shutil.rmtree(logic_dir)  # the merge's own output: every file is rewritten from all bundles
    merged: dict[str, dict[str, Any]] = {}
    logic_paths: list[Path] = []
    record_paths: list[Path] = []
    provenance = {
        "deck_source": dict(deck.source),
        "deck_of": deck.arch_source,
        "libraries_in_source": len(deck.libraries),
        "stats_of_source": deck.stats(),
    }
    for lib in libraries:
        contributing = [b for b in outcome.accepted if lib in b.records or lib in b.finals]
        final = merge_library(lib, deck.libraries[lib], contributing, profiles, tol)
        write_library_yaml(deck.libraries[lib], arch_dir / lib / "deck.yaml", provenance)
        if final is None:
            counts = Counter(b.device_id for b in contributing)
            merged[lib] = {
                "finished": False,
                "devices": {
                    d: {
                        "finished": False,
                        "bundles": n,
                        "sizes_with_winner": 0,
                        "geomean_score": None,
                        "median_gflops": None,
                        "median_pct_ceiling": None,
                        "theoretical_gflops": None,
                    }
                    for d, n in sorted(counts.items())
                },
            }
            (arch_dir / lib / "final.yaml").unlink(missing_ok=True)
            continue
        write_yaml(arch_dir / lib / "final.yaml", final)
        path = logic_dir / f"{prefix}_{lib}.yaml"
        write_library_logic(final, deck.libraries[lib], settings.arch_profile, label, path, source=lib)
        logic_paths.append(path)
        # where the merged numbers came from, beside the logic file, as the logic stage writes it
        record_paths.append(write_record(logic_record(final, path, label), record_path(path)))
        merged[lib] = {
            "finished": True,
            "devices": final["fleet"]["devices"],
            **final["fleet"]["agreement"],
            "summary": final["summary"],
            "verdict": final["verdict"],
            "sizes": len(final["sizes"]),
            "sizes_with_winner": sum(1 for r in final["per_size"] if r.get("winner")),
        }
    selected = Deck(dict(deck.source), deck.arch_source, {n: deck.libraries[n] for n in libraries})
    if libraries:
        write_deck_yaml(selected, arch_dir / "deck.yaml", provenance)
    write_yaml(arch_dir / "ceilings.yaml", ceilings_document(settings.arch_profile))
    _registry(outcome.accepted, arch_dir)
    package = _package(logic_paths, record_paths, settings, arch_dir)
    doc = {
        "arch": settings.arch,
        "merged_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "oto_version": oto.__version__,
        "numbers": settings.numbers,
        "backends": sorted(
            {
                str((f.get("provenance") or {}).get("backend"))
                for b in outcome.accepted
                for f in b.finals.values()
            }
        ),
        "tensile_version": pinned,
        "tie_tolerance": tol,
        "bundles": {
            "accepted": [
                {
                    "file": b.path.name,
                    "sha256": b.sha256,
                    "device": b.device_id,
                    "shard": b.shard,
                    "created_at": b.created_at,
                    "libraries": sorted(b.records.keys() | b.finals.keys()),
                    "finished": sorted(b.finals),
                    "records": sum(len(r) for r in b.records.values()),
                    "oto_version": b.descriptor["provenance"].get("oto_version"),
                }
                for b in outcome.accepted
            ],
            "duplicates": outcome.duplicates,
            "rejected": outcome.rejected,
        },
        "devices": _device_rows(outcome.accepted),
        "shards": _shard_coverage(outcome.accepted, libraries),
        "deck_libraries": len(deck.libraries),
        "libraries": merged,
        "package": package,
    }
    write_yaml(state_path, doc)
    from oto.reporting.fleet import render_html, render_markdown

    atomic_write_text(arch_dir / "acceptance.md", render_markdown(doc))
    atomic_write_text(arch_dir / "acceptance.html", render_html(doc))
    return doc


def _registry(accepted: Sequence[Accepted], arch_dir: Path) -> None:
    """Every record of every accepted bundle in one store, rebuilt from the bundles each merge; ``run_id``
    gains ``@<device>`` (two devices running the same config are two runs) and ``source`` names the bundle."""
    path = arch_dir / "registry" / "registry.sqlite"
    tmp = path.with_name(".registry.merging.sqlite")
    tmp.unlink(missing_ok=True)
    store = Store(tmp, readonly=False)
    try:
        for b in accepted:
            rows = [
                {**r, "run_id": f"{r.get('run_id')}@{b.device_id}", "source": f"bundle:{b.sha256[:16]}/{lib}"}
                for lib, recs in b.records.items()
                for r in recs
            ]
            store.merge(rows)
        summary = store.summary()
    finally:
        store.close()
    tmp.replace(path)
    write_yaml(
        arch_dir / "registry" / "consolidated.yaml",
        {"store": "registry/registry.sqlite", **summary, "bundles": len(accepted), "problems": []},
    )


def _package(
    logic_paths: Sequence[Path], record_paths: Sequence[Path], settings: MergeSettings, arch_dir: Path
) -> dict[str, Any]:
    """TensileLibrary.dat and the code objects from the merged logic files, as the workflow's package stage
    makes them: checked, labelled, gated on measured winners, the ISA registered from the profile."""
    from oto.tensile.packaging import package_library

    if not logic_paths:
        return {"native_dat": None, "why": "no library was finished on any device"}
    package = settings.config["package"]
    doc = package_library(
        logic_paths,
        settings.arch_profile,
        package["label"],
        arch_dir / "TensileLibrary.dat",
        manifest=arch_dir / "library" / "manifest.yaml",
        tensile_cfg=settings.config["tensile"],
        create_library=package["create_library"],
        provenance_paths=record_paths,
        allow_simulated=bool(package["allow_simulated"]),
    )
    return {**doc, "native_dat": "TensileLibrary.dat"}


def main(argv: Sequence[str]) -> int:
    """``oto merge SOURCE... [--arch A] [--out results] [--numbers K] [--tensile-version V] [-- ARGS]``"""
    import argparse
    import re

    from oto.config import ConfigError, load_config, validate_config
    from oto.fleet.remote import FetchError, fetch, is_remote
    from oto.hardware.profile import ProfileError, load_profile, profile_path

    argv, extra = split_passthrough(argv)
    ap = argparse.ArgumentParser(
        prog="oto merge",
        description="Merge testers' bundles (folders, files, or storage URLs such as s3://bucket/prefix) "
        "with "
        "every bundle merged before into one results/<arch>/: libraries, logic files, TensileLibrary.dat and "
        "the merged acceptance report. Rejected bundles are listed with their reason and merge nothing. "
        "Arguments after -- go to Snakemake's storage plugin (e.g. --storage-s3-endpoint-url URL).",
    )
    ap.add_argument("sources", nargs="+", help="bundle files, folders of bundles, or storage URLs")
    ap.add_argument("--arch", help="arch to merge (default: the config's)")
    ap.add_argument(
        "--configfile",
        default="config/config.yaml",
        help="config for the deck, package.label and tie tolerance (default config/config.yaml)",
    )
    ap.add_argument("--out", default="results", help="results folder; writes <out>/<arch>/ (default results)")
    ap.add_argument(
        "--profiles", default="arch_profiles", help="folder of arch profiles (default: arch_profiles)"
    )
    ap.add_argument(
        "--numbers",
        default="measured",
        choices=("measured", "replayed", "simulated"),
        help="the only kind of numbers merged (default measured)",
    )
    ap.add_argument(
        "--tensile-version",
        help="the Tensile version bundles must have (default: the first "
        "accepted bundle's, kept for later merges)",
    )
    args = ap.parse_args(argv)
    try:
        if Path(args.configfile).is_file():
            config = load_config(args.configfile)
        else:
            config = validate_config({"arch": args.arch or "gfx90c", "families": "all"})
        if args.arch:
            config["arch"] = args.arch
        arch_profile = load_profile(profile_path(config["arch"], args.profiles))
    except (ConfigError, ProfileError) as exc:
        print(f"oto merge: {exc}", file=sys.stderr)
        return 2
    settings = MergeSettings(config["arch"], arch_profile, config, args.numbers, args.tensile_version)
    sources: list[Path] = []
    for src in args.sources:
        if is_remote(src):
            staging = (
                Path(args.out) / config["arch"] / "fleet" / "remote" / re.sub(r"[^A-Za-z0-9._-]+", "_", src)
            )
            try:
                sources.append(fetch(src, staging, extra))
            except FetchError as exc:
                print(f"oto merge: {exc}", file=sys.stderr)
                return 1
        else:
            sources.append(Path(src))
    try:
        doc = merge(sources, Path(args.out), settings)
    except MergeError as exc:
        print(f"oto merge: {exc}", file=sys.stderr)
        return 2
    b = doc["bundles"]
    arch_dir = Path(args.out) / config["arch"]
    finished = sum(1 for v in doc["libraries"].values() if v.get("finished"))
    print(
        f"merged {len(b['accepted'])} bundle(s) from {len(doc['devices'])} device(s) into {arch_dir}: "
        f"{finished} of {doc['deck_libraries']} libraries; {len(b['duplicates'])} duplicate(s); "
        f"{len(b['rejected'])} rejected"
    )
    for x in b["rejected"]:
        print(f"  rejected {x['file']!r}: {x['reason']!r}")
    print(f"report: {arch_dir / 'acceptance.md'} (and .html); library: {arch_dir / 'TensileLibrary.dat'}")
    return 0 if b["accepted"] else 1

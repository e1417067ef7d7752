"""Read a run's result files into one JSON-able document: what the dashboard and the acceptance report show.

Reads ``results/<arch>/``: ceilings.yaml, deck.yaml, and per library ``deck.yaml``, ``gen<N>/{candidates.yaml,
build.yaml, samples.csv, selection.yaml}`` and ``final.yaml``. The run is live: a generation whose
selection.yaml is not written yet is "in progress" and skipped; keys that other stages add or leave out are
read with defaults. A file that is not valid YAML/CSV raises an error naming it (nothing is written then, so
the last good page stays).

Per finished generation the digest of its samples (launches per proposer, reference drift, failure classes)
is cached under ``live/cache/`` keyed by the files' size and mtime (the selection's by its content), so
refreshing after every generation of a 46-library run re-reads only the generation that just finished. The
cache belongs to the live page: its writers (the coverage, select and dashboard jobs) add entries; any other
reader (the report) passes ``write_cache=False`` and only reads them, as a rule writes nothing but its
declared outputs.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from oto.config import config_block
from oto.files import StageFileError, atomic_write_text, read_yaml_mirrored
from oto.hardware.simulated.checks import model_check_for
from oto.measurement.scoring import drift_series
from oto.reporting import figures
from oto.rocblas.compare import tally, tuned_failures_note
from oto.rocblas.verify import Change, read_verify, removed_kernels
from oto.tensile.provenance import nights, simulated_build_banner

CACHE_VERSION = 5  # 2: generations carry their drift estimator; 3: figures against the realistic roofline;
# 4: a generation the time budget starved says why; 5: selection.yaml keyed by its content
DRIFT_POINTS = 120  # per generation: the drift curve is smooth, more points only weigh the page down
GEN_DIR = re.compile(r"^gen(\d+)$")
REFERENCE = "reference"  # proposer label of the spoof-floor launches


def _yaml(path: Path) -> Any:
    """A result file, or None while it does not exist yet."""
    if not path.is_file():
        return None
    doc = read_yaml_mirrored(path)  # a selection.yaml's or deck.yaml's JSON mirror where it is current
    if doc is not None and not isinstance(doc, Mapping):
        raise StageFileError(f"{path}: expected a mapping at the top level, found {type(doc).__name__}")
    return doc


def _stamp(paths: list[Path]) -> list:
    return [
        [p.name, p.stat().st_size, p.stat().st_mtime_ns] if p.is_file() else [p.name, None] for p in paths
    ]


def _proposers(cands: Mapping | None) -> dict[str, str]:
    """Kernel id → who proposed it (a kernel may be both a candidate and a size's reference)."""
    return {
        str(k["id"]): str(k.get("proposer") or "unknown")
        for k in (cands or {}).get("kernels") or []
        if isinstance(k, Mapping) and "id" in k
    }


def _is_candidate(k: Mapping) -> bool:
    roles = k.get("roles") or [k.get("role", "candidate")]
    return "candidate" in roles


def samples_digest(samples_path: Path, cands: Mapping | None, build: Mapping | None) -> dict[str, Any]:
    """Launches and candidates per proposer, failure classes and the reference drift of one batch."""
    proposers = _proposers(cands)
    candidates = Counter(
        str(k.get("proposer") or "unknown")
        for k in (cands or {}).get("kernels") or []
        if isinstance(k, Mapping) and _is_candidate(k)
    )
    failures: Counter = Counter()
    for b in (build or {}).get("kernels") or []:
        if isinstance(b, Mapping) and b.get("status", "ok") != "ok":
            failures[f"build: {b['status']}"] += 1
    for r in (cands or {}).get("rejected") or []:
        if isinstance(r, Mapping):
            failures[f"rejected: {r.get('class', 'unknown')}"] += 1
    launches: Counter = Counter()
    drift: dict[str, list[float]] = {"seq": [], "slowdown_pct": []}
    if samples_path.is_file():
        try:
            df = pd.read_csv(samples_path, dtype={"kernel_id": str, "role": str, "status": str})
        except (pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise StageFileError(f"{samples_path}: not a readable CSV: {exc}") from exc
        missing = {"seq", "kernel_id", "role", "time_us", "status"} - set(df.columns)
        if missing:
            raise StageFileError(f"{samples_path}: missing column(s) {', '.join(sorted(missing))}")
        if not df.empty:
            # A reference launch is the spoof floor's, whoever else proposed the same kernel.
            who = df["kernel_id"].map(proposers).fillna("unknown").where(df["role"] != REFERENCE, REFERENCE)
            launches.update(who.tolist())
            failures.update(f"launch: {s}" for s in df["status"] if s != "ok")
            seq, factor = drift_series(df)
            if len(seq):
                step = max(1, math.ceil(len(seq) / DRIFT_POINTS))
                slow = 100 * (factor / factor.min() - 1)
                drift = {
                    "seq": [float(x) for x in seq[::step]],
                    "slowdown_pct": [round(float(x), 3) for x in slow[::step]],
                }
    return {
        "launches": dict(sorted(launches.items())),
        "candidates": dict(sorted(candidates.items())),
        "failures": dict(sorted(failures.items())),
        "drift": drift,
        "drift_range_pct": max(drift["slowdown_pct"]) if drift["slowdown_pct"] else None,
    }


def _cached(cache: Path | None, key: Mapping, compute, write: bool = True) -> dict[str, Any]:
    if cache is not None and cache.is_file():
        try:
            hit = json.loads(cache.read_text())
            if hit.get("key") == key:
                return hit["value"]
        except (ValueError, KeyError, AttributeError):
            pass  # a torn or old cache entry is recomputed
    value = compute()
    if cache is not None and write:
        atomic_write_text(cache, json.dumps({"key": key, "value": value}))
    return value


@dataclass(frozen=True)
class Roofline:
    """What a library's sizes are judged against (:func:`oto.reporting.figures.with_roofline`): its family's
    flops per multiply-add and peak, and the arch's launch overhead (None: bandwidth roofline only)."""

    flops_per_mac: float
    peak: float | None
    launch_us: float | None

    def rows(self, doc: Mapping) -> list[dict[str, Any]]:
        """A selection's or final's per-size rows with the realistic roofline added."""
        return figures.with_roofline(
            doc.get("per_size") or [], doc.get("sizes") or [], self.flops_per_mac, self.peak, self.launch_us
        )


def generation_record(
    gen_dir: Path, roofline: Roofline, cache_dir: Path | None, write_cache: bool = True
) -> dict | None:
    """One finished generation (None while its selection.yaml is not written), cached on its files
    (``write_cache=False``: a computed entry is not stored)."""
    selection = gen_dir / "selection.yaml"
    if not selection.is_file():
        return None
    inputs = [gen_dir / n for n in ("candidates.yaml", "build.yaml", "samples.csv")]
    # selection.yaml by its content: the select job that writes it caches the entry (its live refresh), and
    # Snakemake touches a job's outputs when the job ends, so a key on its mtime would be stale at once.
    # The other files are earlier jobs' outputs, touched before select starts.
    key = {
        "version": CACHE_VERSION,
        "roofline": asdict(roofline),
        "selection": hashlib.blake2b(selection.read_bytes(), digest_size=16).hexdigest(),
        "inputs": _stamp(inputs),
    }
    cache = cache_dir / gen_dir.parent.name / f"{gen_dir.name}.json" if cache_dir else None
    return _cached(cache, key, lambda: _generation_record(gen_dir, roofline), write_cache)


def _generation_record(gen_dir: Path, roofline: Roofline) -> dict:
    selection = _yaml(gen_dir / "selection.yaml")
    cands = _yaml(gen_dir / "candidates.yaml")
    build = _yaml(gen_dir / "build.yaml")
    digest = samples_digest(gen_dir / "samples.csv", cands, build)
    per = roofline.rows(selection)
    summary = selection.get("summary") or {}
    conv = selection.get("convergence") or {}
    done = (gen_dir / "selection.yaml").stat().st_mtime
    starved = _starved_reason(gen_dir) if selection.get("frozen") else ""
    return {
        "gen": int(selection.get("generation", GEN_DIR.match(gen_dir.name).group(1))),
        "frozen": bool(selection.get("frozen")),
        "finished_at": datetime.fromtimestamp(done, UTC).strftime("%Y-%m-%d %H:%M:%S"),
        "finished_ts": done,
        "numbers": (selection.get("provenance") or {}).get("numbers"),
        "backend": (selection.get("provenance") or {}).get("backend"),
        "drift_estimator": (selection.get("measurement") or {}).get("drift"),
        "geomean_score": figures.finite(summary.get("geomean_score")),
        "pct_ceiling_median": figures.finite(summary.get("pct_ceiling_median")),
        "wins": int(summary.get("wins") or 0),
        "ties": int(summary.get("ties") or 0),
        "losses": int(summary.get("losses") or 0),
        "not_measured": int(summary.get("not_measured") or 0),
        "floor_failed": int(summary.get("floor_failed") or 0),
        "failures_cumulative": {k: int(v) for k, v in (summary.get("failures") or {}).items()},
        "converged": bool(conv.get("converged")),
        "reason": conv.get("reason", ""),
        "convergence": dict(conv),
        **{
            k: v
            for k, v in figures.size_stats(per, roofline.peak).items()
            if k.startswith(("median", "sizes", "meas"))
        },
        **digest,
        "selection": _figures_input(selection, per),
        **({"starved": starved} if starved else {}),
    }


def _starved_reason(gen_dir: Path) -> str:
    """Why config ``budget`` froze this generation ('' when it did not: converged, or no budget)."""
    path = gen_dir / "proposals.yaml"
    reason = str((_yaml(path) or {}).get("reason", "")) if path.is_file() else ""
    return reason if reason.startswith("starved") else ""


def _failures_new(gens: list[dict]) -> None:
    """Per generation, the failures it added: the difference of the selection's cumulative counts."""
    before: Counter = Counter()
    for g in gens:
        now = Counter(g["failures_cumulative"])
        g["failures_new"] = {k: now[k] - before[k] for k in sorted(now) if now[k] - before[k] > 0}
        before = now


def _library_status(gens: list[dict], final: Mapping | None, max_gen: int | None) -> str:
    if final is not None:
        return "finished"
    if not gens:
        return "waiting"
    if gens[-1]["converged"]:
        return "converged"
    if max_gen is not None and len(gens) >= max_gen:
        return "finalizing"
    return "tuning"


def library_record(
    lib_dir: Path,
    deck: Mapping,
    peak: float | None,
    max_gen: int | None,
    cache_dir: Path | None,
    launch_us: float | None = None,
    write_cache: bool = True,
) -> dict:
    """One library: its deck entry (counts from deck.yaml), every finished generation, the latest
    selection and the final; sizes judged against the realistic roofline (``launch_us``: the arch's launch
    overhead, see oto.reporting.figures)."""
    from oto.gemm import Family

    name = lib_dir.name
    final = _yaml(lib_dir / "final.yaml")
    family, pattern = _family_pattern(name, deck, final)
    roofline = Roofline(float(Family.parse(family).flops_per_mac), peak, launch_us)
    gens, latest = [], None
    gen_dirs = sorted(
        (int(m.group(1)), p) for p in lib_dir.iterdir() if p.is_dir() and (m := GEN_DIR.match(p.name))
    )
    for _, gdir in gen_dirs:
        record = generation_record(gdir, roofline, cache_dir, write_cache)
        if record is not None:  # else still running
            gens.append(record)
    latest = gens[-1].pop("selection") if gens else None
    for g in gens:
        g.pop("selection", None)
    _failures_new(gens)
    last = gens[-1] if gens else {}
    record = {
        "library": name,
        "family": family,
        "pattern": pattern,
        "deck_sizes": int(deck.get("sizes") or 0),
        "shipped_solutions": int(deck.get("solutions") or 0),
        "generations": gens,
        "status": _library_status(gens, final, max_gen),
        "convergence": (final or {}).get("convergence") or last.get("convergence") or {},
        "numbers": ((final or {}).get("provenance") or {}).get("numbers") or last.get("numbers"),
        "backend": ((final or {}).get("provenance") or {}).get("backend") or last.get("backend"),
        # how it was measured: launch order, telemetry and the drift estimator (final, else the latest gen)
        "measurement": dict((final or {}).get("measurement") or {}) or {"drift": last.get("drift_estimator")},
        "night": (final or {}).get("night"),  # the run (night) that finished it
        "final": None,
        "latest": None,
        "final_failures_new": {},
    }
    if latest is not None:
        record["latest"] = {"library": name, "family": family, "pattern": pattern, **latest}
    if final is not None:
        record["final"] = {
            "library": name,
            "family": family,
            "pattern": pattern,
            **_figures_input(final, roofline.rows(final)),
        }
        record["final"]["shipped_kernels"] = int(final.get("shipped_kernels") or 0)
        # sizes that differ only in the batch count, served one kernel (oto.measurement.dispatch)
        record["final"]["one_kernel_per_key"] = dict(final.get("one_kernel_per_key") or {})
        if final.get("workload"):  # a workload's time in this library, before and after
            record["final"]["workload"] = final["workload"]
        if final.get("native_floor"):  # a second floor: upstream's native library (deck.native_floor)
            record["final"]["native_floor"] = final["native_floor"]
        # final.yaml counts every generation's failures and its own measurement's: these are its own
        before = Counter(last.get("failures_cumulative") or {})
        after = {k: int(v) for k, v in ((final.get("summary") or {}).get("failures") or {}).items()}
        record["final_failures_new"] = {k: v - before[k] for k, v in sorted(after.items()) if v > before[k]}
    return record


def _family_pattern(name: str, deck: Mapping, final: Mapping | None) -> tuple[str, str]:
    family = deck.get("family") or (final or {}).get("family")
    pattern = deck.get("pattern") or (final or {}).get("pattern")
    if family and pattern:
        return str(family), str(pattern)
    from oto.gemm import Library  # parse the name only when the files do not say

    lib = Library.parse(name)
    return lib.family.code, lib.pattern


def _figures_input(doc: Mapping, per_size: list[dict[str, Any]]) -> dict:
    """The part of a selection/final the shared figures read (see oto.reporting.figures), with its per-size
    rows as given (judged against the realistic roofline); kernels by id."""
    return {
        "sizes": doc.get("sizes") or [],
        "per_size": per_size,
        "kernels": {str(k): {} for k in (doc.get("kernels") or {})},
        "summary": doc.get("summary") or {},
    }


def _coverage(deck: Mapping, libs: list[dict]) -> dict[str, Any]:
    """The tuned deck against the shipped footprint it came from: libraries, sizes and kernels, and what
    every size raced against (its floor)."""
    prov = deck.get("provenance") or {}
    source = prov.get("stats_of_source") or {}
    finals = [lib["final"] for lib in libs if lib["final"]]
    tuned_sizes = {
        lib["library"]: len(((lib["latest"] or {}).get("per_size")) or []) for lib in libs if lib["latest"]
    }
    return {
        "deck_of": prov.get("deck_of", "gfx900"),
        "floor": prov.get("floor"),  # absent: the deck's own shipped kernels
        "reference": figures.reference_phrase(prov.get("deck_of", "gfx900"), prov.get("floor")),
        "deck_kind": (prov.get("deck_source") or {}).get("kind"),
        "libraries_in_source": prov.get("libraries_in_source"),
        "sizes_in_source": source.get("unique_sizes"),
        "solutions_in_source": source.get("solutions"),
        "libraries_selected": len(libs),
        "libraries_started": sum(1 for lib in libs if lib["generations"]),
        "libraries_finished": len(finals),
        "deck_sizes_selected": sum(lib["deck_sizes"] for lib in libs),
        "shipped_solutions_selected": sum(lib["shipped_solutions"] for lib in libs),
        "tuning_sizes_measured": sum(tuned_sizes.values()),
        "final_sizes": sum(len(f["per_size"]) for f in finals),
        "final_sizes_with_winner": sum(1 for f in finals for r in f["per_size"] if r.get("winner")),
        "final_kernels": sum(len(f["kernels"]) for f in finals),
        "final_shipped_kernels": sum(f.get("shipped_kernels", 0) for f in finals),
        # config deck.max_sizes kept a sample of some library's sizes: every page says so (a demo's deck is
        # not the footprint); absent when every library has all its sizes
        **({"size_cap": deck["size_cap"]} if (deck.get("size_cap") or {}).get("libraries_capped") else {}),
    }


def _state(libs: list[dict]) -> str:
    if not libs or not any(lib["generations"] for lib in libs):
        return "waiting"
    if all(lib["status"] == "finished" for lib in libs):
        return "finished"
    return "running"


def _fig(x: Any, spec: str = ".3f") -> str:
    return "—" if x is None else format(float(x), spec)


def _retried(entry: Mapping[str, Any]) -> str:
    """How many of a library's verify calls were run again after a timeout, and how those ended."""
    again = Counter(r.get("status") for r in entry.get("rows") or [] if r.get("retried"))
    if not again:
        return ""
    return f" ({sum(again.values())} run again after a timeout: {tally(again)})"


SIZES_NAMED = 12  # a note names this many sizes, then says how many more (a 780M night: 612 too large)


def _sizes(entries: list[Mapping[str, Any]], most: int | None = None, shape=None) -> str:
    """Where compare's entries are, as the notes name them: "<library> size <i> [M, N, batch, K]; ..."
    (``shape``: (library, index) → the size, where known; ``most``: then "and N more")."""
    named = "; ".join(_where(g, shape) for g in entries[:most])
    return named + (f"; and {len(entries) - most} more" if most is not None and len(entries) > most else "")


def _where(g: Mapping[str, Any], shape=None) -> str:
    size = shape(g["library"], int(g["size_index"])) if shape else None
    return f"{g['library']} size {g['size_index']}" + (f" {size}" if size else "")


def deck_shapes(results: Path):
    """(library, size index) → its [M, N, batch, K] from the library's final.yaml (read once each; None where
    there is none): a note names the size a user can look up, not only its index."""
    cache: dict[str, list] = {}

    def shape(library: str, i: int) -> list[int] | None:
        if library not in cache:
            try:
                doc = read_yaml_mirrored(Path(results) / library / "final.yaml")
                cache[library] = [list(map(int, s[:4])) for s in doc.get("sizes") or []]
            except (OSError, StageFileError, AttributeError, TypeError, ValueError):
                cache[library] = []
        sizes = cache[library]
        return sizes[i] if 0 <= i < len(sizes) else None

    return shape


def _regression(g: Mapping[str, Any], shape=None) -> str:
    return f"{_where(g, shape)}: {g['speedup']:.3f}× ({g['ci_low']:.3f}–{g['ci_high']:.3f})"


def rocblas_clients(results: Path) -> dict[str, Any]:
    """What verify and compare found with rocBLAS's own client (every ``<library>/verify.yaml``,
    ``compare/compare.yaml``), as the pages show it: per library the sizes passed and failed and every kernel
    taken out; per baseline and family the speed-up distribution and every regression; or why a stage was
    skipped. Missing files: that stage is None (it has not run yet)."""
    out: dict[str, Any] = {"verify": None, "compare": None}
    ver = read_verify(results)  # one verify.yaml per library
    if ver is not None:
        libraries = []
        for name, entry in sorted((ver.get("libraries") or {}).items()):
            counts = entry.get("counts") or {}
            libraries.append(
                {
                    "library": name,
                    "sizes": sum(counts.values()),
                    "passed": counts.get("pass", 0),
                    "failed": sum(v for k, v in counts.items() if k != "pass"),
                    "counts": tally(counts) + _retried(entry),
                    # one entry per kernel taken out, not per size: a kernel out at 70 sizes is one line
                    "taken_out": removed_kernels([Change(**c) for c in entry.get("changes") or []], 5),
                }
            )
        out["verify"] = {
            "skipped": ver.get("reason") if ver.get("skipped") else None,
            "numbers": ver.get("numbers"),
            "client": (ver.get("client") or {}).get("what"),
            "environment": " ".join(f"{k}={v}" for k, v in sorted((ver.get("environment") or {}).items())),
            "libraries": libraries,
        }
    cmp = _yaml(results / "compare" / "compare.yaml")
    if cmp is not None:
        shape = deck_shapes(results)
        rows, extra_notes = [], []
        for against, families in (cmp.get("against") or {}).items():
            for fam, r in families.items():
                ci = r.get("median_ci") or [None, None]
                rows.append(
                    {
                        "against": against,
                        "family": fam,
                        "sizes": r["sizes"],
                        "measured": r["measured"],
                        "median": _fig(r.get("median_speedup")),
                        "ci": f"{_fig(ci[0])}–{_fig(ci[1])}",
                        "geomean": _fig(r.get("geomean_speedup")),
                        "p10": _fig(r.get("p10")),
                        "p90": _fig(r.get("p90")),
                        "wins": r["wins"],
                        "ties": r["ties"],
                        "losses": r["losses"],
                        "regressions": [_regression(g, shape) for g in r.get("regressions") or []],
                        "failed": len(r.get("failed") or []),
                    }
                )
                if failed := r.get("baseline_calls_failed"):
                    kinds = Counter()
                    for g in failed:
                        kinds[g["status"]] += int(g["calls"])
                    extra_notes.append(
                        f"against {against}, {fam}: {sum(kinds.values())} call(s) of the {against} arm "
                        f"itself failed ({tally(kinds)}: {_sizes(failed, None, shape)})"
                    )
                # the tuned library's own failures: a hang is what a user most needs to see
                if mine := r.get("failed"):
                    note = tuned_failures_note(mine, _sizes(mine, SIZES_NAMED, shape))
                    extra_notes.append(f"against {against}, {fam}: {note}")
                if wrong := r.get("baseline_failed"):
                    extra_notes.append(
                        f"against {against}, {fam}: {len(wrong)} size(s) left out, where the baseline's "
                        f"kernel failed validation in finalize's race ({_sizes(wrong, None, shape)})"
                    )
        out["compare"] = {
            "skipped": cmp.get("reason") if cmp.get("skipped") else None,
            "numbers": cmp.get("numbers"),
            "client": (cmp.get("client") or {}).get("what"),
            "repetitions": cmp.get("repetitions"),
            "notes": [*(f"{k}: {v}" for k, v in sorted((cmp.get("notes") or {}).items())), *extra_notes],
            "rows": rows,
        }
    return out


def collect(
    results: str | Path,
    config: Mapping | None = None,
    cache_dir: str | Path | None = None,
    libraries: list[str] | None = None,
    write_cache: bool = True,
) -> dict[str, Any]:
    """Everything the pages show, from the files under ``results/<arch>/`` (missing files: empty parts).

    ``libraries``: only these (default: those of deck.yaml, else every library folder on disk);
    ``write_cache=False``: read the digests cached in ``cache_dir``, store none."""
    results = Path(results)
    config = config or {}
    ceilings = _yaml(results / "ceilings.yaml") or {}
    deck = _yaml(results / "deck.yaml") or {}
    peaks = {
        fam: figures.finite(v.get("theoretical_gflops"))
        for fam, v in (ceilings.get("families") or {}).items()
        if isinstance(v, Mapping)
    }
    launch_us = figures.finite((ceilings.get("roofline") or {}).get("launch_us"))
    max_gen = config.get("max_generations")
    selected = list((deck.get("libraries") or {}).keys())
    on_disk = sorted(p.name for p in results.glob("Cijk_*") if p.is_dir()) if results.is_dir() else []
    # The deck names the run's libraries; folders of an earlier selection are not part of this run.
    names = sorted(libraries if libraries is not None else selected or on_disk)
    cache = Path(cache_dir) if cache_dir else None
    libs = []
    for name in names:
        lib_dir = results / name
        if not lib_dir.is_dir():
            continue
        entry = (deck.get("libraries") or {}).get(name) or {}
        fam = entry.get("family")
        libs.append(
            library_record(
                lib_dir, entry, peaks.get(fam) if fam else None, max_gen, cache, launch_us, write_cache
            )
        )
    for lib in libs:  # the family is certain only after the record is read
        if peaks.get(lib["family"]) is not None:
            for g in lib["generations"]:
                g["theoretical_gflops"] = peaks[lib["family"]]
    latest = [lib["latest"] for lib in libs if lib["latest"]]
    finals = [lib["final"] for lib in libs if lib["final"]]
    tol = figures.finite((config.get("benchmark") or {}).get("tie_tolerance"))
    numbers = sorted({n for lib in libs if (n := lib["numbers"])})
    backends = sorted({b for lib in libs if (b := lib["backend"])})
    package = config_block(config, "package") if config else {}
    arch = ceilings.get("arch") or config.get("arch") or results.name
    workload = {}
    if deck.get("workload"):  # what the run's workload calls, covered or not, and the time it saves
        rows = figures.workload_rows(finals, deck["workload"].get("files") or [])
        workload = {"workload": {"deck": deck["workload"], **rows}}
    ran = nights([lib for lib in libs if lib["final"]])
    # the seeds the finished libraries were tuned with: a folder re-run with another seed keeps its finals
    seeds = sorted({str(n["seed"]) for n in ran.values() if n.get("seed") is not None})
    return {
        **workload,
        "arch": arch,
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "state": _state(libs),
        "max_generations": max_gen,
        "seed": ", ".join(seeds) if seeds else config.get("seed"),
        "tie_tolerance": tol,
        "numbers": numbers,
        "backends": backends,
        "measurement": measurement_kinds(libs),
        # the runs that finished the libraries: nights accumulate in one folder
        "nights": ran,
        "simulated_build_banner": simulated_build_banner(numbers, package),
        "model_check": (
            model_check_for(arch, config, (deck.get("provenance") or {}).get("deck_of"))
            if "simulated" in numbers
            else None
        ),
        "peaks": peaks,
        "launch_us": launch_us,
        "libraries": libs,
        "coverage": _coverage(deck, libs),
        "rocblas": rocblas_clients(results),
        "current": {
            "families": figures.family_rows(latest, peaks),
            "libraries": figures.library_rows(latest, tol or 0.0),
            "overall": figures.overall(latest),
            "slowest": figures.slowest_sizes(latest),
        },
        "final": {
            "families": figures.family_rows(finals, peaks),
            "libraries": figures.library_rows(finals, tol or 0.0),
            "overall": figures.overall(finals),
            "native": figures.native_rows(finals),
            "slowest": figures.slowest_sizes(finals),
            "failures": figures.failure_totals(finals),
            # the same failures, split into the tuning generations' and the final measurement's (the
            # dashboard's chart draws both, so its bars sum to the report's figure)
            "failure_stages": figures.failures_by_stage([lib for lib in libs if lib["final"]]),
        },
    }


def measurement_kinds(libs: list[dict]) -> list[dict[str, Any]]:
    """The distinct ways the libraries were measured (launch order, telemetry, drift estimator and why),
    each with its libraries: what the reports say about how the numbers were taken."""
    kinds: dict[tuple, dict[str, Any]] = {}
    for lib in libs:
        m = lib.get("measurement") or {}
        if not m.get("drift"):
            continue
        fields = ("launch_order", "clock_telemetry", "drift", "drift_reason")
        entry = kinds.setdefault(
            tuple(m.get(k) for k in fields), {k: m.get(k) for k in fields} | {"libraries": []}
        )
        entry["libraries"].append(lib["library"])
    return list(kinds.values())


def generations_done(data: Mapping) -> tuple[int, int | None]:
    done = sum(len(lib["generations"]) for lib in data["libraries"])
    total = len(data["libraries"]) * data["max_generations"] if data.get("max_generations") else None
    return done, total


def as_array(values) -> np.ndarray:
    return np.asarray([np.nan if v is None else v for v in values], dtype=float)

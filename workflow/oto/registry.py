"""The experiment registry: everything ever proposed, rejected, built, benchmarked or failed, with provenance.

Two layers:

* **Per-job files** ``results/<arch>/<library>/gen<N>/registry.jsonl``, a declared output of each select
  job (Snakemake tracks them like any stage file). One JSON record per line and a final ``{"end": …}``
  line carrying the record count, so a half-written or corrupted file is detected line by line.
* **One consolidated store** ``results/<arch>/registry/registry.sqlite`` (SQLite), merged by the
  ``registry`` rule. It lives outside every rule's outputs on purpose: Snakemake deletes a job's outputs
  before rerunning it, and the store must outlive runs. Later runs in the same results folder read it, if
  present, as optional knowledge (mutate: evidence and transfer; emit: dedupe), which keeps the DAG static.

Why SQLite and not Parquet: it ships with Python (no new dependency on the GPU box), merges are
transactional (a killed consolidation leaves the previous store intact), a primary key gives dedupe by
(record kind, candidate, size, protocol, run) for free, and any tool can query it (``sqlite3``, pandas
``read_sql``, DuckDB's sqlite scanner). Parquet's columnar speed does not matter at tens of thousands of
rows.

Dedupe key of a measurement: (kernel id = hash of the canonical parameters, size, protocol). ``protocol``
hashes what makes two measurements comparable (backend, numbers, repetitions, tuning sizes); the same key
is never benchmarked twice unless a proposal is a deliberate top-up (proposer ``topup``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import oto
from oto.scoring import finite

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
KINDS = ("proposed", "rejected", "built", "benchmarked", "failed")
TOPUP = "topup"  # proposer of a deliberate re-measurement: allowed through dedupe
COLUMNS = (
    "kind",  # one of KINDS
    "kernel_id",
    "library",
    "family",
    "pattern",
    "arch",
    "generation",
    "proposer",
    "status",  # build or sample class (ok, illegal, duplicate, compile_error, timeout, …)
    "reason",
    "size",  # "M,N,B,K" for benchmarked/failed rows, "" otherwise
    "score",
    "ci_low",
    "ci_high",
    "time_us",
    "gflops",
    "params",  # canonical parameters, JSON
    "protocol",
    "config_hash",
    "backend",
    "numbers",  # simulated | replayed | measured
    "tool_versions",  # JSON: oto, backend model/Tensile versions
    "run_id",
    "recorded_at",  # unix time
    "source",  # per-job file the record came from
)
KEY = ("kind", "kernel_id", "library", "arch", "size", "protocol", "run_id", "generation")


class RegistryError(ValueError):
    pass


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def config_hash(config: Mapping) -> str:
    return _hash(config)


def protocol_of(config: Mapping) -> str:
    """What must match for two measurements to be the same experiment (computable before measuring, so
    mutate and emit can dedupe against it): backend choice, its settings, repetitions per cell."""
    bench = config.get("benchmark", {})
    backend = config.get("backend", "auto")
    return _hash(
        {
            "backend": backend,
            "backend_settings": config.get(backend if backend != "auto" else "sim"),
            "repetitions": bench.get("repetitions"),
            "bootstrap": bench.get("bootstrap"),
        }
    )


def run_id(config: Mapping) -> str:
    """Runs with the same config and seed are the same run (a resumed run is not a new one)."""
    return _hash({"config": config, "seed": config.get("seed")})


def size_key(size: Sequence) -> str:
    return ",".join(str(int(x)) for x in list(size)[:4])


def store_path(arch_dir: Path) -> Path:
    """The consolidated store of one ``results/<arch>`` folder."""
    return Path(arch_dir) / "registry" / "registry.sqlite"


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


# --- per-job files ---------------------------------------------------------------------------------------
def write_job_file(path: Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write records and the end marker atomically (tmp + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    n = 0
    with open(tmp, "w") as fh:
        for r in records:
            fh.write(json.dumps({c: _clean(r.get(c)) for c in COLUMNS}, sort_keys=True) + "\n")
            n += 1
        fh.write(json.dumps({"end": True, "records": n, "schema": SCHEMA_VERSION}) + "\n")
    tmp.replace(path)
    return n


@dataclass
class ReadResult:
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "<path>:<line>: what is wrong"


def read_job_file(path: Path) -> ReadResult:
    """Every well-formed record of a per-job file; problems name the file and line.

    A corrupted line is skipped (the other lines are still real measurements and are kept); a missing or
    wrong end marker means the file was cut short and is reported as half-written."""
    path = Path(path)
    out = ReadResult()
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        out.problems.append(f"{path}: cannot read ({exc})")
        return out
    end = None
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            out.problems.append(f"{path}:{no}: corrupted record ({exc.msg})")
            continue
        if not isinstance(rec, dict):
            out.problems.append(f"{path}:{no}: record is not an object")
        elif rec.get("end") is True:
            end = (no, rec.get("records"))
        elif rec.get("kind") not in KINDS or not rec.get("kernel_id") or not rec.get("library"):
            out.problems.append(f"{path}:{no}: record lacks a valid kind, kernel_id or library")
        else:
            out.records.append({c: rec.get(c) for c in COLUMNS} | {"source": str(path)})
    if end is None:
        out.problems.append(f"{path}: half-written (no end marker); kept {len(out.records)} readable records")
    elif end[1] != len(out.records):
        n = len(out.records)
        out.problems.append(f"{path}:{end[0]}: end marker counts {end[1]} records, {n} readable")
    return out


# --- building the records of one generation --------------------------------------------------------------
def generation_records(
    cands: Mapping,
    build: Mapping,
    scores: Sequence[Mapping],
    config: Mapping,
    arch: str,
    now: float | None = None,
) -> list[dict[str, Any]]:
    """Records of one select job: proposals, rejections, build outcomes and one row per (kernel, size)."""
    from oto.datatypes import Library

    prov = dict(build.get("provenance") or {})
    lib = Library.parse(cands["library"])
    versions = {"oto": oto.__version__}
    versions.update({k: v for k, v in prov.items() if "version" in k})
    base = {
        "library": lib.name,
        "family": lib.family.code,
        "pattern": lib.pattern,
        "arch": arch,
        "generation": int(cands["generation"]),
        "protocol": protocol_of(config),
        "config_hash": config_hash(config),
        "backend": prov.get("backend", ""),
        "numbers": prov.get("numbers", ""),
        "tool_versions": json.dumps(versions, sort_keys=True),
        "run_id": run_id(config),
        "recorded_at": now if now is not None else time.time(),
        "size": "",
    }
    kernels = {k["id"]: k for k in cands.get("kernels", [])}
    out = []
    for k in kernels.values():
        kind = "proposed" if "candidate" in k.get("roles", []) else "built"
        if kind == "proposed":
            out.append(_rec(base, "proposed", k, "new", k.get("rationale", "")))
    for r in cands.get("rejected", []):
        if r.get("id"):
            out.append(_rec(base, "rejected", r, r.get("class", ""), r.get("reason", "")))
    for b in build.get("kernels", []):
        k = kernels.get(b["id"], {"id": b["id"]})
        out.append(_rec(base, "built", k, b.get("status", ""), b.get("reason", "")))
    sizes = cands.get("sizes", [])
    for s in scores:
        k = kernels.get(str(s["kernel_id"]))
        if k is None:
            continue
        i = int(s["size_index"])
        ok = s.get("status") == "ok" and s.get("score") is not None and finite(s.get("score"))
        rec = _rec(base, "benchmarked" if ok else "failed", k, str(s.get("status", "")), "")
        rec["size"] = size_key(sizes[i]) if i < len(sizes) else str(i)
        for c in ("score", "ci_low", "ci_high", "time_us", "gflops"):
            rec[c] = finite(s.get(c))
        out.append(rec)
    return out


def _rec(base: Mapping, kind: str, k: Mapping, status: str, reason: str) -> dict[str, Any]:
    return {
        **base,
        "kind": kind,
        "kernel_id": k.get("id"),
        "proposer": k.get("proposer", ""),
        "status": status,
        "reason": reason,
        "params": json.dumps(k.get("params"), sort_keys=True),
    }


@dataclass
class Knowledge:
    """What earlier runs (the consolidated store) know about one library. Scores are estimated at the
    current tuning sizes from the sizes each kernel was measured at (:func:`size_transfer`)."""

    measured: set[str]  # kernel ids benchmarked at every given size under this protocol: never again
    rejected: set[str]  # kernel ids the legality checker rejected
    own: list[dict[str, Any]]  # this library's kernels {id, params, score}, best first
    family: list[dict[str, Any]]  # the other patterns of its family, best first (for transfer)


# Sizes whose (M, N, batch, K) differ by about 1.4x in each dimension still inform each other.
SIZE_BANDWIDTH = math.log(2) / 2
SIZE_PRIOR_WEIGHT = 0.05  # pull towards the kernel's overall geomean where no measured size is near


def _log_size(size: Sequence | str) -> list[float]:
    parts = size.split(",") if isinstance(size, str) else list(size)[:4]
    return [math.log(max(float(x), 1.0)) for x in parts]


def size_transfer(measured: Mapping[str, float], sizes: Sequence) -> float | None:
    """A kernel's geomean score over ``sizes``, estimated from its scores at the sizes it was measured at
    (``{"M,N,B,K": score}``): at each wanted size a Gaussian-weighted mean of the log scores by distance in
    log (M, N, batch, K), shrunk towards its overall geomean where nothing measured is near. A kernel that
    excelled at small sizes ranks high for a run tuning small sizes, not for one tuning large ones."""
    pts = [(_log_size(k), math.log(v)) for k, v in measured.items() if v and v > 0 and math.isfinite(v)]
    if not pts:
        return None
    overall = sum(v for _, v in pts) / len(pts)
    if not sizes:
        return math.exp(overall)
    logs = []
    for want in sizes:
        w0 = _log_size(want)
        num, den = SIZE_PRIOR_WEIGHT * overall, SIZE_PRIOR_WEIGHT
        for at, v in pts:
            d2 = sum((a - b) ** 2 for a, b in zip(at, w0, strict=False))
            w = math.exp(-d2 / (2 * SIZE_BANDWIDTH**2))
            num, den = num + w * v, den + w
        logs.append(num / den)
    return math.exp(sum(logs) / len(logs))


def knowledge(arch_dir: Path, arch: str, library: str, config: Mapping, sizes: Sequence) -> Knowledge | None:
    """Optional knowledge for mutate and emit: None when there is no store yet (first run)."""
    from oto.datatypes import Library

    db = Store.open_optional(store_path(arch_dir))
    if db is None:
        return None
    try:
        want = {size_key(s) for s in sizes}
        measured = {k for k, got in db.measured(arch, library, protocol_of(config)).items() if want <= got}
        fam = Library.parse(library).family.code
        per: dict[tuple[str, str], dict[str, Any]] = {}
        for r in db.size_scores(arch, "family = ?", (fam,)):
            k = per.setdefault((r["library"], r["kernel_id"]), {"params": r["params"], "sizes": {}})
            k["sizes"][r["size"]] = r["score"]
        kernels = [
            (
                lib,
                {
                    "id": kid,
                    "params": json.loads(k["params"] or "{}"),
                    "score": size_transfer(k["sizes"], sizes),
                },
            )
            for (lib, kid), k in per.items()
        ]
        kernels.sort(key=lambda lk: (-(lk[1]["score"] or 0.0), lk[1]["id"]))
        own = [k for lib, k in kernels if lib == library and k["score"] is not None]
        family = [k for lib, k in kernels if lib != library and k["score"] is not None]
        return Knowledge(measured, db.rejected(arch, library), own, family)
    except sqlite3.DatabaseError as exc:
        log.warning("ignoring the registry store %s: %s", db.path, exc)
        return None
    finally:
        db.close()


# --- the consolidated store ------------------------------------------------------------------------------
_REAL = ("score", "ci_low", "ci_high", "time_us", "gflops", "recorded_at")


def _sql_type(c: str) -> str:
    return "REAL" if c in _REAL else "INTEGER" if c == "generation" else "TEXT"


_DDL = f"""
CREATE TABLE IF NOT EXISTS records (
  {", ".join(f"{c} {_sql_type(c)}" for c in COLUMNS)},
  PRIMARY KEY ({", ".join(KEY)})
);
CREATE INDEX IF NOT EXISTS by_library ON records(arch, library, kind);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""


class Store:
    """The consolidated registry (SQLite). Open read-only for queries; ``merge`` is the only writer."""

    def __init__(self, path: Path, readonly: bool = True):
        self.path = Path(path)
        if readonly:
            if not self.path.is_file():
                raise RegistryError(f"{self.path}: no registry store")
            self.db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path)
        self.db.row_factory = sqlite3.Row
        try:
            if not readonly:
                self.db.executescript(_DDL)
            self.db.execute("SELECT 1 FROM records LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise RegistryError(f"{self.path}: not a readable registry store ({exc})") from None

    @classmethod
    def open_optional(cls, path: Path) -> Store | None:
        """The store as optional knowledge: None when absent; unreadable is logged, never fatal."""
        if not Path(path).is_file():
            return None
        try:
            return cls(path)
        except RegistryError as exc:
            log.warning("ignoring the registry store: %s", exc)
            return None

    def close(self) -> None:
        self.db.close()

    def merge(self, records: Iterable[Mapping[str, Any]]) -> int:
        rows = [tuple(r.get(c) for c in COLUMNS) for r in records]
        with self.db:  # one transaction: all or nothing
            before = self.db.total_changes
            marks = ", ".join("?" * len(COLUMNS))
            self.db.executemany(
                f"INSERT OR IGNORE INTO records ({', '.join(COLUMNS)}) VALUES ({marks})", rows
            )
            return self.db.total_changes - before

    def query(self, sql: str, params: Sequence = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self.db.execute(sql, params).fetchall()]

    def measured(self, arch: str, library: str, protocol: str) -> dict[str, set[str]]:
        """kernel id -> sizes already benchmarked (or failed) under this protocol."""
        out: dict[str, set[str]] = {}
        for r in self.db.execute(
            "SELECT kernel_id, size FROM records WHERE arch=? AND library=? AND protocol=? "
            "AND kind IN ('benchmarked', 'failed')",
            (arch, library, protocol),
        ):
            out.setdefault(r["kernel_id"], set()).add(r["size"])
        return out

    def rejected(self, arch: str, library: str) -> set[str]:
        return {
            r["kernel_id"]
            for r in self.db.execute(
                "SELECT DISTINCT kernel_id FROM records WHERE arch=? AND library=? AND kind='rejected' "
                "AND status='illegal'",
                (arch, library),
            )
        }

    def size_scores(self, arch: str, where: str, params: Sequence) -> list[dict[str, Any]]:
        """Per kernel, library and size: geometric-mean score over every run that benchmarked it there."""
        return self.query(
            "SELECT library, kernel_id, MAX(params) AS params, size, EXP(AVG(LN(score))) AS score "
            "FROM records WHERE arch=? AND kind='benchmarked' AND score > 0 AND "
            f"{where} GROUP BY library, kernel_id, size",
            (arch, *params),
        )

    def summary(self) -> dict[str, Any]:
        rows = self.query("SELECT kind, COUNT(*) AS n FROM records GROUP BY kind")
        libs = self.query("SELECT COUNT(DISTINCT library) AS n, COUNT(DISTINCT kernel_id) AS k FROM records")
        return {
            "records": {r["kind"]: r["n"] for r in rows},
            "libraries": libs[0]["n"],
            "kernels": libs[0]["k"],
        }


def consolidate(job_files: Sequence[Path], store: Path, out_summary: Path | None = None) -> dict[str, Any]:
    """Merge per-job files into the store; a bad file is reported and its readable records kept."""
    from oto.files import write_yaml

    problems: list[str] = []
    records: list[dict[str, Any]] = []
    for f in job_files:
        res = read_job_file(Path(f))
        problems += res.problems
        records += res.records
    for p in problems:
        log.warning("registry: %s", p)
    try:
        db = Store(store, readonly=False)
    except RegistryError as exc:
        # A corrupted store is set aside, never silently overwritten: its knowledge may be recoverable.
        broken = Path(store).with_suffix(f".corrupt-{int(time.time())}")
        Path(store).replace(broken)
        problems.append(f"{exc}; moved aside to {broken} and started a new store")
        log.warning("registry: %s", problems[-1])
        db = Store(store, readonly=False)
    try:
        added = db.merge(records)
        summary = {"store": str(store), "files": len(job_files), "added": added, **db.summary()}
    finally:
        db.close()
    summary["problems"] = problems
    if out_summary is not None:
        write_yaml(out_summary, summary)
    log.info("registry: merged %d files, %d new records into %s", len(job_files), added, store)
    return summary


# --- Kernel Tuner T4 export ------------------------------------------------------------------------------
def export_t4(store: Path, out: Path, arch: str | None = None, library: str | None = None) -> dict[str, Any]:
    """Write the registry's measurements as Kernel Tuner T4 results (schema 1.0.0).

    One result per (kernel, library, size) measurement or failure; ``configuration`` holds the Tensile
    parameters plus the problem (library, size) so results of different problems stay distinct."""
    db = Store(store)
    where, params = ["kind IN ('benchmarked', 'failed', 'rejected')"], []
    if arch:
        where.append("arch = ?")
        params.append(arch)
    if library:
        where.append("library = ?")
        params.append(library)
    rows = db.query(f"SELECT * FROM records WHERE {' AND '.join(where)} ORDER BY recorded_at", params)
    db.close()
    invalidity = {"illegal": "constraints", "duplicate": "constraints", "timeout": "timeout"}
    results = []
    for r in rows:
        ok = r["kind"] == "benchmarked"
        conf = {**json.loads(r["params"] or "{}"), "library": r["library"], "size": r["size"]}
        status = r["status"] or ""
        inval = "correct" if ok else invalidity.get(status, "runtime" if r["kind"] == "failed" else "compile")
        if status == "validation_failed":
            inval = "correctness"
        t_ms = (r["time_us"] or 0.0) / 1000.0
        results.append(
            {
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r["recorded_at"] or 0)),
                "configuration": conf,
                "times": {"runtimes": [t_ms] if ok else [], "compilation": 0, "framework": 0},
                "invalidity": inval,
                "correctness": 1 if ok else 0,
                "measurements": [
                    {"name": "time", "value": t_ms if ok else 0.0, "unit": "ms"},
                    {"name": "score", "value": r["score"] or 0.0, "unit": "ratio to reference"},
                    {"name": "GFLOP/s", "value": r["gflops"] or 0.0, "unit": "GFLOP/s"},
                ],
                "objectives": ["time"],
                "metadata": {
                    "kernel_id": r["kernel_id"],
                    "arch": r["arch"],
                    "generation": r["generation"],
                    "proposer": r["proposer"],
                    "backend": r["backend"],
                    "numbers": r["numbers"],
                    "protocol": r["protocol"],
                },
            }
        )
    doc = {"schema_version": "1.0.0", "metadata": {"tool": f"oto {oto.__version__}"}, "results": results}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return {"results": len(results), "out": str(out)}


def main(argv: Sequence[str] | None = None) -> int:
    """``oto registry export-t4 STORE OUT [--arch A] [--library L]`` and ``oto registry summary STORE``."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="oto registry")
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export-t4", help="write the registry as Kernel Tuner T4 results JSON")
    ex.add_argument("store", type=Path)
    ex.add_argument("out", type=Path)
    ex.add_argument("--arch")
    ex.add_argument("--library")
    su = sub.add_parser("summary", help="record counts of a registry store")
    su.add_argument("store", type=Path)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "export-t4":
            res = export_t4(args.store, args.out, args.arch, args.library)
            print(f"wrote {res['results']} T4 results to {res['out']}")
        else:
            db = Store(args.store)
            print(json.dumps(db.summary(), indent=1))
            db.close()
    except RegistryError as exc:
        print(f"oto registry: {exc}", file=sys.stderr)
        return 2
    return 0

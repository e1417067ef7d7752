"""The consolidated store ``results/<arch>/registry/registry.sqlite``: every job file merged in one
transaction, deduplicated by the records' key, queried by later runs and by ``oto registry``.

A store is checked before it is used (``PRAGMA quick_check``) and before a merge writes into it (``PRAGMA
integrity_check``): a file damaged inside (a bad disk block, a copy cut short) keeps a valid header, opens,
answers some queries and takes new rows, and would silently lose knowledge run after run. A damaged store
is moved aside (``registry.corrupt-<time>``, never deleted) and rebuilt from the job files, with every record
still readable in the damaged one; the merge summary says so."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oto.registry.gpu_journal import Quarantine
from oto.registry.job_files import read_job_file
from oto.registry.records import COLUMNS, KEY, RegistryError

log = logging.getLogger(__name__)


def store_path(arch_dir: Path) -> Path:
    """The consolidated store of one ``results/<arch>`` folder."""
    return Path(arch_dir) / "registry" / "registry.sqlite"


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


def integrity_problem(db: sqlite3.Connection, thorough: bool = False) -> str:
    """'' when SQLite finds the file sound, else its first complaint (``integrity_check`` also compares
    indexes with their tables; ``quick_check`` is linear and enough before a read)."""
    pragma = "integrity_check" if thorough else "quick_check"
    try:
        first = db.execute(f"PRAGMA {pragma}(1)").fetchone()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    verdict = str(first[0]) if first else "no answer"
    return "" if verdict == "ok" else " ".join(verdict.split())[:300]


def salvage(path: Path) -> list[dict[str, Any]]:
    """Every record still readable in a damaged store: a forward and a backward scan, each up to the first
    unreadable page, deduplicated by the records' key."""
    out: dict[tuple, dict[str, Any]] = {}
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    cols = ", ".join(COLUMNS)
    try:
        for order in ("ASC", "DESC"):
            try:
                cur = db.execute(f"SELECT {cols} FROM records ORDER BY rowid {order}")
                while rows := cur.fetchmany(500):
                    for r in rows:
                        rec = dict(zip(COLUMNS, r, strict=True))
                        out.setdefault(tuple(rec[k] for k in KEY), rec)
            except sqlite3.Error:
                continue
    finally:
        db.close()
    return list(out.values())


@dataclass(frozen=True)
class RunChain:
    """A run's own generations still on disk: ``run_id`` and the ``library/generation`` pairs whose job file
    exists. Their records are that run's selection chain, not knowledge from elsewhere."""

    run_id: str
    generations: frozenset[str]

    @classmethod
    def on_disk(cls, arch_dir: Path, run_id: str) -> RunChain:
        files = Path(arch_dir).glob("*/gen*/registry.jsonl")
        return cls(run_id, frozenset(f"{f.parts[-3]}/{f.parts[-2][3:]}" for f in files))


def outside(chain: RunChain | None) -> tuple[str, tuple]:
    """SQL (and its parameters) that leaves out a run's own chain. The store is merged once a run has
    selected every generation, so no job of the run saw those records the first time; a job Snakemake runs
    again (its profile view changed, a forced re-run) must not either, or it would reject its own candidates
    as already measured and lose its generation. Records of generations whose folders were deleted stay
    knowledge, like every earlier run's."""
    if chain is None or not chain.generations:
        return "", ()
    marks = ", ".join("?" * len(chain.generations))
    sql = f" AND NOT (run_id = ? AND library || '/' || generation IN ({marks}))"
    return sql, (chain.run_id, *sorted(chain.generations))


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
            damage = integrity_problem(self.db, thorough=not readonly)
            if damage:
                raise sqlite3.DatabaseError(f"failed its integrity check: {damage}")
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

    def measured(
        self, arch: str, library: str, protocol: str, chain: RunChain | None = None
    ) -> dict[str, set[str]]:
        """kernel id -> sizes already benchmarked (or failed) under this protocol (``chain``: records left
        out, see :func:`outside`)."""
        out: dict[str, set[str]] = {}
        skip, extra = outside(chain)
        for r in self.db.execute(
            "SELECT kernel_id, size FROM records WHERE arch=? AND library=? AND protocol=? "
            f"AND kind IN ('benchmarked', 'failed'){skip}",
            (arch, library, protocol, *extra),
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
        # what the timed records are: simulated, replayed or measured (a store can hold several kinds)
        kinds = self.query(
            "SELECT numbers, backend, COUNT(*) AS n FROM records WHERE kind = 'benchmarked' "
            "GROUP BY numbers, backend ORDER BY numbers, backend"
        )
        return {
            "records": {r["kind"]: r["n"] for r in rows},
            "numbers": {f"{r['numbers'] or 'unknown'} ({r['backend'] or '?'})": r["n"] for r in kinds},
            "libraries": libs[0]["n"],
            "kernels": libs[0]["k"],
        }


def _read_job_files(job_files: Sequence[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """(every readable record, the problems of the files that are not whole) of ``job_files``."""
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    for f in job_files:
        res = read_job_file(Path(f))
        problems += res.problems
        records += res.records
    return records, problems


def consolidate(job_files: Sequence[Path], store: Path, out_summary: Path | None = None) -> dict[str, Any]:
    """Merge per-job files into the store; a bad file is reported and its readable records kept."""
    from oto.files import write_yaml

    records, problems = _read_job_files(job_files)
    # kernels quarantined by the GPU-reset journal (gpu_reset), kept beside the store
    records += Quarantine(Path(store).parent / "quarantine.jsonl").records()
    for p in problems:
        log.warning("registry: %s", p)
    rebuilt: dict[str, Any] | None = None
    try:
        db = Store(store, readonly=False)
    except RegistryError as exc:
        # A damaged store is set aside, never silently overwritten or written into: what is still readable
        # in it goes into the new one, with every job file of this run.
        broken = Path(store).with_suffix(f".corrupt-{int(time.time())}")
        Path(store).replace(broken)
        kept = salvage(broken)
        records += kept
        # the job files of libraries this run did not select (an earlier run's families) are knowledge too
        mine = {Path(f).resolve() for f in job_files}
        others = [
            f
            for f in sorted(Path(store).parent.parent.glob("*/gen*/registry.jsonl"))
            if f.resolve() not in mine
        ]
        more, unread = _read_job_files(others)
        records += more
        problems += unread
        rebuilt = {
            "damaged": str(broken),
            "job_files": len(job_files) + len(others),
            "salvaged_records": len(kept),
        }
        problems.append(
            f"{exc}; moved aside to {broken} and rebuilt from {len(job_files) + len(others)} job file(s) "
            f"({len(others)} of them this run's jobs did not write) and {len(kept)} record(s) still readable "
            "in it"
        )
        log.warning("registry: %s", problems[-1])
        db = Store(store, readonly=False)
    try:
        added = db.merge(records)
        summary = {"store": str(store), "files": len(job_files), "added": added, **db.summary()}
    finally:
        db.close()
    if rebuilt is not None:
        summary["rebuilt"] = rebuilt
    summary["problems"] = problems
    if out_summary is not None:
        write_yaml(out_summary, summary)
    log.info("registry: merged %d files, %d new records into %s", len(job_files), added, store)
    return summary

"""Per-job registry files ``results/<arch>/<library>/gen<N>/registry.jsonl``: one JSON record per line and a
final ``{"end": …}`` line carrying the record count, so a half-written or corrupted file is detected line by
line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oto.registry.records import COLUMNS, KINDS, SCHEMA_VERSION, json_safe


def job_file_text(records: Iterable[Mapping[str, Any]]) -> tuple[str, int]:
    """The text of a job file (records, then the end marker) and its record count."""
    lines = [json.dumps({c: json_safe(r.get(c)) for c in COLUMNS}, sort_keys=True) for r in records]
    lines.append(json.dumps({"end": True, "records": len(lines), "schema": SCHEMA_VERSION}))
    return "\n".join(lines) + "\n", len(lines) - 1


def write_job_file(path: Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write records and the end marker atomically (tmp + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    text, n = job_file_text(records)
    tmp.write_text(text)
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

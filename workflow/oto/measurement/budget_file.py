"""results/<arch>/budget/gen<N>.yaml as a file: the shape mutate relies on, and its reader.
:func:`oto.measurement.budget.generation_budget` computes what goes into the file (once per generation, for
every library); each library's mutate job reads only its own entry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema

from oto.files import StageFileError, read_yaml

DECISIONS = ("runs", "starved", "converged")
# No bounds on the figures: the reader checks the shape, not the policy (a share rounded to -1e-15 is 0).
_SECONDS = {"type": "number"}
# The fields mutate reads, and the figures the decision used (the reports read them as they are).
BUDGET_SCHEMA = {
    "type": "object",
    "required": ["generation", "hours", "libraries", "allocations"],
    "properties": {
        "generation": {"type": "integer", "minimum": 1},
        "numbers": {"type": "string"},
        "hours": {"type": "number", "exclusiveMinimum": 0},
        "budget_s": _SECONDS,
        "spent_s": _SECONDS,
        "left_s": _SECONDS,
        "generations_left": {"type": "integer"},
        "equal_generations": {"type": "integer"},
        "libraries": {"type": "array", "items": {"type": "string"}},
        "swept": {"type": "array", "items": {"type": "string"}},  # config budget.sweep: done by now
        "swept_at": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},  # ... when
        "allocations": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["decision", "reason"],
                "properties": {
                    "decision": {"enum": list(DECISIONS)},
                    "reason": {"type": "string"},
                    "share_s": _SECONDS,
                    "generations": {"type": "integer", "minimum": 0},
                    "sweep": {"type": "integer", "minimum": 0},
                    "sweep_s": _SECONDS,
                    "owed_s": _SECONDS,
                    "expected_gain": {"type": "number"},
                    "gap_time_s": {"type": "number"},
                    "improvement": {"type": "number"},
                    "spent_s": _SECONDS,
                    "last_generation_s": _SECONDS,
                    "measured_generations": {"type": "integer", "minimum": 0},
                },
            },
        },
    },
}


def _field(path: Sequence[Any]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "<document>"


def read_budget(path: Path, generation: int, libraries: Sequence[str]) -> dict[str, Any]:
    """The budget file of ``generation``, checked against the run it is read in (``libraries``: the run's
    library set): a malformed file, one of another generation or one that names another library set is an
    error naming the file and the field."""
    doc = read_yaml(path)
    errors = sorted(
        jsonschema.Draft202012Validator(BUDGET_SCHEMA).iter_errors(doc), key=lambda e: list(e.absolute_path)
    )
    if errors:
        e = errors[0]
        raise StageFileError(
            f"{path}: field '{_field(e.absolute_path)}': {' '.join(e.message.split())[:200]}"
        )
    if doc["generation"] != generation:
        raise StageFileError(f"{path}: field 'generation': {doc['generation']}, but this is gen{generation}")
    named, run = doc["libraries"], sorted(libraries)
    if sorted(named) != run or len(set(named)) != len(named):
        missing, extra = sorted(set(run) - set(named)), sorted(set(named) - set(run))
        raise StageFileError(
            f"{path}: field 'libraries' names another library set than this run's {len(run)}"
            f"{': missing ' + ', '.join(missing) if missing else ''}"
            f"{'; not in this run: ' + ', '.join(extra) if extra else ''}"
            f"{'; named twice' if not missing and not extra else ''}"
        )
    if sorted(doc["allocations"]) != run:
        other = sorted(set(run) ^ set(doc["allocations"]))
        raise StageFileError(f"{path}: field 'allocations': not one entry per library ({', '.join(other)})")
    for key in ("swept", "swept_at"):
        stray = sorted(set(doc.get(key) or ()) - set(run))
        if stray:
            raise StageFileError(f"{path}: field '{key}': not this run's libraries ({', '.join(stray)})")
    if not set(doc.get("swept_at") or ()) <= set(doc.get("swept") or ()):
        extra = sorted(set(doc["swept_at"]) - set(doc.get("swept") or ()))
        raise StageFileError(f"{path}: field 'swept_at': {', '.join(extra)} not in 'swept'")
    for name, entry in doc["allocations"].items():  # a starved library says why; no other has a reason
        if (entry["decision"] == "starved") != bool(entry["reason"]):
            raise StageFileError(
                f"{path}: field 'allocations.{name}.reason': {entry['reason']!r} with decision "
                f"{entry['decision']} (a starved library says why, no other has a reason)"
            )
    return doc


def starved_reason(budget: Mapping[str, Any], library: str) -> str:
    """'starved at gen<N>: …' when the budget gives ``library`` no generation, else '' (it goes on, or it
    converged and convergence freezes it)."""
    entry = budget["allocations"][library]
    return f"starved {entry['reason']}" if entry["decision"] == "starved" else ""


def sweep_count(budget: Mapping[str, Any], library: str) -> int:
    """The fork-lattice kernels the budget has ``library`` add to its generation (config budget.sweep), 0
    for a library that does not run or a file from before the sweep."""
    entry = budget["allocations"][library]
    return int(entry.get("sweep", 0)) if entry["decision"] == "runs" else 0

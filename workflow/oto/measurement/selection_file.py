"""selection.yaml as a file: the shape the next stages rely on (mutate, select, finalize), and its reader.
:mod:`oto.measurement.selection` computes what goes into the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema

from oto.files import StageFileError, read_yaml_mirrored

_NUMBER_OR_NULL = {"type": ["number", "null"]}
# The fields of selection.yaml the next stages read (mutate, select, finalize); others pass through.
SELECTION_SCHEMA = {
    "type": "object",
    "required": ["generation", "per_size", "kernels", "summary", "convergence"],
    "properties": {
        "generation": {"type": "integer", "minimum": 0},
        "frozen": {"type": "boolean"},
        "sizes": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        "per_size": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["size_index"],
                "properties": {
                    "size_index": {"type": "integer", "minimum": 0},
                    "winner": {"type": ["string", "null"]},
                    "score": _NUMBER_OR_NULL,
                    "contenders": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["kernel", "score", "ci_low", "ci_high", "generation"],
                            "properties": {
                                "kernel": {"type": "string"},
                                "score": _NUMBER_OR_NULL,
                                "ci_low": _NUMBER_OR_NULL,
                                "ci_high": _NUMBER_OR_NULL,
                                "generation": {"type": "integer", "minimum": 0},
                            },
                        },
                    },
                },
            },
        },
        "kernels": {"type": "object", "additionalProperties": {"type": "object"}},
        "contender_kernels": {"type": "object", "additionalProperties": {"type": "object"}},
        "summary": {
            "type": "object",
            "properties": {
                "geomean_score": _NUMBER_OR_NULL,
                "failures": {"type": "object", "additionalProperties": {"type": "integer"}},
            },
        },
        "convergence": {
            "type": "object",
            "required": ["converged"],
            "properties": {
                "converged": {"type": "boolean"},
                "reason": {"type": "string"},
                "history": {"type": "array", "items": _NUMBER_OR_NULL},
            },
        },
        "observations": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "params"],
                "properties": {
                    "id": {"type": "string"},
                    "params": {"type": "object"},
                    "score": _NUMBER_OR_NULL,
                    "sizes_won": {"type": "integer"},
                },
            },
        },
        "measured": {"type": "array", "items": {"type": "string"}},
    },
}


def read_selection(path: Path) -> dict[str, Any]:
    """A selection.yaml, its shape checked: valid YAML of the wrong shape is an error naming the file and
    the field, not an AttributeError three calls later."""
    doc = read_yaml_mirrored(path)
    errors = sorted(
        jsonschema.Draft202012Validator(SELECTION_SCHEMA).iter_errors(doc),
        key=lambda e: list(e.absolute_path),
    )
    if errors:
        e = errors[0]
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path).lstrip(".")
        raise StageFileError(f"{path}: field '{field or '<document>'}': {' '.join(e.message.split())[:200]}")
    return doc

"""scores.csv (the normalise stage's output) as plain rows, for the select stage: one dict per (kernel, size),
typed as pandas reads the file (integers, floats with NaN for an empty cell, booleans, text), so that select
starts without loading pandas and its selection is the one a DataFrame would give."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from oto.files import StageFileError

INT_COLUMNS = frozenset({"size_index", "n", "excluded"})
FLOAT_COLUMNS = frozenset({"score", "ci_low", "ci_high", "time_us", "gflops"})
BOOL_COLUMNS = frozenset({"contender"})
_BOOLS = {"True": True, "False": False}


def missing(value: Any) -> bool:
    """An empty cell (read as NaN, like pandas) or an absent value."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _cell(column: str, text: str) -> Any:
    if text == "":
        return math.nan
    if column in INT_COLUMNS:
        return int(text)
    if column in FLOAT_COLUMNS:
        return float(text)
    if column in BOOL_COLUMNS:
        return _BOOLS[text]
    return text


def read_score_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a scores.csv; a malformed cell is an error naming the file, the line and the column."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        rows = []
        for row in reader:
            typed = {}
            for column, text in row.items():
                if column is None:
                    continue
                try:
                    typed[column] = _cell(column, text or "")
                except (ValueError, KeyError):
                    raise StageFileError(
                        f"{path}: line {reader.line_num}: column '{column}': {text!r} is not a valid value"
                    ) from None
            rows.append(typed)
    return rows

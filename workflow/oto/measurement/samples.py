"""samples.csv read back and checked: one row per timed launch (columns:
:data:`oto.measurement.scoring.SAMPLE_COLUMNS`, optional telemetry)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from oto.backends.base import SAMPLE_CLASSES
from oto.measurement.scoring import SAMPLE_COLUMNS, TELEMETRY_COLUMNS


def read_samples(path: Path) -> pd.DataFrame:
    """samples.csv, checked. An unparsable time becomes NaN (flagged and excluded later, with a reason);
    an unknown status or a non-integer seq/size_index is an error naming the file, field and row."""
    df = pd.read_csv(path, dtype={"kernel_id": str, "role": str, "status": str, "reason": str})
    missing = [c for c in SAMPLE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    df["reason"] = df["reason"].fillna("")
    known = {*SAMPLE_CLASSES, "bad_timing"}
    unknown = df.index[~df["status"].isin(known)]
    if len(unknown):
        i, names = unknown[0], ", ".join(sorted(known))
        raise ValueError(f"{path}: field 'status' row {i + 2}: {df.at[i, 'status']!r} is not one of {names}")
    for col in ("seq", "size_index"):
        v = pd.to_numeric(df[col], errors="coerce")
        bad = df.index[v.isna() | (v != v.round())]
        if len(bad):
            raise ValueError(
                f"{path}: field '{col}' row {bad[0] + 2}: {df.at[bad[0], col]!r} is not an integer"
            )
        df[col] = v.astype(int)
    df["time_us"] = pd.to_numeric(df["time_us"], errors="coerce")
    # Telemetry is optional (older files, backends without an observer); an unreadable value is no reading.
    for col in TELEMETRY_COLUMNS:
        df[col] = pd.to_numeric(df[col], errors="coerce") if col in df.columns else np.nan
    return df

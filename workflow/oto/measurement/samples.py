"""samples.csv read back and checked: one row per timed launch (columns:
:data:`oto.measurement.scoring.SAMPLE_COLUMNS`, then the optional
:data:`~oto.measurement.scoring.MEASUREMENT_COLUMNS`: telemetry, sweep and the backend's capabilities)."""

from __future__ import annotations

from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from oto.backends.base import CLOCK_TELEMETRY, LAUNCH_ORDERS, SAMPLE_CLASSES
from oto.measurement.scoring import SAMPLE_COLUMNS, measurement_facts


def read_samples(path: Path | IO[bytes], name: str | None = None) -> pd.DataFrame:
    """samples.csv, checked. An unparsable time becomes NaN (flagged and excluded later, with a reason);
    an unknown status or a non-integer seq/size_index is an error naming the file (``name``: how to name an
    open stream, e.g. a bundle's member), field and row."""
    text = {c: str for c in ("kernel_id", "role", "status", "reason", *TEXT_COLUMNS)}
    df = pd.read_csv(path, dtype=text)
    path = name or path
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
    for col in NUMERIC_COLUMNS:
        df[col] = pd.to_numeric(df[col], errors="coerce") if col in df.columns else np.nan
    sweep = pd.to_numeric(df["sweep"], errors="coerce") if "sweep" in df.columns else None
    df["sweep"] = -1 if sweep is None else sweep.fillna(-1).astype(int)
    df["telemetry_note"] = df["telemetry_note"].fillna("") if "telemetry_note" in df.columns else ""
    # Files from before the backends declared capabilities: plan order, per-launch clocks if any were read.
    order, telemetry = measurement_facts(df)
    for col, value, known in (
        ("launch_order", order, LAUNCH_ORDERS),
        ("clock_telemetry", telemetry, CLOCK_TELEMETRY),
    ):
        if col in df.columns and len(df) and not df[col].isin(known).all():
            i = df.index[~df[col].isin(known)][0]
            raise ValueError(
                f"{path}: field '{col}' row {i + 2}: {df.at[i, col]!r} is not one of {', '.join(known)}"
            )
        df[col] = df[col] if col in df.columns else value
    return df


NUMERIC_COLUMNS = ("clock_mhz", "temperature_c", "power_w")
TEXT_COLUMNS = ("telemetry_note", "launch_order", "clock_telemetry")

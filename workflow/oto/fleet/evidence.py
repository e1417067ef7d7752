"""What a bundle's own measurements say, recomputed: the merge takes no score, winner or speed-up on a
bundle's word.

Per library, the finalize race's samples (``samples/<library>/final.csv``) are scored as the finalize stage
scores them (:func:`oto.measurement.scoring.score_library`: every timing checked against the device's peak
and the backend's launch timeout, drift-normalised, bootstrap intervals) and its winners picked as it picks
them (:func:`oto.measurement.selection.per_size_rows`); every generation's samples
(``samples/<library>/gen<N>.csv``) are scored the same way. Then the bundle's claims are held against them:

* ``final.yaml``: at each size the named winner must have been measured there without failing, must not be
  measurably slower than the best kernel the samples found (its interval entirely below the best's), and its
  claimed score and GFLOPS must lie in the recomputed interval widened by the tie tolerance; where the
  reference failed every launch (no score: verdict ``floor_failed``) both must say so, and the winner must
  have passed there and be no slower than the fastest kernel that passed, by the tolerance;
* each benchmarked registry record: its score in the recomputed interval of its generation's samples, its
  time and GFLOPS consistent with the size's flops, its time within the backend's launch timeout.

A disagreement rejects the bundle, naming the size and the kernel. What the merge combines is the recomputed
:class:`LibraryEvidence`, never the claims.
"""

from __future__ import annotations

import io
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from oto.fleet.archive import Archive, Rejected
from oto.fleet.text import quote
from oto.gemm import Library, gemm_flops
from oto.measurement.benchmarking import RACE_BOOTSTRAP
from oto.measurement.dispatch import one_kernel_per_key
from oto.measurement.samples import read_samples
from oto.measurement.scoring import ImplausibleReference, launch_timeout_us, score_library
from oto.measurement.selection import FLOOR_FAILED, floor_failed_winners, per_size_rows, race_status
from oto.registry.records import size_key

_KERNEL = re.compile(r"^k[0-9a-f]{12}$")
_GEN = re.compile(r"^samples/(?P<library>[^/]+)/gen(?P<gen>\d{1,4})\.csv$")
ROLES = frozenset({"reference", "candidate"})
CONSISTENT = 1e-3  # relative: time x GFLOPS against the size's flops (rounding, not measurement)
MEASURED = ("score", "ci_low", "ci_high", "gflops", "status", "source", "generation")  # one measurement
MAX_SIZES = 10000  # size indices of one samples file


@dataclass
class LibraryEvidence:
    """One library in one bundle, as its samples say: the final rows the finalize stage would write, every
    (kernel, deck size) measurement (``source``: final race or tuning generation), the reference each size
    ran against, and the parameters of the kernels that can win."""

    final: list[dict[str, Any]] | None = None
    measured: dict[tuple[str, int], list[dict]] | None = field(default_factory=lambda: defaultdict(list))
    references: dict[int, str] = field(default_factory=dict)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    spilled: Path | None = None  # where the measurements went (spill)

    def spill(self, path: Path) -> None:
        """Write the measurements to ``path`` and keep only what the merge needs of the rest (each size's
        winner, score and GFLOPS; the parameters of winners and references): a merge then holds one library
        of every bundle at a time, not every bundle whole."""
        self.frame().to_csv(path, index=False)
        self.measured, self.spilled = None, Path(path)
        keep = {r["winner"] for r in self.final or [] if r.get("winner")} | set(self.references.values())
        self.params = {k: v for k, v in self.params.items() if k in keep}
        if self.final is not None:
            slim = ("size_index", "winner", "score", "gflops")
            self.final = [{k: r.get(k) for k in slim} for r in self.final]

    def frame(self) -> pd.DataFrame:
        """Every measurement as a table (kernel, size_index, then :data:`MEASURED`), from memory or from where
        it was spilled."""
        if self.measured is None:
            return pd.read_csv(self.spilled, dtype={"kernel": str, "status": str, "source": str})
        rows = [(k, i, *(m[c] for c in MEASURED)) for (k, i), ms in self.measured.items() for m in ms]
        return pd.DataFrame(rows, columns=["kernel", "size_index", *MEASURED])


@dataclass(frozen=True)
class Scoring:
    """How the merge scores: the config it scores with (bootstrap, seed, the backends' launch timeouts), the
    device profile, the tie tolerance, the kind of numbers the bundle says it holds."""

    config: Mapping[str, Any]
    profile: Mapping[str, Any]
    numbers: str

    @property
    def tolerance(self) -> float:
        return float(self.config["benchmark"]["tie_tolerance"])


def final_samples_name(library: str) -> str:
    return f"samples/{library}/final.csv"


def is_samples_member(name: str) -> bool:
    return bool(_GEN.match(name)) or (name.startswith("samples/") and name.endswith("/final.csv"))


def library_evidence(
    archive: Archive,
    library: str,
    deck_sizes: Sequence[Sequence[int]],
    claimed: Mapping[str, Any] | None,
    records: Sequence[Mapping[str, Any]],
    params: Mapping[str, Mapping[str, Any]],
    scoring: Scoring,
) -> LibraryEvidence:
    """The library's evidence, its claims checked against it (raises Rejected)."""
    lib = Library.parse(library)
    ev = LibraryEvidence(params=dict(params))
    name = final_samples_name(library)
    if claimed is not None and name not in archive:
        raise Rejected(
            f"results/{library}/final.yaml: no {name}: its claims cannot be checked against measurements"
        )
    if claimed is None and name in archive:
        raise Rejected(f"{name}: the finalize race of {library} without its results/{library}/final.yaml")
    if claimed is not None:
        df = _samples(archive, name, scoring.numbers, deck_sizes)
        scores = _score(df, lib, [list(s[:4]) for s in deck_sizes], scoring, name)
        generation = max(0, int(claimed.get("generations") or 1) - 1)
        ev.final = per_size_rows(
            scores, [list(s[:4]) for s in deck_sizes], lib, scoring.profile, scoring.tolerance, generation
        )
        ev.references = _references(df)
        status = race_status(scores)  # where the reference failed every launch, the fastest that passed
        for r in ev.final:
            r["shipped_status"] = status.get((int(r["size_index"]), ev.references.get(int(r["size_index"]))))
        ev.final = floor_failed_winners(ev.final, scores)
        # the claims are what finalize wrote: one kernel per runtime key; the merge's candidates stay each
        # size's own best (it serves each group one kernel itself: oto.fleet.combine.merged_rows)
        served = one_kernel_per_key(ev.final, scores, deck_sizes, scoring.tolerance)
        check_final(claimed, served, scores, deck_sizes, library, scoring.tolerance)
        _add(ev, scores, {i: [i] for i in range(len(deck_sizes))}, "final", None)
    by_key: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(deck_sizes):
        by_key[size_key(s)].append(i)
    tuned: dict[tuple[int, str, str], dict[str, Any]] = {}
    for member in sorted(n for n in archive.index if (m := _GEN.match(n)) and m["library"] == library):
        gen = int(_GEN.match(member)["gen"])
        df = _samples(archive, member, scoring.numbers, None)
        sizes = _sizes_of(df, member)
        scores = _score(df, lib, sizes, scoring, member, RACE_BOOTSTRAP)
        for r in scores:
            tuned[(gen, r["kernel_id"], size_key(sizes[int(r["size_index"])]))] = r
        to_deck = {i: by_key.get(size_key(s), []) for i, s in enumerate(sizes)}
        _add(ev, scores, to_deck, "tuning", gen)
    check_records(records, tuned, library, lib, scoring)
    for i, row in enumerate(ev.final or []):
        if row.get("winner") and row["winner"] not in ev.params:
            raise Rejected(
                f"results/{library}/final.yaml: field 'kernels': the parameters of {row['winner']}, "
                "the kernel "
                f"its samples pick at size {i} {list(deck_sizes[i][:4])}, are missing"
            )
    return ev


def _samples(
    archive: Archive, name: str, numbers: str, deck_sizes: Sequence[Sequence[int]] | None
) -> pd.DataFrame:
    """A samples member read and checked for structure: ids, roles, kinds of numbers, sizes."""
    try:
        df = read_samples(io.BytesIO(archive.read(name)), name)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise Rejected(f"{name}: not a samples file ({quote(str(exc), 160)})") from None
    bad = df.index[~df["kernel_id"].astype(str).str.fullmatch(_KERNEL.pattern)]
    if len(bad):
        raise Rejected(
            f"{name}: row {bad[0] + 2}: field 'kernel_id': {quote(df.at[bad[0], 'kernel_id'])} "
            "is not a kernel id"
        )
    bad = df.index[~df["role"].isin(ROLES)]
    if len(bad):
        raise Rejected(
            f"{name}: row {bad[0] + 2}: field 'role': {quote(df.at[bad[0], 'role'])} "
            f"is not one of {', '.join(sorted(ROLES))}"
        )
    bad = df.index[df["source"].astype(str) != numbers]
    if len(bad):
        raise Rejected(
            f"{name}: row {bad[0] + 2}: field 'source': {quote(df.at[bad[0], 'source'])}, "
            f"the bundle says {numbers}"
        )
    for col in ("m", "n", "batch", "k"):
        v = pd.to_numeric(df[col], errors="coerce")
        bad = df.index[~(v >= 1) | (v != v.round())]
        if len(bad):
            raise Rejected(
                f"{name}: row {bad[0] + 2}: field '{col}': {quote(df.at[bad[0], col])} is not a size"
            )
        df[col] = v.astype(int)
    if deck_sizes is not None:
        want = {i: tuple(int(x) for x in s[:4]) for i, s in enumerate(deck_sizes)}
        for row in df[["size_index", "m", "n", "batch", "k"]].drop_duplicates().itertuples(index=False):
            if want.get(int(row[0])) != tuple(row[1:]):
                raise Rejected(
                    f"{name}: size_index {row[0]} is {list(row[1:])}, not a size of this merge's deck "
                    f"({list(want.get(int(row[0]), ())) or 'out of range'})"
                )
    return df


def _sizes_of(df: pd.DataFrame, name: str) -> list[list[int]]:
    """A generation's tuning sizes, from its samples: one [M, N, B, K] per size_index."""
    cols = ["size_index", "m", "n", "batch", "k"]
    sizes = df[cols].drop_duplicates()
    if sizes["size_index"].duplicated().any() or len(sizes) and sizes["size_index"].min() < 0:
        raise Rejected(f"{name}: a size_index names two sizes, or is negative")
    if len(sizes) and sizes["size_index"].max() >= MAX_SIZES:
        raise Rejected(f"{name}: field 'size_index': {sizes['size_index'].max()} (at most {MAX_SIZES} sizes)")
    out: list[list[int]] = [[1, 1, 1, 1]] * (int(sizes["size_index"].max()) + 1 if len(sizes) else 0)
    for row in sizes.itertuples(index=False):
        out[int(row[0])] = [int(x) for x in row[1:]]
    return out


def _score(
    df: pd.DataFrame, lib: Library, sizes: list[list[int]], scoring: Scoring, name: str, bootstrap=None
) -> list[dict]:
    """Scores as the run computes them (``bootstrap``: resamples of the intervals, the config's by default;
    a tuning generation's, checked against its registry only, take the racing rounds' count)."""
    try:
        scores = score_library(df, lib, sizes, scoring.profile, scoring.config, bootstrap=bootstrap)
    except ImplausibleReference as exc:
        raise Rejected(f"{name}: {exc}") from None
    return scores.to_dict("records")


def _references(df: pd.DataFrame) -> dict[int, str]:
    ref = df[df["role"] == "reference"].drop_duplicates("size_index")
    return {int(i): str(k) for i, k in zip(ref["size_index"], ref["kernel_id"], strict=True)}


def _add(ev: LibraryEvidence, scores: list[dict], to_deck: Mapping[int, list[int]], source: str, gen) -> None:
    for r in scores:
        for i in to_deck.get(int(r["size_index"]), []):
            ev.measured[(str(r["kernel_id"]), i)].append(
                {
                    "score": _num(r["score"]),
                    "ci_low": _num(r["ci_low"]),
                    "ci_high": _num(r["ci_high"]),
                    "gflops": _num(r["gflops"]),
                    "status": str(r["status"]),
                    "source": source,
                    "generation": gen,
                }
            )


def _num(x: Any) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def _within(value: float, low: float, high: float, tolerance: float) -> bool:
    return low * (1 - tolerance) * (1 - 1e-9) <= value <= high * (1 + tolerance) * (1 + 1e-9)


def check_final(
    claimed: Mapping[str, Any],
    derived: list[dict[str, Any]],
    scores: list[dict],
    deck_sizes: Sequence[Sequence[int]],
    library: str,
    tolerance: float,
) -> None:
    """The claimed final rows against the recomputed ones (see the module doc); raises Rejected."""
    by = {(str(r["kernel_id"]), int(r["size_index"])): r for r in scores}
    for row in claimed["per_size"]:
        kid, i = row.get("winner"), int(row["size_index"])
        if not kid:
            continue
        where = f"results/{library}/final.yaml: size {i} {list(deck_sizes[i][:4])}: kernel {kid}"
        mine, best = by.get((kid, i)), derived[i]
        if row.get("verdict") == FLOOR_FAILED or best.get("verdict") == FLOOR_FAILED:
            _check_floor_failed(row, mine, best, where, tolerance)
            continue
        if mine is None or mine["status"] != "ok" or _num(mine["score"]) is None:
            status = "never measured" if mine is None else f"measured {mine['status']}"
            raise Rejected(f"{where} is named the winner, but its own samples have it {status} there")
        s, lo, hi = (
            mine["score"],
            _num(mine["ci_low"]) or mine["score"],
            _num(mine["ci_high"]) or mine["score"],
        )
        if best.get("winner") != kid and best.get("ci_low") is not None and hi < best["ci_low"]:
            raise Rejected(
                f"{where} is named the winner, but its own samples measure it at {s:.3g}x "
                f"[{lo:.3g}, {hi:.3g}] "
                f"against {best['winner']} at {best['score']:.3g}x: measurably slower"
            )
        if not _within(float(row["score"]), lo, hi, tolerance):
            raise Rejected(
                f"{where}: final.yaml claims score {row['score']:.4g}, its own samples give {s:.4g} "
                f"[{lo:.4g}, {hi:.4g}]"
            )
        g = _num(mine["gflops"])
        if g and not _within(float(row["gflops"]), g * lo / s, g * hi / s, tolerance):
            raise Rejected(
                f"{where}: final.yaml claims {row['gflops']:.4g} GFLOPS, its own samples give {g:.4g}"
            )


def _check_floor_failed(
    row: Mapping[str, Any], mine: Mapping | None, best: Mapping[str, Any], where: str, tolerance: float
) -> None:
    """A size claimed won where the reference failed (no score: oto.measurement.selection.
    floor_failed_winners), or one the samples say is such a size: both must say so, the winner must have
    passed there and not be slower than the fastest kernel that passed by more than the tolerance, and its
    GFLOPS must be its own samples'."""
    if row.get("verdict") != best.get("verdict"):
        said = "the reference failed there" if row.get("verdict") == FLOOR_FAILED else "a score against it"
        raise Rejected(f"{where} is named the winner with {said}, but its own samples have the reference "
                       f"{best.get('shipped_status') or 'not measured'} there")  # fmt: skip
    if mine is None or mine["status"] != "ok" or _num(mine["time_us"]) is None:
        status = "never measured" if mine is None else f"measured {mine['status']}"
        raise Rejected(f"{where} is named the winner, but its own samples have it {status} there")
    fastest = _num(best["gflops"])
    g = _num(mine["gflops"])
    if fastest and g and g * (1 + tolerance) < fastest:
        raise Rejected(
            f"{where} is named the winner where the reference failed, but its own samples measure it at "
            f"{g:.4g} GFLOPS against {best['winner']} at {fastest:.4g}: measurably slower"
        )
    if row.get("score") is not None or not g or not _within(float(row.get("gflops") or 0), g, g, tolerance):
        raise Rejected(
            f"{where}: final.yaml claims score {quote(row.get('score'))} and {quote(row.get('gflops'))} "
            f"GFLOPS where the reference failed; its own samples give no score and {g or 0:.4g} GFLOPS"
        )


def check_records(
    records: Sequence[Mapping[str, Any]],
    tuned: Mapping[tuple[int, str, str], Mapping[str, Any]],
    library: str,
    lib: Library,
    scoring: Scoring,
) -> None:
    """Benchmarked registry records against their generation's samples, and against physics."""
    timeout = launch_timeout_us(scoring.config, [scoring.numbers])
    for no, rec in enumerate(records, 1):
        if rec["kind"] != "benchmarked":
            continue
        what = f"{rec['kernel_id']} at {rec['size']}, gen{rec['generation']}"
        where = f"registry/{library}.jsonl: record {no} ({what})"
        t, g = float(rec["time_us"]), float(rec["gflops"])
        flops = gemm_flops(lib.family, *(int(x) for x in str(rec["size"]).split(",")))
        if t > timeout:
            raise Rejected(
                f"{where}: field 'time_us': {t:.3g} us is longer than the backend's launch timeout "
                f"{timeout:.3g} us"
            )
        if abs(flops / (t * 1e3) / g - 1) > CONSISTENT:
            raise Rejected(
                f"{where}: fields 'time_us' and 'gflops': {t:.4g} us is {flops / (t * 1e3):.4g} GFLOPS "
                "at this "
                f"size, not the {g:.4g} claimed"
            )
        mine = tuned.get((int(rec["generation"]), str(rec["kernel_id"]), str(rec["size"])))
        if mine is None or _num(mine["score"]) is None:
            raise Rejected(f"{where}: no samples of samples/{library}/gen{rec['generation']}.csv measure it")
        s = float(mine["score"])
        lo, hi = _num(mine["ci_low"]) or s, _num(mine["ci_high"]) or s
        if not _within(float(rec["score"]), lo, hi, scoring.tolerance):
            raise Rejected(
                f"{where}: field 'score': {rec['score']:.4g}, its samples give {s:.4g} [{lo:.4g}, {hi:.4g}]"
            )

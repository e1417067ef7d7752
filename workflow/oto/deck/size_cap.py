"""A cap on the sizes of each library's deck (config ``deck.max_sizes``): a deterministic, representative
sample for a demo, never for a night that should cover the footprint.

navi31's smallest libraries ship 512 sizes each, vega10's demo libraries 8 and 125; finalize, verify, compare
and the reports visit every deck size, so a demo of navi31's families takes several times the work per job
of gfx90c's. A library with more sizes than the cap keeps, in the deck's own order:

1. every size a workload calls (config ``deck.workload``; heaviest first): a workload GEMM is never dropped,
   and when they alone exceed the cap they are all kept and the record says so;
2. then the rest spread over the library: its other sizes ordered by flops, then M, N, K, split by batch
   count (each batch count keeps at least one size while the cap allows, the slots shared in proportion to
   the sizes of each), and evenly spaced quantiles taken of each (the smallest and the largest included), so
   small, medium and huge sizes and every batch count stay represented.

The sample depends on the library's sizes, its workload calls and the cap alone: the same deck, the same
sample. Each capped library's ``deck.yaml`` carries ``size_cap`` (:func:`cap_library`), and
``results/<arch>/deck.yaml``, the acceptance report, the run's summary and ``oto plan`` say "N of M shipped
sizes kept (deck.max_sizes: K)" (:func:`kept_text`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oto.deck.model import DeckError, LibraryDeck

FIELD = "deck.max_sizes"


@dataclass(frozen=True)
class SizeCap:
    """Config ``deck.max_sizes``: the most sizes a library's deck keeps (None: every size)."""

    max_sizes: int | None = None

    def __post_init__(self) -> None:
        cap = self.max_sizes
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise DeckError(
                f"config field '{FIELD}': {cap!r} is not a number of sizes (an integer >= 1, or null)"
            )

    @classmethod
    def from_config(cls, deck_config: Mapping[str, Any]) -> SizeCap:
        """From the validated config's ``deck`` block (the schema states the default: null)."""
        return cls(deck_config["max_sizes"])

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> SizeCap:
        """From the deck rule's settings (oto.deck.sources.deck_settings: ``max_sizes`` only when set)."""
        return cls(settings.get("max_sizes"))

    def sample(self, sizes: Sequence[Sequence[int]], calls: Sequence[int] | None = None) -> list[int]:
        """The indices of the sizes a library keeps, in the deck's order (every index without a cap, or
        with no more sizes than it)."""
        n, cap = len(sizes), self.max_sizes
        if cap is None or n <= cap:
            return list(range(n))
        called = sorted((i for i in range(n) if calls and calls[i] > 0), key=lambda i: (-calls[i], i))
        if len(called) >= cap:  # the workload alone fills the cap: keep every size it calls, none else
            return sorted(called)
        kept = set(called)
        rest = sorted((i for i in range(n) if i not in kept), key=lambda i: _order(sizes[i], i))
        strata: dict[int, list[int]] = {}
        for i in rest:
            strata.setdefault(int(sizes[i][2]), []).append(i)
        slots = _share(cap - len(called), {b: len(g) for b, g in strata.items()})
        for batch, group in strata.items():
            kept.update(group[p] for p in quantiles(len(group), slots[batch]))
        return sorted(kept)


def _order(size: Sequence[int], index: int) -> tuple:
    """Sizes ordered by flops (M·N·batch·K), then M, N, K, batch."""
    m, n, b, k = (int(v) for v in size[:4])
    return (m * n * b * k, m, n, k, b, index)


def _share(slots: int, counts: Mapping[int, int]) -> dict[int, int]:
    """``slots`` shared among the strata (batch count → sizes): one each first while the slots allow (the
    largest strata first), the rest one at a time to the stratum with most sizes per slot (D'Hondt; ties:
    the smaller batch count), never more than a stratum holds."""
    got = {b: 0 for b in counts}
    order = sorted(counts, key=lambda b: (-counts[b], b))
    for b in order[: min(slots, len(order))]:
        got[b] = 1
    left = slots - sum(got.values())
    while left > 0:
        open_ = [b for b in order if got[b] < counts[b]]
        if not open_:
            break
        b = max(open_, key=lambda x: (counts[x] / (got[x] + 1), -x))
        got[b] += 1
        left -= 1
    return got


def quantiles(m: int, k: int) -> list[int]:
    """``k`` evenly spaced positions of ``m`` ordered items, the first and last included (k = 1: the
    median); every position when k >= m. Integer arithmetic: the same positions on every machine."""
    if k <= 0:
        return []
    if k >= m:
        return list(range(m))
    if k == 1:
        return [(m - 1) // 2]
    return [(j * (m - 1) + (k - 1) // 2) // (k - 1) for j in range(k)]


def cap_library(lib: LibraryDeck, cap: SizeCap) -> dict[str, Any] | None:
    """Keep ``lib``'s sample (:meth:`SizeCap.sample`) in place: sizes, shipped entries, weights and calls
    alike (its solutions stay: the best shipped kernel is still chosen among all of them). Returns the
    record its ``deck.yaml`` carries as ``size_cap``, or None when the library has no more sizes than the cap
    (then nothing changes). Weights of a workload's library are the caller's to recompute."""
    keep = cap.sample(lib.sizes, lib.calls)
    if len(keep) == len(lib.sizes):
        return None
    called = sum(1 for c in lib.calls or [] if c > 0)
    shipped = bool(lib.solutions) and all(s is not None for s in lib.shipped)  # no size a workload added
    record = {
        "max_sizes": cap.max_sizes,
        "kept": len(keep),
        "of": len(lib.sizes),
        "of_what": "shipped sizes" if shipped else "deck sizes",
        "workload_sizes": called,
    }
    if called > cap.max_sizes:
        record["note"] = f"the workload calls {called} sizes, more than the cap: every one is kept"
    dropped = set(range(len(lib.sizes))) - set(keep)
    if lib.floor is None and any(lib.shipped[i] is not None for i in dropped):
        # the own floor keeps every shipped row: a size the cap kept that has no row of its own (a workload's)
        # is served from the nearest row of the whole file, as by the spoof library (a workload that filled
        # the cap left no row at all: an IndexError in every job that asked for its reference)
        rows = [i for i, s in enumerate(lib.shipped) if s is not None]
        lib.floor_rows = {"sizes": [lib.sizes[i] for i in rows], "shipped": [lib.shipped[i] for i in rows]}
    lib.sizes = [lib.sizes[i] for i in keep]
    lib.shipped = [lib.shipped[i] for i in keep]
    lib.weights = [lib.weights[i] for i in keep]
    if lib.calls is not None:
        lib.calls = [lib.calls[i] for i in keep]
    lib.size_cap = record
    return record


def kept_text(kept: int, of: int, caps: Iterable[int], of_what: str = "shipped sizes") -> str:
    """The sentence every page repeats: N of M shipped sizes kept (deck.max_sizes: K)."""
    shown = ", ".join(str(c) for c in sorted(set(caps)))
    return f"{kept:,} of {of:,} {of_what} kept ({FIELD}: {shown})"


def cap_summary(libraries: Mapping[str, LibraryDeck], max_sizes: int | None) -> dict[str, Any] | None:
    """``results/<arch>/deck.yaml``'s ``size_cap``: over the delivered libraries, the sizes kept of those
    their source has, each capped library's counts and the sentence the reports repeat; None when no
    library is capped and no cap is configured."""
    capped = {n: lib.size_cap for n, lib in libraries.items() if lib.size_cap}
    if not capped and max_sizes is None:
        return None
    kept = sum(len(lib.sizes) for lib in libraries.values())
    of = sum(int((lib.size_cap or {}).get("of", len(lib.sizes))) for lib in libraries.values())
    caps = {int(r["max_sizes"]) for r in capped.values()} or {int(max_sizes)}
    what = {r.get("of_what", "shipped sizes") for r in capped.values()}
    of_what = "shipped sizes" if what <= {"shipped sizes"} else "deck sizes"
    out: dict[str, Any] = {
        "max_sizes": max_sizes,
        "kept": kept,
        "of": of,
        "text": kept_text(kept, of, caps, of_what)
        + ("" if capped else ": every library within the cap, the whole footprint"),
        "libraries_capped": {
            n: {"kept": r["kept"], "of": r["of"], **({"note": r["note"]} if r.get("note") else {})}
            for n, r in sorted(capped.items())
        },
    }
    return out

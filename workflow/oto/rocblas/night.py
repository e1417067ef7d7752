"""A night's libraries as verify and compare see them: the arms (which kernel each installation runs at
each deck size, from the finals and the decks), the label's environment, the ranking finalize's race gives
each size (for the next verified candidate), what replaces a kernel verification took out, and the record
a rule writes when no backend offers rocBLAS's client.

- The **tuned** arm runs each size's winner (where the size has none, the nearest size's: Tensile serves a
  size without a row from the nearest row), under the label's environment: ``HSA_OVERRIDE_GFX_VERSION``
  of the profile's ``stock_library`` when the library is labelled as the stock library's arch.
- The **spoof** arm is rocBLAS's own stock library under the override: each size's shipped kernel.
- The **upstream** arm is a ROCm whose rocBLAS supports the arch natively (ROCm 7 maps gfx90c to vega10's
  logic): the same shipped kernels without the override, through its own ``rocblas-bench``
  (``rocblas.upstream_bench``). On the simulated GPU it runs upstream's own library for the GPU where the
  deck has one (config ``deck.native_floor``: gfx1103's stub and copied folder), else the spoof's kernels,
  which the model cannot tell apart from the spoof: its upstream figures then say nothing beyond the spoof's.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from oto.config import config_defaults
from oto.deck.model import LibraryDeck
from oto.gemm import Library
from oto.measurement.scoring import score_library
from oto.measurement.selection import FLOOR_FAILURES
from oto.rocblas.clients import Arm, ClientRunner, arm_kernels
from oto.rocblas.compare import compare_document, compare_scores, failed_calls, family_summary, run_compare
from oto.rocblas.decisions import apply_replacements  # noqa: F401  (the stages call it here)
from oto.rocblas.verify import (
    KERNEL_FAILURES,
    NEAREST_ROW,
    SPOOF_KERNEL,
    changes_summary,
    decide,
    run_verify,
    verify_document,
)
from oto.tensile.labels import StockLibrary, logic_label
from oto.tensile.legality import Limits
from oto.tensile.logic_writer import write_library_logic
from oto.tensile.packaging import package_library

ARMS = ("tuned", "spoof", "upstream")
log = logging.getLogger(__name__)


def label_environment(profile: Mapping[str, Any], label: str) -> dict[str, str]:
    """The variables a user sets for a library labelled ``label`` (README, "Install"): the stock library's
    override when the label is the stock arch's, nothing for the native label."""
    _, arch, _ = logic_label(profile, label)
    if arch == str(profile["arch"]):
        return {}
    return {"HSA_OVERRIDE_GFX_VERSION": StockLibrary.of(profile).hsa_override_gfx_version}


def shipped_kernels(deck: LibraryDeck, profile: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """Each deck size's shipped (spoof-floor) kernel, ``{size_index: {id, params}}``."""
    return deck.references(list(range(len(deck.sizes))), Limits.from_profile(profile))


def tuned_choice(final: Mapping[str, Any], shipped: Mapping[int, Mapping[str, Any]]) -> list[str]:
    """The kernel the tuned library runs at each size, as Tensile picks a logic row: the rows nearest the size
    by its runtime key (Euclidean in M, N and K: the batch count is not in the key, oto.measurement.dispatch),
    and among those the one with the highest GFLOPS. A size with a winner is served its own row's kernel
    unless another size of its key has a faster row; a size without one is served from the nearest rows; the
    shipped kernel where no size of the library has a winner."""
    rows = {int(r["size_index"]): r for r in final["per_size"]}
    keys = np.asarray([[float(s[0]), float(s[1]), float(s[3])] for s in final["sizes"]]).reshape(-1, 3)
    held = [i for i in range(len(keys)) if (rows.get(i) or {}).get("winner")]
    speed = np.asarray([float(rows[i].get("gflops") or 0.0) for i in held])
    out = []
    for i in range(len(keys)):
        if not held:
            out.append(str((shipped.get(i) or {}).get("id") or ""))
            continue
        distance = ((keys[held] - keys[i]) ** 2).sum(axis=1)
        nearest = np.flatnonzero(distance == distance.min())
        served = held[int(nearest[np.argmax(speed[nearest])])]  # the first of equal speeds, as Tensile scans
        out.append(str(rows[served]["winner"]))
    return out


def arms(
    finals: Mapping[str, Mapping[str, Any]],
    decks: Mapping[str, LibraryDeck],
    profile: Mapping[str, Any],
    label: str,
    tuned_libpath: str | None,
    upstream_bench: str | None,
) -> dict[str, Arm]:
    """The three arms over every library (see the module doc). ``finals``: library -> final document (as
    verify left it: :func:`apply_replacements`)."""
    kernels: dict[str, dict] = {a: {} for a in ARMS}
    params: dict[str, dict] = {a: {} for a in ARMS}
    for library, final in finals.items():
        deck = decks[library]
        shipped = shipped_kernels(deck, profile)
        sizes = final["sizes"]
        stock = [str((shipped.get(i) or {}).get("id") or "") for i in range(len(sizes))]
        kernels["tuned"].update(arm_kernels(library, sizes, tuned_choice(final, shipped)))
        # upstream's own library where the deck has it; a size it has no kernel for keeps the stock one
        native = deck.native_references(list(range(len(sizes))), Limits.from_profile(profile))
        upstream = [str((native.get(i) or {}).get("id") or stock[i]) for i in range(len(sizes))]
        kernels["spoof"].update(arm_kernels(library, sizes, stock))
        kernels["upstream"].update(arm_kernels(library, sizes, upstream))
        stock_params = {str(r["id"]): dict(r["params"]) for r in shipped.values() if r.get("id")}
        native_params = {str(r["id"]): dict(r["params"]) for r in native.values() if r.get("id")}
        params["tuned"].update({**stock_params, **{str(k): dict(v) for k, v in final["kernels"].items()}})
        params["spoof"].update(stock_params)
        params["upstream"].update({**stock_params, **native_params})
    override = {"HSA_OVERRIDE_GFX_VERSION": StockLibrary.of(profile).hsa_override_gfx_version}
    return {
        "tuned": Arm(
            "tuned", tuned_libpath, label_environment(profile, label), kernels["tuned"], params["tuned"]
        ),
        "spoof": Arm("spoof", None, override, kernels["spoof"], params["spoof"]),
        "upstream": Arm("upstream", None, {}, kernels["upstream"], params["upstream"], bench=upstream_bench),
    }


def race_scores(
    final: Mapping[str, Any], samples: pd.DataFrame, profile: Mapping[str, Any], config: Mapping[str, Any]
) -> pd.DataFrame:
    """The final's race scored as finalize scored it (:func:`oto.measurement.scoring.score_library`): each
    (kernel, size)'s score against the floor, paired and drift-normalised, and its median time and GFLOPS at
    the peak state, bad timings left out. Only the point estimates are read here, so one resample does."""
    library = Library.parse(final["library"])
    sizes = [list(s[:4]) for s in final["sizes"]]
    return score_library(samples, library, sizes, profile, config, bootstrap=1)


def race_ranking(final: Mapping[str, Any], scores: pd.DataFrame) -> dict[int, list[str]]:
    """Per size, the final's kernels that passed there, best first as finalize ranks them: by score (the
    winner's order), and where the floor failed (no score) by median time at the peak state, as
    :func:`oto.measurement.selection.floor_failed_winners` picks. Raw median times would trust launches
    scoring flags as impossible and ignore the clock's drift (on the gfx902 demo they disagreed with finalize
    at 5 of 10 sizes)."""
    ok = scores[(scores["status"] == "ok") & scores["kernel_id"].isin([str(k) for k in final["kernels"]])]
    out: dict[int, list[str]] = {}
    for i, group in ok.groupby("size_index", sort=True):
        kernels, score, time_us = group["kernel_id"].astype(str), group["score"], group["time_us"]
        keyed = [
            ((0, -s, k) if math.isfinite(s) else (1, t, k))
            for k, s, t in zip(kernels, score, time_us, strict=True)
            if math.isfinite(s) or math.isfinite(t)
        ]
        out[int(i)] = [k[2] for k in sorted(keyed)]
    return out


def verify_entries(
    final: Mapping[str, Any], scores: pd.DataFrame | None, shipped: Mapping[int, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``per_size`` for :func:`oto.rocblas.verify.decide`: each size's winner (the kernel the tuned library
    runs there: :func:`tuned_choice`), its shipped kernel and whether that one failed there in finalize's race
    (then it is no last resort), and the race's ranking of the final's kernels there (:func:`race_ranking`;
    ``scores``: :func:`race_scores`; None where verification failed no kernel, so no ranking is read)."""
    ranking = race_ranking(final, scores) if scores is not None else {}
    choice = tuned_choice(final, shipped)
    status = {int(r["size_index"]): r.get("shipped_status") for r in final["per_size"]}
    return [
        {
            "size_index": i,
            "winner": choice[i],
            "shipped": str((shipped.get(i) or {}).get("id") or ""),
            "ranking": ranking.get(i, []),
            "shipped_failed": status.get(i) in FLOOR_FAILURES,
        }
        for i in range(len(final["sizes"]))
    ]


def replacements(
    final: Mapping[str, Any],
    scores: pd.DataFrame | None,
    shipped: Mapping[int, Mapping[str, Any]],
    changes: Sequence[Mapping[str, Any]],
) -> dict[int, dict[str, Any]]:
    """What the logic stage writes at each size verify took a kernel out of: ``{size_index: {kernel, params,
    gflops, how}}``; GFLOPS from finalize's race (``scores``: :func:`race_scores`; a next candidate's at the
    peak state, as the final's rows; the shipped kernel's: the winner's GFLOPS over its score, its speed-up
    over it). A size left to the nearest size's row has no kernel (None)."""
    if not changes:  # ``scores`` is None where verification failed no kernel
        return {}
    rows = {int(r["size_index"]): r for r in final["per_size"]}
    measured = {
        (int(i), str(k)): float(g)
        for i, k, g in zip(scores["size_index"], scores["kernel_id"], scores["gflops"], strict=True)
    }
    out: dict[int, dict[str, Any]] = {}
    for c in changes:
        i, kid = int(c["size_index"]), str(c["replacement"])
        if c["how"] == NEAREST_ROW:
            out[i] = {"kernel": None, "params": None, "gflops": None, "how": c["how"]}
            continue
        if c["how"] == SPOOF_KERNEL:
            row = rows.get(i) or {}
            score = float(row.get("score") or math.nan)
            gflops = float(row.get("gflops") or math.nan) / score if score > 0 else math.nan
            params = dict((shipped.get(i) or {}).get("params") or {})
        else:
            gflops = measured.get((i, kid), math.nan)
            params = dict(final["kernels"][kid])
        out[i] = {"kernel": kid, "params": params, "gflops": round(gflops, 6), "how": c["how"]}
    return out


def skipped(kind: str, reason: str) -> dict[str, Any]:
    """The record verify or compare writes where no backend offers rocBLAS's client."""
    return {"skipped": True, "reason": f"skipped, because {reason}", "numbers": "none", "stage": kind}


def install(logic: Sequence[Path], profile: Mapping, label: str, config: Mapping, folder: Path) -> Path:
    """Logic files as a library rocBLAS loads (TensileCreateLibrary's code objects) in ``folder``, for
    ``ROCBLAS_TENSILE_LIBPATH``. Only for the real client: the model reads no library."""
    package_library(
        [Path(p) for p in logic],
        profile,
        label,
        folder / "TensileLibrary.dat",
        manifest=folder / "manifest.yaml",
        tensile_cfg=config.get("tensile") or {},
        create_library="always",
        allow_simulated=bool((config.get("package") or {}).get("allow_simulated", False)),
    )
    return folder


def verify_night(
    runner: ClientRunner,
    what: str,
    finals: Mapping[str, Mapping[str, Any]],
    samples: Mapping[str, pd.DataFrame],
    decks: Mapping[str, LibraryDeck],
    profile: Mapping,
    config: Mapping,
    label: str,
    work: Path,
) -> dict[str, Any]:
    """verify.yaml's document: every library's deck sizes through ``runner`` with the tuned library
    installed (the real client: the finals written as logic and built in ``work``), each library's
    decision and the replacements the logic stage writes."""
    libpath = None
    if runner.numbers == "measured":
        logic = []
        for library, final in finals.items():
            logic.append(work / "logic" / f"{library}.yaml")
            write_library_logic(final, decks[library], profile, label, logic[-1], source=library)
        libpath = str(install(logic, profile, label, config, work / "library"))
    arm = arms(finals, decks, profile, label, libpath, None)["tuned"]
    rows, decisions, repl = [], [], {}
    for library, final in finals.items():
        shipped = shipped_kernels(decks[library], profile)
        lib_rows = run_verify(runner, arm, library, final["sizes"])
        # the race is scored again (seconds on a deck of thousands of sizes) only where a kernel failed:
        # decide reads a ranking only to replace one
        failed = any(r.status in KERNEL_FAILURES and r.kernel_id for r in lib_rows)
        scores = race_scores(final, samples[library], profile, config) if failed else None
        decision = decide(library, verify_entries(final, scores, shipped), lib_rows)
        repl[library] = replacements(final, scores, shipped, [c.as_dict() for c in decision.changes])
        rows += lib_rows
        decisions.append(decision)
        for c in decision.changes:  # each size in the rule's log; the terminal gets a line per kernel
            log.info("verify: %s size %d: %s out (%s); %s %s", library, c.size_index, c.removed, c.why,
                     c.how, c.replacement)  # fmt: skip
        for line in changes_summary(library, decision.changes):
            log.warning("verify: %s", line)
    doc = verify_document(rows, decisions, {**runner.provenance(), "what": what})
    doc["environment"] = arm.environment()
    for library, entry in doc["libraries"].items():
        entry["replacements"] = repl[library]
    return doc


def baseline_failures(finals: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, dict[int, str]]]:
    """Per baseline arm, library → {size: why}: the sizes where the arm's kernel gave wrong results in
    finalize's race (compare times the arms without validating, so a speed-up over such a kernel means
    nothing). The spoof arm runs each size's shipped kernel; the upstream arm the native floor's where the
    size has one, else the shipped one (:func:`arms`)."""
    out: dict[str, dict[str, dict[int, str]]] = {"spoof": {}, "upstream": {}}
    for library, final in finals.items():
        for row in final.get("per_size") or []:
            i = int(row["size_index"])
            shipped = row.get("shipped_status")
            upstream = row.get("native_status") if row.get("native") else shipped
            for arm, status in (("spoof", shipped), ("upstream", upstream)):
                if status == "validation_failed":
                    out[arm].setdefault(library, {})[i] = "its kernel failed validation in finalize's race"
    return out


def simulated_upstream_note(decks: Mapping[str, LibraryDeck], stock: StockLibrary) -> str:
    """What the simulated upstream arm ran: upstream's own library (the native floor) or the spoof's."""
    native = sorted(name for name, deck in decks.items() if deck.native_floor is not None)
    spoofed = (
        f"the spoof's {stock.logic_prefix} ({stock.arch}) kernels without the override: the model times them "
        "alike"
    )
    if not native:
        return f"it runs {spoofed}"
    if len(native) == len(decks):
        return "it runs upstream's own library for the GPU (config deck.native_floor)"
    return (
        f"it runs upstream's own library (deck.native_floor) for {len(native)} of {len(decks)} libraries, "
        f"else {spoofed}"
    )


def compare_night(
    runner: ClientRunner,
    what: str,
    finals: Mapping[str, Mapping[str, Any]],
    decks: Mapping[str, LibraryDeck],
    logic: Sequence[Path],
    profile: Mapping,
    config: Mapping,
    label: str,
    work: Path,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """compare.yaml's document and every call's sample: the tuned library (``finals`` as verify left them;
    the real client installs the package's own ``logic`` in ``work``) against the spoof and the upstream
    path, scored by the races' statistics (config ``benchmark.bootstrap`` and ``tie_tolerance``)."""
    cfg = {**config_defaults("rocblas"), **(config.get("rocblas") or {})}
    bench = {**config_defaults("benchmark"), **(config.get("benchmark") or {})}
    measured = runner.numbers == "measured"
    libpath = str(install(logic, profile, label, config, work / "library")) if measured else None
    arm = arms(finals, decks, profile, label, libpath, cfg.get("upstream_bench"))
    baselines, notes = ["spoof", "upstream"], {}
    if measured and not cfg.get("upstream_bench"):
        baselines.remove("upstream")
        notes["upstream"] = (
            "skipped, because config field 'rocblas.upstream_bench' names no upstream ROCm client"
        )
    elif not measured:
        notes["upstream"] = simulated_upstream_note(decks, StockLibrary.of(profile))
    seed, boot, tie = int(config.get("seed") or 0), int(bench["bootstrap"]), float(bench["tie_tolerance"])
    parts, scores = [], {b: {} for b in baselines}
    for library, final in finals.items():
        use = [arm["tuned"], *(arm[b] for b in baselines)]
        df = run_compare(runner, use, library, final["sizes"], int(cfg["repetitions"]), seed)
        parts.append(df.assign(library=library))
        for b in baselines:
            pair = df[df["kernel_id"].isin(["tuned", b])]
            scores[b][library] = compare_scores(pair, library, final["sizes"], b, boot, seed)
    samples = pd.concat(parts, ignore_index=True)
    wrong = baseline_failures(finals)
    summaries = {b: family_summary(scores[b], "tuned", tie, boot, seed, wrong[b]) for b in baselines}
    for b in baselines:  # the baseline's own failed calls, which its speed-ups cannot show
        for fam, calls in failed_calls(samples, b).items():
            if fam in summaries[b]:
                summaries[b][fam]["baseline_calls_failed"] = calls
    doc = compare_document(summaries, "tuned", samples, {**runner.provenance(), "what": what})
    doc.update(notes=notes, repetitions=int(cfg["repetitions"]))
    return doc, samples

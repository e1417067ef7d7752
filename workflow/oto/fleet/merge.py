"""``oto merge``: many testers' bundles → one ``results/<arch>/``.

Every bundle is checked in full first (:mod:`oto.fleet.intake`): structure and numbers reject it (it merges
nothing and is listed with its reason, the others go on), text is quarantined, and every score, winner and
speed-up is recomputed from its samples (:mod:`oto.fleet.evidence`); claims its own measurements contradict
reject it. Accepted bundles are kept, by their sha256, under ``results/<arch>/fleet/bundles/``, and every
merge starts again from all of them, so a later bundle for the same shard *adds* evidence and nothing is ever
silently replaced (a byte-identical copy counts once).

Devices combine by the statistics (:mod:`oto.fleet.combine`): scores are ratios to the reference measured on
the same device; a kernel any device measured slower than the spoof or a shipped kernel never ships on
another device's word; the report shows who measured what.

A merge is a transaction (:mod:`oto.fleet.transaction`): one at a time per folder (a lock), written into a
staging folder moved into place at the end, so a killed merge leaves the previous result whole and the next
merge cleans up by itself. Bundles are opened one at a time and streamed (bounded memory); their registry
records go straight into the merged store; the new bundles of one merge share a budget of inflated bytes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import oto
from oto.deck.model import Deck, DeckError, LibraryDeck, write_deck_yaml, write_library_yaml
from oto.deck.shards import Shard
from oto.deck.size_cap import SizeCap
from oto.deck.sources import (
    attach_floor,
    attach_native_floor,
    cap_deck,
    deck_settings,
    plan_native_floor,
    run_source,
)
from oto.files import atomic_write_text, read_yaml, write_yaml, write_yaml_mirrored
from oto.fleet import split_passthrough
from oto.fleet.archive import Budget, Limits, Rejected
from oto.fleet.bundle import SUFFIX, file_sha256
from oto.fleet.calibrate import CALIBRATED, calibrated_profiles
from oto.fleet.combine import Contribution, merge_library, rounded
from oto.fleet.intake import Accepted, Expect, open_bundle
from oto.fleet.text import printable
from oto.fleet.transaction import (
    COMPLETE,
    KeptBundles,
    MergeError,
    begin,
    commit,
    copy_verified,
    merge_lock,
    recover,
)
from oto.hardware.ceilings import ceilings_document, family_peak_gflops
from oto.hardware.simulated.checks import model_check_for
from oto.registry.store import Store
from oto.tensile import legality
from oto.tensile.labels import logic_label
from oto.tensile.logic_writer import write_library_logic
from oto.tensile.provenance import logic_record, record_path, write_record

__all__ = ["MergeError", "MergeSettings", "bundle_files", "merge", "main"]
log = logging.getLogger(__name__)
STATE = "merge.yaml"


@dataclass
class MergeSettings:
    arch: str
    arch_profile: dict[str, Any]
    config: dict[str, Any]  # validated: deck, package.label, benchmark (tolerance, bootstrap), sim/tensile
    numbers: str = "measured"
    tensile_version: str | None = None
    limits: Limits = field(default_factory=Limits)


@dataclass
class Outcome:
    accepted: list[Accepted] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)
    duplicates: list[dict[str, str]] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # sha256 → where the bundle came from
    records: dict[str, int] = field(default_factory=dict)  # sha256 → registry records merged
    measurements: dict[str, str] = field(default_factory=dict)  # Accepted.measurements → the bundle's name
    new: Counter = field(default_factory=Counter)  # this merge's own bundles: given, accepted
    spill: Path = Path(".")  # a scratch folder for the accepted bundles' measurements (one file per library)


def bundle_files(sources: Iterable[Path], skipped: list[Path] | None = None) -> list[Path]:
    """The bundle archives named, or found in the given folders and their subfolders (named *.oto.tar.gz,
    as oto writes them). ``skipped``: given a list, the folders' other files are added to it, so that a
    bundle renamed on its way (night.tgz, "x (1).tar.gz") is named rather than passed over in silence."""
    out = []
    for src in sources:
        src = Path(src)
        if src.is_dir():
            files = sorted(p for p in src.rglob("*") if p.is_file() and not p.name.startswith("."))
            out += [p for p in files if p.name.endswith(SUFFIX)]
            if skipped is not None:
                skipped += [p for p in files if not p.name.endswith(SUFFIX)]
        elif src.is_file():
            out.append(src)
        else:
            raise MergeError(f"{printable(src)}: no such file or folder")
    return out


def _guard(arch_dir: Path) -> None:
    """Never overwrite a tuning run: a merge writes into an empty folder or one an earlier merge wrote."""
    if not arch_dir.exists() or (arch_dir / "fleet" / STATE).is_file():
        return
    if any(arch_dir.glob("Cijk_*/gen*")) or any(
        p.name not in ("fleet", CALIBRATED) for p in arch_dir.iterdir()
    ):
        raise MergeError(
            f"{arch_dir} holds a tuning run or other files, not an earlier merge; merge into another folder "
            "(oto merge --out merged/)"
        )


def merge_deck(config: Mapping[str, Any], arch_profile: Mapping) -> Deck:
    """The deck bundles are judged against: the config's deck source for the arch's stock library, capped as
    the config caps it (deck.max_sizes: the sizes the nights tuned). The tester's merge check reads it too."""
    deck_setup = deck_settings(config["deck"], arch_profile)
    deck = run_source(deck_setup).load()
    cap_deck(deck, SizeCap.from_settings(deck_setup))
    return deck


def shipped_kernels(deck: Deck, arch_profile: Mapping) -> Callable[[str], dict[str, dict]]:
    """library → {kernel id: parameters} of its shipped kernels as Tensile resolves them (the references)."""
    limits = legality.Limits.from_profile(arch_profile)

    @functools.cache
    def of(library: str) -> dict[str, dict]:
        lib = deck.libraries[library]
        refs = lib.references(list(range(len(lib.sizes))), limits)
        return {r["id"]: r["params"] for r in refs.values() if r["id"]}

    return of


def native_kernels(lib: LibraryDeck, limits: legality.Limits) -> dict[int, str]:
    """Deck size → upstream's own kernel for the GPU there (the native floor's pick; {} without one)."""
    refs = lib.native_references(list(range(len(lib.sizes))), limits)
    return {i: r["id"] for i, r in refs.items() if r["id"]}


def expectation(settings: MergeSettings, deck: Deck, pinned: str | None) -> Expect:
    sizes = {name: lib.sizes for name, lib in deck.libraries.items()}
    shipped = shipped_kernels(deck, settings.arch_profile)
    return Expect(
        settings.arch, settings.arch_profile, settings.numbers, pinned, sizes, settings.config, shipped
    )


def _open_one(
    path: Path, sha: str, settings: MergeSettings, expect: Expect, store: Store, outcome: Outcome, name: str
) -> Accepted | None:
    """Open one bundle; an accepted one's records go into the store at once, its measurements to the spill
    folder (``outcome.spill``), and both leave memory."""
    try:
        b = open_bundle(path, expect, settings.limits, sha)
    except Rejected as exc:
        outcome.rejected.append({"file": printable(name), "sha256": sha, "reason": printable(exc)})
        return None
    if b.measurements and (first := outcome.measurements.get(b.measurements)) is not None:
        why = "its samples are that bundle's (packed again, or copied)"
        outcome.duplicates.append(
            {"file": printable(name), "same_as": printable(first), "sha256": sha, "why": why}
        )
        return None
    if b.measurements:
        outcome.measurements[b.measurements] = name
    rows = [
        {**r, "run_id": f"{r.get('run_id')}@{b.device_id}", "source": f"bundle:{sha[:16]}/{lib}"}
        for lib, recs in b.records.items()
        for r in recs
    ]
    store.merge(rows)
    outcome.records[sha] = len(rows)
    b.records = {}  # in the store now
    for lib, ev in b.evidence.items():  # one library of every bundle in memory at a time, not every bundle
        ev.spill(outcome.spill / f"{sha[:16]}-{lib}.csv")
    keep = ("provenance", "generations", "converged")
    b.finals = {lib: {k: f.get(k) for k in keep} for lib, f in b.finals.items()}
    b.path = Path(name)
    outcome.accepted.append(b)
    return b


def open_all(
    kept: KeptBundles,
    new: Sequence[Path],
    settings: MergeSettings,
    deck: Deck,
    pinned: str | None,
    store: Store,
    known: Mapping[str, Mapping[str, Any]],
    spill: Path,
) -> tuple[Outcome, str | None]:
    """Open the kept bundles, then the new ones (copied into staging first, verified: what is checked is
    what is kept); the first accepted Tensile version pins the rest (unless given)."""
    outcome, seen = Outcome(spill=spill), {}
    budget = Budget(settings.limits.merge_bytes)
    queue = [
        (p, s, (known.get(s) or {}).get("source") or str(kept.committed / p.name), None) for p, s in kept.good
    ]
    queue += [(None, None, str(Path(f).resolve()), Path(f)) for f in new]
    for path, sha, source, new_file in queue:
        name = new_file.name if new_file else str((known.get(sha) or {}).get("file") or path.name)
        sha = sha or file_sha256(new_file)
        if sha in seen:
            outcome.duplicates.append(
                {"file": printable(name), "same_as": printable(seen[sha]), "sha256": sha}
            )
            continue
        if new_file is not None:
            if budget.left <= 0:
                why = (
                    f"not opened: this merge's budget of {settings.limits.merge_bytes} inflated bytes across "
                    "its new bundles is spent; merge it in another run"
                )
                outcome.rejected.append({"file": printable(name), "sha256": sha, "reason": why})
                continue
            path, copied = copy_verified(new_file, kept.staging)
            if copied != sha:
                path.unlink(missing_ok=True)
                outcome.rejected.append(
                    {"file": printable(name), "sha256": sha, "reason": "changed while it was being merged"}
                )
                continue
        expect = expectation(settings, deck, pinned)
        duplicates = len(outcome.duplicates)
        b = _open_one(path, sha, settings, expect, store, outcome, name)
        if new_file is not None and len(outcome.duplicates) == duplicates:  # a duplicate is not refused
            outcome.new.update(given=1, accepted=int(b is not None))
        if new_file is not None:
            budget.charge(b.inflated if b else path.stat().st_size)
        if b is None:
            if new_file is not None:
                path.unlink(missing_ok=True)
            continue
        seen[sha] = name
        outcome.sources[sha] = source
        tensile = b.descriptor["provenance"].get("tensile_version")
        if pinned is None and isinstance(tensile, str):
            pinned = tensile
    return outcome, pinned


# -- the whole merge ---------------------------------------------------------------------------------------


def merge(sources: Sequence[Path], out: Path, settings: MergeSettings, lock: bool = True) -> dict[str, Any]:
    """Merge the bundles in ``sources`` (files or folders) with every bundle merged before into
    ``out/<arch>/``, as a transaction. Returns the merge document (also ``fleet/merge.yaml``). ``lock``:
    False when the caller holds the merge lock already."""
    out = Path(out)
    arch_dir = out / settings.arch
    with merge_lock(out, settings.arch) if lock else contextlib.nullcontext():
        recovered = recover(out, settings.arch)
        if recovered:
            log.warning("oto merge: %s", recovered)
        _guard(arch_dir)
        staging = begin(out, settings.arch)
        try:
            doc = _merge_into(staging, arch_dir, sources, settings, recovered)
            commit(staging, arch_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return doc


def _merge_into(
    staging: Path, arch_dir: Path, sources: Sequence[Path], settings: MergeSettings, recovered: str | None
) -> dict[str, Any]:
    state_path = arch_dir / COMPLETE
    state = (read_yaml(state_path) or {}) if state_path.is_file() else {}
    before = (state.get("bundles") or {}) if isinstance(state, Mapping) else {}
    known = {
        str(a["sha256"]): a
        for a in before.get("accepted") or []
        if isinstance(a, Mapping) and a.get("sha256")
    }
    pinned = settings.tensile_version or state.get("tensile_version")
    deck_setup = deck_settings(settings.config["deck"], settings.arch_profile)
    deck = merge_deck(settings.config, settings.arch_profile)
    floor = attach_floor(deck, deck_setup)  # each merged library races the floor the config names
    # upstream's own library for the GPU (deck.native_floor): a candidate a device measured slower than its
    # kernel there is overruled, as one slower than a shipped kernel is; another GPU's folder is refused as
    # the dry-run refuses it
    plan_native_floor(deck_setup, sorted(deck.libraries))
    attach_native_floor(deck, deck_setup)
    _same_settings(state, settings, deck, arch_dir, bool(known))
    kept = KeptBundles(arch_dir / "fleet" / "bundles", staging / "fleet" / "bundles")
    kept.carry(list(known.values()), before.get("lost") or [])
    committed = kept.committed.resolve()
    skipped: list[Path] = []
    new = [f for f in bundle_files(sources, skipped) if f.resolve().parent != committed]
    store_path = staging / "registry" / "registry.sqlite"
    store_path.parent.mkdir(parents=True)
    store = Store(store_path, readonly=False)
    spill = staging / ".spill"  # the accepted bundles' measurements, until the libraries are merged
    spill.mkdir()
    try:
        outcome, pinned = open_all(kept, new, settings, deck, pinned, store, known, spill)
        summary = store.summary()
    finally:
        store.close()
    lost = [x for x in kept.lost if x.get("sha256") not in outcome.sources]
    write_yaml(
        staging / "registry" / "consolidated.yaml",
        {"store": "registry/registry.sqlite", **summary, "bundles": len(outcome.accepted), "problems": []},
    )
    # a device's ceilings: its calibrated profile where `oto calibrate --bundles` wrote one (kept across
    # merges)
    calibrated = calibrated_profiles(arch_dir, settings.arch_profile, settings.numbers)
    if (arch_dir / CALIBRATED).is_dir():
        shutil.copytree(arch_dir / CALIBRATED, staging / CALIBRATED)
    check = model_check(settings, deck)
    libraries, package = _write_libraries(staging, outcome.accepted, deck, settings, calibrated, floor, check)
    shutil.rmtree(spill)
    doc = _document(settings, deck, outcome, pinned, libraries, package, check)
    doc["bundles"].update(restored=kept.restored, lost=lost, skipped=[printable(str(f)) for f in skipped])
    doc["bundles"]["new"] = {"given": outcome.new["given"], "accepted": outcome.new["accepted"]}
    doc["recovered"] = recovered
    doc["floor"] = floor  # None: the deck's own shipped kernels
    doc["native_floor"] = deck_setup.get("native_floor")  # None: upstream ships the GPU no library of its own
    from oto.reporting.fleet import render_html, render_markdown

    atomic_write_text(staging / "acceptance.md", render_markdown(doc))
    atomic_write_text(staging / "acceptance.html", render_html(doc))
    write_yaml(staging / COMPLETE, doc)  # last: a staging folder with it is a finished merge
    return doc


def deck_sha256(deck: Deck) -> str:
    """What bundles are checked against: every library's deck sizes (the config's deck and its cap)."""
    sizes = {name: [list(map(int, s[:4])) for s in lib.sizes] for name, lib in sorted(deck.libraries.items())}
    return hashlib.sha256(json.dumps(sizes, sort_keys=True).encode()).hexdigest()


def _same_settings(state: Any, settings: MergeSettings, deck: Deck, arch_dir: Path, kept: bool) -> None:
    """A merge re-judges every kept bundle under its own settings: with another config (deck, its cap, tie
    tolerance) or kind of numbers every kept bundle would be refused and the merged libraries dropped (they
    are rebuilt from the accepted bundles). Refuse such a merge before it changes anything."""
    if not kept or not isinstance(state, Mapping):
        return
    now = {
        "numbers": settings.numbers,
        "tie_tolerance": float(settings.config["benchmark"]["tie_tolerance"]),
        "deck_sha256": deck_sha256(deck),
    }
    differ = [
        f"{key} {state[key]!r} then, {value!r} now"
        for key, value in now.items()
        if state.get(key) is not None and state[key] != value
    ]
    if differ:
        raise MergeError(
            f"{arch_dir / COMPLETE}: the bundles kept here were merged under other settings "
            f"({'; '.join(differ)}; deck_sha256 covers the config's deck and deck.max_sizes): this merge "
            "would refuse them all and drop the merged libraries. Run it with the last merge's --configfile "
            "and --numbers, or merge into another --out"
        )


def _write_libraries(
    arch_dir: Path,
    accepted: Sequence[Accepted],
    deck: Deck,
    settings: MergeSettings,
    calibrated: Mapping[str, Mapping[str, Any]],
    floor: Mapping[str, Any] | None,
    check: str | None,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Every library's merged final, deck slice and logic file; the package of them all. A device's ceilings
    come from its ``calibrated`` profile where there is one, else from its bundle; ``check``: the model-check
    line simulated numbers carry (:func:`model_check`)."""
    profiles = {b.device_id: calibrated.get(b.device_id, b.profile) for b in accepted}
    tol = float(settings.config["benchmark"]["tie_tolerance"])
    limits = legality.Limits.from_profile(settings.arch_profile)
    libraries = sorted({lib for b in accepted for lib in b.evidence})
    label = settings.config["package"]["label"]
    prefix = logic_label(settings.arch_profile, label).prefix
    logic_dir = arch_dir / "logic"
    merged: dict[str, dict[str, Any]] = {}
    logic_paths: list[Path] = []
    record_paths: list[Path] = []
    provenance = {
        "deck_source": dict(deck.source),
        "deck_of": deck.arch_source,
        "libraries_in_source": len(deck.libraries),
        "stats_of_source": deck.stats(),
    }
    if floor is not None:
        provenance["floor"] = floor
    for lib in libraries:
        contribs = [
            Contribution(b.device_id, b.sha256[:16], b.evidence[lib], b.finals.get(lib))
            for b in accepted
            if lib in b.evidence
        ]
        native = native_kernels(deck.libraries[lib], limits)
        final = merge_library(deck.libraries[lib], contribs, profiles, tol, native)
        write_library_yaml(deck.libraries[lib], arch_dir / lib / "deck.yaml", provenance)
        if final is None:
            merged[lib] = _unfinished(contribs)
            continue
        write_yaml_mirrored(arch_dir / lib / "final.yaml", final)
        path = logic_dir / f"{prefix}_{lib}.yaml"
        write_library_logic(
            final, deck.libraries[lib], settings.arch_profile, label, path, source=lib, model_check=check
        )
        logic_paths.append(path)
        # where the merged numbers came from, beside the logic file, as the logic stage writes it
        record_paths.append(write_record(logic_record(final, path, label, check), record_path(path)))
        merged[lib] = _library_entry(final, deck.libraries[lib])
    selected = Deck(dict(deck.source), deck.arch_source, {n: deck.libraries[n] for n in libraries})
    if libraries:
        write_deck_yaml(selected, arch_dir / "deck.yaml", provenance)
    write_yaml(arch_dir / "ceilings.yaml", ceilings_document(settings.arch_profile))
    return merged, _package(logic_paths, record_paths, settings, arch_dir)


def model_check(settings: MergeSettings, deck: Deck) -> str | None:
    """For a merge of simulated numbers, how well the model behind them was checked on real data (the line a
    run's reports, logic files and package carry); None for measured or replayed ones."""
    if settings.numbers != "simulated":
        return None
    return model_check_for(settings.arch, settings.config, deck.arch_source)


def _unfinished(contribs: Sequence[Contribution]) -> dict[str, Any]:
    counts = Counter(c.device for c in contribs)
    empty = dict.fromkeys(("geomean_score", "median_gflops", "median_pct_roofline"), None)
    empty["sizes_with_winner"] = 0
    return {
        "finished": False,
        "devices": {
            d: {"finished": False, "bundles": n, **empty, "theoretical_gflops": None}
            for d, n in sorted(counts.items())
        },
    }


def _library_entry(final: Mapping[str, Any], deck: LibraryDeck) -> dict[str, Any]:
    """What the report shows of one merged library, who measured what at each size included."""
    sizes = []
    for r in final["per_size"]:
        sizes.append(
            {
                "size_index": r["size_index"],
                "size": list(deck.sizes[r["size_index"]][:4]),
                "winner": r["winner"],
                "score": r["score"],
                "verdict": r["verdict"],
                "devices": {
                    d: {k: v.get(k) for k in ("score", "ci_low", "ci_high", "source", "picked_it")}
                    for d, v in sorted((r.get("devices") or {}).items())
                },
                "overruled": r.get("overruled") or [],
                "kept_by_shipped_kernel": bool(r.get("kept_by_shipped_kernel")),
            }
        )
    return {
        "finished": True,
        "devices": final["fleet"]["devices"],
        **final["fleet"]["agreement"],
        "summary": final["summary"],
        "verdict": final["verdict"],
        "sizes": len(final["sizes"]),
        "sizes_with_winner": sum(1 for r in final["per_size"] if r.get("winner")),
        "overruled": sum(len(r.get("overruled") or []) for r in final["per_size"]),
        "per_size": sizes,
    }


def _document(
    settings: MergeSettings,
    deck: Deck,
    outcome: Outcome,
    pinned: str | None,
    libraries: Mapping[str, Any],
    package: Mapping[str, Any],
    check: str | None,
) -> dict[str, Any]:
    accepted = outcome.accepted
    return {
        "arch": settings.arch,
        "merged_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "oto_version": oto.__version__,
        "numbers": settings.numbers,
        "backends": sorted(
            {str((f.get("provenance") or {}).get("backend")) for b in accepted for f in b.finals.values()}
        ),
        "tensile_version": pinned,
        "tie_tolerance": float(settings.config["benchmark"]["tie_tolerance"]),
        "deck_sha256": deck_sha256(deck),  # a later merge with another deck would refuse every kept bundle
        "bundles": {
            "accepted": [_bundle_entry(b, outcome) for b in accepted],
            "duplicates": outcome.duplicates,
            "rejected": outcome.rejected,
        },
        "quarantine": [
            {"file": printable(b.path.name), "device": b.device_id, **flag}
            for b in accepted
            for flag in b.quarantine
        ],
        "devices": _device_rows(accepted),
        "shards": _shard_coverage(accepted),
        "deck_libraries": len(deck.libraries),
        "deck_of": deck.arch_source,
        "model_check": check,
        "libraries": dict(libraries),
        "package": dict(package),
    }


def _bundle_entry(b: Accepted, outcome: Outcome) -> dict[str, Any]:
    return {
        "file": printable(b.path.name),
        "sha256": b.sha256,
        "kept_as": f"fleet/bundles/{b.sha256[:16]}{SUFFIX}",
        "source": printable(outcome.sources.get(b.sha256, "")),
        "device": b.device_id,
        "shard": b.shard,
        "created_at": b.created_at,
        "libraries": sorted(b.evidence),
        "finished": sorted(b.finals),
        "records": outcome.records.get(b.sha256, 0),
        "quarantined": len(b.quarantine),
        "oto_version": b.descriptor["provenance"].get("oto_version"),
    }


def _device_rows(accepted: Sequence[Accepted]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for b in sorted(accepted, key=lambda b: b.created_at):
        d = b.profile["device"]
        row = out.setdefault(
            b.device_id,
            {
                "cpu": d.get("cpu"),
                "gpu_name": d.get("gpu_name"),
                "compute_units": b.profile["compute_units"],
                "clock_mhz": b.profile["clock_mhz"],
                "memory": b.profile["memory"]["kind"],
                "peak_bandwidth_gbs": b.profile["memory"]["peak_bandwidth_gbs"],
                "fp32_ceiling_gflops": rounded(family_peak_gflops(b.profile, "SB")),
                "kernel": d.get("kernel"),
                "rocm": d.get("rocm"),
                "tensile": b.descriptor["provenance"].get("tensile_version"),
                "bundles": 0,
                "shards": [],
            },
        )
        row["bundles"] += 1
        if b.shard not in row["shards"]:
            row["shards"].append(b.shard)
    return out


def _shard_coverage(accepted: Sequence[Accepted]) -> dict[str, Any]:
    """Per shard count used: which shards arrived, which are still missing, and who replicated which."""
    out = {}
    for n in sorted({Shard.parse(b.shard).count for b in accepted}):
        got: dict[int, set[str]] = {}
        for b in accepted:
            s = Shard.parse(b.shard)
            if s.count == n:
                got.setdefault(s.index, set()).add(b.device_id)
        out[str(n)] = {
            "received": {str(i): sorted(got[i]) for i in sorted(got)},
            "missing": [i for i in range(1, n + 1) if i not in got],
            "replicated": [i for i in sorted(got) if len(got[i]) > 1],
        }
    return out


def _package(
    logic_paths: Sequence[Path], record_paths: Sequence[Path], settings: MergeSettings, arch_dir: Path
) -> dict[str, Any]:
    """TensileLibrary.dat and the code objects from the merged logic files, as the workflow's package stage
    makes them: checked, labelled, gated on measured winners, the ISA registered from the profile."""
    from oto.tensile.packaging import PackageSettings, package_library

    if not logic_paths:
        return {"native_dat": None, "why": "no library was finished on any device"}
    doc = package_library(
        logic_paths,
        settings.arch_profile,
        arch_dir / "TensileLibrary.dat",
        PackageSettings.from_config(settings.config),
        manifest=arch_dir / "library" / "manifest.yaml",
        tensile_cfg=settings.config["tensile"],
        provenance_paths=record_paths,
    )
    return {**doc, "native_dat": "TensileLibrary.dat"}


# -- the command -------------------------------------------------------------------------------------------


def _parser():
    import argparse

    ap = argparse.ArgumentParser(
        prog="oto merge",
        description="Merge testers' bundles (folders, files, or storage URLs such as s3://bucket/prefix) "
        "with every bundle merged before into one results/<arch>/: libraries, logic files, "
        "TensileLibrary.dat "
        "and the merged acceptance report. Rejected bundles are listed with their reason and merge nothing. "
        "Arguments after -- go to Snakemake's storage plugin (e.g. --storage-s3-endpoint-url URL).",
    )
    ap.add_argument("sources", nargs="+", help="bundle files, folders of bundles, or storage URLs")
    ap.add_argument("--arch", help="arch to merge (default: the config's)")
    ap.add_argument(
        "--configfile",
        default="config/tester.yaml",
        help="the testers' config, layered over config/config.yaml as their nights were: the deck, "
        "package.label, tie tolerance and scoring (default config/tester.yaml)",
    )
    ap.add_argument("--out", default="results", help="results folder; writes <out>/<arch>/ (default results)")
    ap.add_argument(
        "--profiles", default="arch_profiles", help="folder of arch profiles (default: arch_profiles)"
    )
    ap.add_argument(
        "--numbers",
        default="measured",
        choices=("measured", "replayed", "simulated"),
        help="the only kind of numbers merged (default measured)",
    )
    ap.add_argument(
        "--tensile-version",
        help="the Tensile version bundles must have (default: the first accepted bundle's, kept for later "
        "merges)",
    )
    return ap


def _settings(args) -> MergeSettings:
    from oto.config import ConfigError, layered_config, validate_config
    from oto.hardware.profile import load_profile, profile_path

    if Path(args.configfile).is_file():  # the nights' config, as Snakemake layered it over config/config.yaml
        config = validate_config(layered_config([args.configfile]), args.configfile)
    elif args.arch:  # no config: the schema's defaults for the arch named
        config = validate_config({"arch": args.arch, "families": "all"})
    else:
        raise ConfigError(
            f"{args.configfile}: no such config file; name one with --configfile, or the arch with --arch"
        )
    if args.arch:
        config["arch"] = args.arch
    arch_profile = load_profile(profile_path(config["arch"], args.profiles))
    return MergeSettings(config["arch"], arch_profile, config, args.numbers, args.tensile_version)


def _fetch_all(raw: Sequence[str], out: Path, arch: str, extra: Sequence[str]) -> list[Path]:
    """Local sources as they are; storage URLs fetched (outside the merged folder, which a merge replaces)."""
    import re

    from oto.fleet.remote import fetch, is_remote

    sources = []
    for src in raw:
        if is_remote(src):
            staging = out / f".{arch}.fetched" / re.sub(r"[^A-Za-z0-9._-]+", "_", src)
            sources.append(fetch(src, staging, extra))
        else:
            sources.append(Path(src))
    return sources


def main(argv: Sequence[str]) -> int:
    """``oto merge SOURCE... [--arch A] [--out results] [--numbers K] [--tensile-version V] [-- ARGS]``"""
    from oto.config import ConfigError
    from oto.fleet.remote import FetchError
    from oto.hardware.profile import ProfileError

    argv, extra = split_passthrough(argv)
    args = _parser().parse_args(argv)
    try:
        settings = _settings(args)
    except (ConfigError, ProfileError) as exc:
        print(f"oto merge: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    try:
        with merge_lock(out, settings.arch):
            sources = _fetch_all(args.sources, out, settings.arch, extra)
            doc = merge(sources, out, settings, lock=False)
    except FetchError as exc:
        print(f"oto merge: {exc}", file=sys.stderr)
        return 1
    except (MergeError, DeckError) as exc:  # a deck or floor the config names wrongly
        print(f"oto merge: {exc}", file=sys.stderr)
        return 2
    _say(doc, out / settings.arch)
    # 1: something to look at: nothing merged, evidence lost, or every bundle this merge was given refused
    new = doc["bundles"].get("new") or {}
    refused = new.get("given") and not new.get("accepted")
    return 0 if doc["bundles"]["accepted"] and not doc["bundles"].get("lost") and not refused else 1


def _say(doc: Mapping[str, Any], arch_dir: Path) -> None:
    b = doc["bundles"]
    if doc.get("recovered"):
        print(f"note: {doc['recovered']}")
    finished = sum(1 for v in doc["libraries"].values() if v.get("finished"))
    print(
        f"merged {len(b['accepted'])} bundle(s) from {len(doc['devices'])} device(s) into {arch_dir}: "
        f"{finished} of {doc['deck_libraries']} libraries; {len(b['duplicates'])} duplicate(s); "
        f"{len(b['rejected'])} rejected"
    )
    for x in b["rejected"]:
        print(f"  rejected {x['file']!r}: {x['reason']!r}")
    skipped = b.get("skipped") or []
    if skipped:
        names = ", ".join(repr(Path(s).name) for s in skipped[:5]) + (" ..." if len(skipped) > 5 else "")
        print(f"  {len(skipped)} file(s) in the folders given not opened (not named *{SUFFIX}): {names}")
    for x in b.get("restored") or []:
        print(f"  kept bundle {x.get('file')!r} restored from {x['from']!r} ({x['why']})")
    for x in b.get("lost") or []:
        print(f"  LOST EVIDENCE: bundle {x.get('file')!r} ({x.get('sha256', '')[:16]}): {x['why']}")
    if doc.get("quarantine"):
        print(f"  {len(doc['quarantine'])} text field(s) quarantined (neutralised, merged; see the report)")
    dat = arch_dir / "TensileLibrary.dat"
    library = f"library: {dat}" if dat.is_file() else "no library (no bundle finished a library)"
    print(f"report: {arch_dir / 'acceptance.md'} (and .html); {library}")
    if doc["numbers"] != "measured":  # as the tuning run and the tester say it
        print(f"numbers: {doc['numbers']} — not for installing")

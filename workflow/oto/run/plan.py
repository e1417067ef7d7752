"""The run plan Snakemake needs at parse time: validated config, arch, and which libraries to tune.

Everything a dry-run must reject (a bad config, a bad arch profile, an unknown family, a missing deck
source) is checked here, so `snakemake -n` fails with the file and field before any job starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oto.config import ConfigError, validate_config
from oto.deck.model import DeckError
from oto.deck.sources import SHIPPED_MANIFEST, deck_from_rocblas_dir, read_manifest
from oto.fleet.device import DeviceProfileError, check_device_profile
from oto.fleet.shards import Shard, ShardError
from oto.gemm import FamilyCodeError, Library
from oto.hardware.profile import ProfileError, load_profile, profile_path
from oto.search.strategies import StrategyError, make_strategy


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Plan:
    config: dict[str, Any]
    arch: str
    max_generations: int
    libraries: list[str]
    families: dict[str, list[str]]  # family code → its selected libraries
    deck_kind: str
    deck_input: str  # the file or folder the deck rule reads
    logic_prefix: str  # file-name prefix of logic files, like the shipped `vega10_`
    profile_path: str  # the arch profile, or the device profile that refines it (config device_profile)
    shard: Shard


def _logic_library_names(folder: Path) -> list[str]:
    names = []
    for f in sorted(folder.glob("*.yaml")):
        stem = f.stem
        cut = stem.find("_Cijk_")
        if cut < 0:
            continue
        try:
            names.append(Library.parse(stem[cut + 1 :]).name)
        except FamilyCodeError as exc:
            raise PlanError(f"{f}: file name does not name a Tensile problem type ({exc})") from None
    return names


def deck_library_names(kind: str, path: str | None) -> tuple[list[str], str]:
    """Library names in the deck source, cheaply (no full parse), and the path the deck rule reads."""
    if kind == "manifest":
        manifest = Path(path) if path else SHIPPED_MANIFEST
        if not manifest.is_file():
            raise PlanError(f"config field 'deck.path': manifest {manifest} not found")
        return sorted(read_manifest(manifest).libraries), str(manifest)
    if not path:
        raise PlanError(f"config field 'deck.path': required when deck.source is {kind!r}")
    folder = Path(path)
    if not folder.is_dir():
        raise PlanError(f"config field 'deck.path': {folder} is not a folder")
    if kind == "logic":
        names = _logic_library_names(folder)
    else:
        names = sorted(deck_from_rocblas_dir(folder).libraries)
    if not names:
        raise PlanError(f"config field 'deck.path': no Tensile library found in {folder}")
    return sorted(set(names)), str(folder)


def select_libraries(
    names: Sequence[str], families: str | Sequence[str], patterns: Sequence[str], source: str
) -> dict[str, list[str]]:
    by_family: dict[str, list[str]] = {}
    for name in names:
        lib = Library.parse(name)
        if lib.pattern in patterns:
            by_family.setdefault(lib.family.code, []).append(name)
    if families == "all":
        return by_family
    unknown = [f for f in families if f not in by_family]
    if unknown:
        raise PlanError(
            f"{source}: field 'families': {', '.join(unknown)} not in the deck for patterns "
            f"{', '.join(patterns)} (known: {', '.join(sorted(by_family))})"
        )
    return {f: by_family[f] for f in families}


def plan_run(config: Mapping[str, Any], configfiles: Sequence[str | Path] = ()) -> Plan:
    source = ", ".join(str(c) for c in configfiles) or "config"
    try:
        cfg = validate_config(config, source)
    except ConfigError as exc:
        raise PlanError(str(exc)) from None
    arch = cfg["arch"]
    try:
        profile_file = profile_path(arch)
        if not profile_file.is_file():
            raise PlanError(f"{source}: field 'arch': no arch profile {profile_file}")
        profile = load_profile(profile_file)
    except ProfileError as exc:
        raise PlanError(str(exc)) from None
    try:
        names, deck_input = deck_library_names(cfg["deck"]["source"], cfg["deck"]["path"])
    except DeckError as exc:
        raise PlanError(f"{source}: field 'deck': {exc}") from None
    families = select_libraries(names, cfg["families"], cfg["patterns"], source)
    shard, families = shard_families(families, cfg["shard"], source)
    profile_file = device_profile_path(cfg, profile, profile_file, source)
    try:  # the strategy's options fail the dry-run, not the first mutate job
        make_strategy(cfg["search"]["strategy"], int(cfg["seed"]), cfg["search"]["options"])
    except StrategyError as exc:
        raise PlanError(f"{source}: {exc}") from None
    prefix = "vega10" if cfg["package"]["label"] == "gfx900" else profile["tensile"]["logic_prefix"]
    return Plan(
        config=cfg,
        arch=arch,
        max_generations=int(cfg["max_generations"]),
        libraries=sorted(lib for libs in families.values() for lib in libs),
        families=families,
        deck_kind=cfg["deck"]["source"],
        deck_input=deck_input,
        logic_prefix=prefix,
        profile_path=str(profile_file),
        shard=shard,
    )


def shard_families(
    families: Mapping[str, list[str]], shard_text: str, source: str
) -> tuple[Shard, dict[str, list[str]]]:
    """Keep the libraries of this shard (config ``shard``); families left empty drop out."""
    try:
        shard = Shard.parse(shard_text)
    except ShardError as exc:
        raise PlanError(f"{source}: field 'shard': {exc}") from None
    kept = {f: shard.select(libs) for f, libs in families.items()}
    kept = {f: libs for f, libs in kept.items() if libs}
    if not kept:
        total = sum(len(libs) for libs in families.values())
        raise PlanError(
            f"{source}: field 'shard': shard {shard} holds none of the {total} selected libraries; "
            "use fewer shards or select more families"
        )
    return shard, kept


def device_profile_path(cfg: Mapping[str, Any], arch_profile: Mapping, arch_file: Path, source: str) -> Path:
    """The profile every rule reads: config ``device_profile`` (checked against the arch profile) or the arch
    profile itself."""
    if not cfg.get("device_profile"):
        return arch_file
    path = Path(cfg["device_profile"])
    if not path.is_file():
        raise PlanError(f"{source}: field 'device_profile': {path} not found")
    try:
        check_device_profile(arch_profile, load_profile(path), str(path))
    except (ProfileError, DeviceProfileError) as exc:
        raise PlanError(str(exc)) from None
    return path

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
    deck_libraries: tuple[str, ...] = ()  # every library of the deck source, selected or not

    def _families_fix(self, family: str) -> str:
        fams = ",".join([*self.families, family])
        return (
            f"add it to this run with --config 'families=[{fams}]' (or to families: in the config file; "
            "results already built are kept)"
        )

    def not_selected(self, family: str | None = None, library: str | None = None) -> str | None:
        """Why a target's family or library is not part of this run, with the fix; None when it is."""
        selected = ", ".join(self.families) or "none"
        if library is not None:
            if library in self.libraries:
                return None
            if library not in self.deck_libraries:
                return f"library {library} is not in the deck ({len(self.deck_libraries)} libraries)"
            lib = Library.parse(library)
            if lib.family.code in self.families:
                patterns = ",".join(sorted({*self.config["patterns"], lib.pattern}))
                return (
                    f"library {library}: pattern {lib.pattern} is not selected in this run (patterns: "
                    f"{', '.join(self.config['patterns'])}); add it with --config 'patterns=[{patterns}]'"
                )
            return (
                f"library {library}: family {lib.family.code} is not selected in this run (families: "
                f"{selected}); {self._families_fix(lib.family.code)}"
            )
        if family is None or family in self.families:
            return None
        known = sorted({Library.parse(n).family.code for n in self.deck_libraries})
        if family not in known:
            return f"family {family!r} is not in the deck (families: {', '.join(known)})"
        fix = self._families_fix(family)
        return f"family {family!r} is not selected in this run (families: {selected}); {fix}"


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
        deck_libraries=tuple(names),
    )

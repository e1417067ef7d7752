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
from oto.deck.shards import Shard, ShardError
from oto.deck.sources import SHIPPED_MANIFEST, deck_from_rocblas_dir, read_manifest
from oto.gemm import FamilyCodeError, Library
from oto.hardware.device_profile import DeviceProfileError, check_device_profile
from oto.hardware.profile import ProfileError, load_profile, profile_path
from oto.search.strategies import StrategyError, make_strategy
from oto.tensile.logic_reader import LogicFileError, read_exact_rows


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
    # The files the deck rule reads, relative to the project when inside it (a moved project stays the same)
    deck_inputs: list[str]
    logic_prefix: str  # file-name prefix of logic files, like the shipped `vega10_`
    profile: dict[str, Any]  # the validated profile every rule reads, defaults filled in
    # arch_profiles/<arch>.yaml, or the device profile refining it (config device_profile), project-relative
    profile_file: str
    shard: Shard

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


def project_path(path: str | Path, root: Path | None = None) -> str:
    """``path`` relative to the project (the working directory) when it lies inside it, else as given.

    Snakemake records every input by its path: an absolute path into the project changes when the project
    folder is moved or copied, and Snakemake would then re-run the job and everything after it."""
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    try:
        return str(p.relative_to((root or Path.cwd()).resolve()))
    except ValueError:
        return str(p)


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


def deck_library_names(kind: str, path: str | None) -> tuple[list[str], str, list[str]]:
    """Library names in the deck source, cheaply (no full parse of logic files), the path the deck rule
    reads and the files it reads. Sizes of the manifest and of a rocBLAS folder are checked here (both are
    parsed anyway); a logic folder's by :func:`check_logic_sizes` for the selected libraries."""
    if kind == "manifest":
        manifest = Path(path) if path else SHIPPED_MANIFEST
        if not manifest.is_file():
            raise PlanError(f"config field 'deck.path': manifest {manifest} not found")
        return sorted(read_manifest(manifest).libraries), str(manifest), [str(manifest)]
    if not path:
        raise PlanError(f"config field 'deck.path': required when deck.source is {kind!r}")
    folder = Path(path)
    if not folder.is_dir():
        raise PlanError(f"config field 'deck.path': {folder} is not a folder")
    if kind == "logic":
        names = _logic_library_names(folder)
        files = [str(f) for f in sorted(folder.glob("*.yaml"))]  # what deck_from_logic_files reads
    else:
        deck = deck_from_rocblas_dir(folder)
        names = sorted(deck.libraries)
        files = [str(folder / name) for name in sorted(deck.source["inputs"])]
    if not names:
        raise PlanError(f"config field 'deck.path': no Tensile library found in {folder}")
    return sorted(set(names)), str(folder), files


def deck_source(kind: str, inputs: Sequence[str]) -> str:
    """The file or folder the deck stage reads, from the files the deck rule declares (the manifest, or the
    files of one folder)."""
    return str(inputs[0]) if kind == "manifest" else str(Path(inputs[0]).parent)


def check_logic_sizes(folder: Path, libraries: Sequence[str]) -> None:
    """Zero, negative or out-of-range sizes in the exact rows of the selected libraries' logic files fail the
    dry-run, naming file and row, instead of the run's finalize after a night of tuning."""
    wanted = set(libraries)
    for f in sorted(Path(folder).glob("*.yaml")):
        cut = f.stem.find("_Cijk_")
        if cut >= 0 and f.stem[cut + 1 :] in wanted:
            read_exact_rows(f)


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


def plan_run(
    config: Mapping[str, Any],
    configfiles: Sequence[str | Path] = (),
    command_line: Mapping[str, Any] | None = None,
) -> Plan:
    """The run's plan from its config; ``command_line``: the entries of Snakemake's ``--config``."""
    source = ", ".join(str(c) for c in configfiles) or "config"
    try:
        cfg = validate_config(config, source, command_line)
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
        names, source_path, deck_inputs = deck_library_names(cfg["deck"]["source"], cfg["deck"]["path"])
    except (DeckError, LogicFileError) as exc:
        raise PlanError(f"{source}: field 'deck': {exc}") from None
    families = select_libraries(names, cfg["families"], cfg["patterns"], source)
    shard, families = shard_families(families, cfg["shard"], source)
    libraries = sorted(lib for libs in families.values() for lib in libs)
    if cfg["deck"]["source"] == "logic":
        try:
            check_logic_sizes(Path(source_path), libraries)
        except (DeckError, LogicFileError) as exc:
            raise PlanError(f"{source}: field 'deck': {exc}") from None
    device_file = device_profile_path(cfg, profile, profile_file, source)
    if device_file != profile_file:
        profile, profile_file = load_profile(device_file), device_file
    try:  # the strategy's options fail the dry-run, not the first mutate job
        make_strategy(cfg["search"]["strategy"], int(cfg["seed"]), cfg["search"]["options"])
    except StrategyError as exc:
        raise PlanError(f"{source}: {exc}") from None
    prefix = "vega10" if cfg["package"]["label"] == "gfx900" else profile["tensile"]["logic_prefix"]
    return Plan(
        config=cfg,
        arch=arch,
        max_generations=int(cfg["max_generations"]),
        libraries=libraries,
        families=families,
        deck_kind=cfg["deck"]["source"],
        deck_inputs=[project_path(f) for f in deck_inputs],
        logic_prefix=prefix,
        profile=profile,
        profile_file=project_path(profile_file),
        shard=shard,
        deck_libraries=tuple(names),
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

"""The run plan Snakemake needs at parse time: validated config, arch, and which libraries to tune.

Everything a dry-run must reject (a bad config, a bad arch profile, an unknown family, a missing deck
source) is checked here, so `snakemake -n` fails with the file and field before any job starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oto.backends import AUTO, auto_backend
from oto.config import ConfigError, validate_config
from oto.deck.model import DeckError
from oto.deck.shards import Shard, ShardError
from oto.deck.sources import (
    DeckConfigError,
    check_capabilities,
    deck_settings,
    plan_floor,
    plan_native_floor,
    plan_workload,
    run_source,
)
from oto.gemm import Library
from oto.hardware.device_profile import DeviceProfileError, check_device_profile
from oto.hardware.profile import ProfileError, load_profile, profile_path
from oto.registry.transfer import WarmStartError, check_warm_start
from oto.search.strategies import StrategyError, make_strategy
from oto.tensile.labels import logic_label
from oto.tensile.logic_reader import LogicFileError
from oto.tensile.provenance import ProvenanceError, finished_libraries


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Plan:
    config: dict[str, Any]
    arch: str
    max_generations: int
    libraries: list[str]
    families: dict[str, list[str]]  # family code → its selected libraries
    # What the deck rule passes to the deck stage (oto.deck.sources.deck_settings), its paths relative to the
    # project when inside it, and the files it reads (a moved project stays the same)
    deck: dict[str, Any]
    deck_inputs: dict[str, list[str]]  # per selected library: the files its deck job reads
    logic_prefix: str  # file-name prefix of logic files, like the shipped `vega10_`
    profile: dict[str, Any]  # the validated profile every rule reads, defaults filled in
    # arch_profiles/<arch>.yaml, or the device profile refining it (config device_profile), project-relative
    profile_file: str
    shard: Shard

    deck_libraries: tuple[str, ...] = ()  # every library of the deck source, selected or not
    # Libraries an earlier run (night) finished in results/<arch>/ with this run's backend and label, not
    # selected now: the package, report and dashboard hold them as they are; no rule plans a job of theirs.
    finished: tuple[str, ...] = ()

    @property
    def library_pattern(self) -> str:
        """The ``library`` wildcard's pattern: any library name but the earlier finished ones, so Snakemake
        takes their files as they are and never plans (re-tunes) them."""
        name = r"Cijk_[A-Za-z0-9_]+"
        if not self.finished:
            return name
        return rf"(?!(?:{'|'.join(map(re.escape, self.finished))})(?![A-Za-z0-9_])){name}"

    @property
    def delivered(self) -> list[str]:
        """Every library the deliverables cover: this run's selection and the earlier finished ones."""
        return sorted({*self.libraries, *self.finished})

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


def stock_families(
    families: str | Sequence[str] | Mapping[str, Any], stock: str | None, source: str
) -> str | Sequence[str]:
    """Config ``families`` for this run: as given, or its entry for the profile's stock library (``stock``:
    ``stock_library.logic_prefix``) when it is given per stock library."""
    if not isinstance(families, Mapping):
        return families
    if stock not in families:
        raise PlanError(
            f"{source}: field 'families': no entry for this arch's stock library {stock} (entries: "
            f"{', '.join(families)}); add one, or give --config 'families=[...]'"
        )
    return families[stock]


def select_libraries(
    names: Sequence[str],
    families: str | Sequence[str] | Mapping[str, Any],
    patterns: Sequence[str],
    source: str,
    stock: str | None = None,
) -> dict[str, list[str]]:
    """The selected libraries by family; ``families`` per stock library picks ``stock``'s entry."""
    families = stock_families(families, stock, source)
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
    results_root: str | Path = "results",
) -> Plan:
    """The run's plan from its config; ``command_line``: the entries of Snakemake's ``--config``;
    ``results_root``: where results/<arch>/ lies (the libraries earlier runs finished there are kept)."""
    source = ", ".join(str(c) for c in configfiles) or "config"

    def given(field: str) -> str:  # where a top-level field's value came from, for an error naming it
        return f"--config {field}=…" if field in (command_line or {}) else source

    try:
        cfg = validate_config(config, source, command_line)
    except ConfigError as exc:
        raise PlanError(str(exc)) from None
    arch = cfg["arch"]
    try:
        profile_file = profile_path(arch)
        if not profile_file.is_file():
            raise PlanError(f"{given('arch')}: field 'arch': no arch profile {profile_file}")
        profile = load_profile(profile_file)
    except ProfileError as exc:
        raise PlanError(str(exc)) from None
    try:  # another GPU's registry to start from: a typo would warm-start nothing, silently
        check_warm_start(cfg["registry"]["warm_start"], Path("results") / arch, given("registry"))
    except WarmStartError as exc:
        raise PlanError(str(exc)) from None
    settings = deck_settings(cfg["deck"], profile)
    try:
        deck_source = run_source(settings)
        deck_plan = deck_source.plan()
    except DeckConfigError as exc:
        raise PlanError(str(exc)) from None
    except (DeckError, LogicFileError) as exc:
        raise PlanError(f"{source}: field 'deck': {exc}") from None
    names = deck_plan.libraries
    stock = profile["stock_library"]["logic_prefix"]
    families = select_libraries(names, cfg["families"], cfg["patterns"], given("families"), stock)
    shard, families = shard_families(families, cfg["shard"], given("shard"))
    libraries = sorted(lib for libs in families.values() for lib in libs)
    try:  # a zero or negative size fails the dry-run, naming file and row, not finalize after a night
        deck_source.check(libraries)
        check_capabilities(deck_source, libraries, profile, project_path(profile_file))
        floor_path, floor_inputs = plan_floor(settings, libraries)
        workload_inputs = plan_workload(settings)  # every line read now: a bad one fails the dry-run
        native_path, native_inputs = plan_native_floor(settings, libraries)
    except DeckConfigError as exc:
        raise PlanError(str(exc)) from None
    except (DeckError, LogicFileError) as exc:
        raise PlanError(f"{source}: field 'deck': {exc}") from None
    settings["path"] = project_path(deck_plan.path)
    if floor_path is not None:
        settings["floor"]["path"] = project_path(floor_path)
    for entry in settings.get("workload", []):
        entry["path"] = project_path(entry["path"])
    if native_path is not None:
        settings["native_floor"]["path"] = project_path(native_path)
    # a library's deck job reads its own files only: another library's file changing leaves it alone (the
    # workload files are every library's, as is a native floor's file named after no library)
    native_of = {lib: [f for f in native_inputs if Path(f).stem.endswith(f"_{lib}")] for lib in libraries}
    mine = {f for files in native_of.values() for f in files}
    shared = [*workload_inputs, *(f for f in native_inputs if f not in mine)]
    deck_inputs = {
        lib: [
            project_path(f)
            for f in dict.fromkeys(
                [*deck_plan.files_for([lib]), *floor_inputs[lib], *native_of[lib], *shared]
            )
        ]
        for lib in libraries
    }
    device_file = device_profile_path(cfg, profile, profile_file, given("device_profile"))
    if device_file != profile_file:
        profile, profile_file = load_profile(device_file), device_file
    try:  # the strategy's options fail the dry-run, not the first mutate job
        make_strategy(cfg["search"]["strategy"], int(cfg["seed"]), cfg["search"]["options"])
    except StrategyError as exc:
        raise PlanError(f"{source}: {exc}") from None
    try:
        prefix = logic_label(profile, cfg["package"]["label"]).prefix
    except ValueError as exc:
        raise PlanError(f"{source}: {exc}") from None
    backend = cfg["backend"] if cfg["backend"] != AUTO else auto_backend(profile, cfg.get("tensile") or {})[0]
    arch_dir = Path(results_root) / arch
    try:
        finished = finished_libraries(arch_dir / "logic", prefix, cfg["package"]["label"], backend)
    except ProvenanceError as exc:
        raise PlanError(f"{exc}; delete it (and its logic file) or tune the library again") from None
    earlier = tuple(n for n in finished if n not in libraries and (arch_dir / n / "final.yaml").is_file())
    return Plan(
        config=cfg,
        arch=arch,
        max_generations=int(cfg["max_generations"]),
        libraries=libraries,
        families=families,
        deck=settings,
        deck_inputs=deck_inputs,
        logic_prefix=prefix,
        profile=profile,
        profile_file=project_path(profile_file),
        shard=shard,
        deck_libraries=tuple(names),
        finished=earlier,
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

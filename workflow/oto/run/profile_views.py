"""What each stage depends on in the arch profile, so that editing the profile re-runs exactly the stages
whose figures changed, and says so before anything is redone.

Every rule declares the profile file as an ``ancient`` input (its modification time and bytes never re-run a
job: a comment or a reordered key changes nothing) and its *view* as a parameter: the profile fields the
stage reads, as a canonical dict (``oto.hardware.profile.profile_view``). Snakemake re-runs a job when its
parameters change, so a job re-runs exactly when a field it reads changed. The fields are declared by the
domain code that reads them (ceilings, legality, scoring, the memory guard, each backend…) and composed per
stage by the stage's declaration (``STAGE.profile`` in ``oto/stages/<stage>.py``); the stage receives a
:class:`~oto.hardware.profile.ProfileView`, which refuses to read any other field, so a stage cannot depend
on a figure its view does not carry.

The one deliberate exception is the agent's prompt in ``mutate``: it shows Claude the whole profile, but a
proposal stays a valid proposal when, say, the clock changes (emit re-checks legality), so its view holds
the legality limits only.

``start_run`` (the Snakefile's ``onstart``) records the profile a run starts with in
``results/<arch>/arch_profile.json``; the next parse compares and names the changed fields and the stages
they invalidate (:func:`change_note`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from oto.backends import profile_fields as backend_fields
from oto.backends import provenance_fields
from oto.files import atomic_write_text
from oto.gemm import Library
from oto.hardware.profile import profile_view, view_paths
from oto.stages import BACKEND_FIELDS, PROVENANCE_FIELDS, stages

RECORD = "arch_profile.json"  # under results/<arch>/: the profile the last run started with


def stage_fields(config: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Per stage (rule) that takes the profile, in workflow order, the fields it reads (its declaration's,
    with the configured backend's in place of ``BACKEND_FIELDS`` and the fields its provenance reads in place
    of ``PROVENANCE_FIELDS``); ``{rate_class}`` is the job's library's rate class."""
    fill = {
        BACKEND_FIELDS: backend_fields(config["backend"]),
        PROVENANCE_FIELDS: provenance_fields(config["backend"]),
    }
    return {
        s.name: tuple(dict.fromkeys(g for f in s.profile for g in fill.get(f, (f,))))
        for s in stages()
        if s.profile is not None
    }


def _expand(fields: Iterable[str], rate_classes: Iterable[str]) -> list[str]:
    out = []
    for f in fields:
        out += [f.format(rate_class=rc) for rc in rate_classes] if "{rate_class}" in f else [f]
    return out


def stage_view(
    profile: Mapping[str, Any], stage: str, config: Mapping[str, Any], library: str | None = None
) -> dict[str, Any]:
    """The figures ``stage`` reads from ``profile`` (for one library's job: only its rate class)."""
    fields = stage_fields(config).get(stage)
    if fields is None:
        raise KeyError(f"stage {stage!r} reads no profile: its declaration (oto/stages/{stage}.py) has none")
    classes = [Library.parse(library).family.rate_class] if library else list(profile["rates"])
    return profile_view(profile, _expand(fields, classes))


def _covers(field: str, path: str) -> bool:
    return path == field or path.startswith(f"{field}.") or field.startswith(f"{path}.")


def changed_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field path, old value, new value) for every figure that differs; comments and key order never do."""
    a, b = profile_view(old, view_paths(old)), profile_view(new, view_paths(new))
    out = []
    for path in sorted(set(view_paths(a)) | set(view_paths(b))):
        va, vb = _leaf(a, path), _leaf(b, path)
        if va != vb:
            out.append((path, va, vb))
    return out


def _leaf(view: Mapping[str, Any], path: str) -> Any:
    node: Any = view
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def invalidated_stages(
    changed: Sequence[str], config: Mapping[str, Any], libraries: Sequence[str]
) -> list[str]:
    """Stages (in workflow order) that read one of the ``changed`` fields for one of ``libraries``."""
    classes = sorted({Library.parse(lib).family.rate_class for lib in libraries})
    return [
        stage
        for stage, fields in stage_fields(config).items()
        if any(_covers(f, path) for f in _expand(fields, classes) for path in changed)
    ]


def _shown(value: Any) -> str:
    return "(absent)" if value is None else json.dumps(value)


def change_note(
    profile: Mapping[str, Any],
    profile_file: str,
    arch_dir: Path,
    config: Mapping[str, Any],
    libraries: Sequence[str],
) -> str:
    """What changed in the profile since the last run in ``arch_dir`` started and which stages that
    invalidates; '' when nothing a stage reads changed (or no run recorded a profile yet)."""
    record = Path(arch_dir) / RECORD
    try:
        old = json.loads(record.read_text())["profile"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    changes = changed_fields(old, profile)
    invalidated = invalidated_stages([c[0] for c in changes], config, libraries)
    if not invalidated:
        return ""
    measured = [s.name for s in stages() if s.gpu and s.name in invalidated]  # they measure again
    kept = [s for s in stage_fields(config) if s not in invalidated]
    lines = [
        f"oto: {profile_file} changed since the last run in {arch_dir} started: "
        + ", ".join(f"{p} {_shown(a)} -> {_shown(b)}" for p, a, b in changes),
        f"  this invalidates the results of: {', '.join(invalidated)} (Snakemake redoes those jobs and the "
        "jobs that read their outputs)",
    ]
    if measured:
        said = ", ".join(measured[:-1]) + " and " + measured[-1] if len(measured) > 1 else measured[0]
        lines.append(f"  {said} measure again: the figures their measurements depend on changed")
    lines.append(f"  stages that read none of these figures: {', '.join(kept) or 'none'}")
    return "\n".join(lines)


def record_profile(profile: Mapping[str, Any], profile_file: str, arch_dir: Path) -> None:
    """Remember the profile this run starts with (the next parse compares against it)."""
    doc = {"file": str(profile_file), "profile": profile_view(profile, view_paths(profile))}
    atomic_write_text(Path(arch_dir) / RECORD, json.dumps(doc, indent=1, sort_keys=True) + "\n")

"""Arch profiles: load ``arch_profiles/<arch>.yaml``, validate it, and say exactly what is wrong.

Every error is a :class:`ProfileError` with a one-line message ``<file>: field '<path>': <problem>`` so the
Snakemake config check can print it as is.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from oto.files import yaml_problem

if TYPE_CHECKING:
    import jsonschema

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "arch_profile.schema.json"
_ARCH_RE = re.compile(r"^gfx(?P<major>[0-9]{1,2})(?P<minor>[0-9])(?P<step>[0-9a-f])$")


class ProfileError(ValueError):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys: PyYAML would silently keep the last one."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def isa_name(isa: list[int] | tuple[int, ...]) -> str:
    """``[9, 0, 12]`` -> ``gfx90c``: the stepping is one hex digit, as in Tensile's ``gfxName``."""
    major, minor, step = isa
    return f"gfx{major}{minor}{step:x}"


def parse_arch(arch: str) -> tuple[int, int, int]:
    """``gfx90c`` -> ``(9, 0, 12)``."""
    m = _ARCH_RE.match(arch)
    if not m:
        raise ProfileError(f"not an AMDGPU arch name: {arch!r} (expected e.g. gfx90c)")
    return int(m["major"]), int(m["minor"]), int(m["step"], 16)


def profile_path(arch: str, root: str | Path = "arch_profiles") -> Path:
    parse_arch(arch)  # refuses anything that is not a gfx name, so no path can escape root
    return Path(root) / f"{arch}.yaml"


def arch_profile_file(arch: str, option: str = "--arch", root: str | Path = "arch_profiles") -> Path:
    """The workflow folder's profile of ``arch`` (``arch_profiles/<arch>.yaml``); ProfileError naming the
    option and the profiles this folder has where there is none."""
    try:
        path = profile_path(arch, root)
    except ProfileError as exc:
        raise ProfileError(f"{option}: {exc}") from None
    if not path.is_file():
        known = (
            ", ".join(sorted(p.stem for p in Path(root).glob("gfx*.yaml")))
            or "none: run in the workflow folder"
        )
        raise ProfileError(
            f"{option} {arch}: no {path} here (profiles here: {known}; docs/arch_profiles.md says how to "
            "describe another GPU)"
        )
    return path


def has_arch_profile(arch: str, root: str | Path = "arch_profiles") -> bool:
    """Whether this folder holds a profile of ``arch`` (anything not an arch name has none)."""
    try:
        return profile_path(arch, root).is_file()
    except ProfileError:
        return False


def profile_argument(text: str, option: str = "--profile") -> Path:
    """A command's profile argument: a profile file, or an arch name for the workflow folder's
    ``arch_profiles/<arch>.yaml``; ProfileError naming the option where it is neither."""
    path = Path(text)
    if path.is_file():
        return path
    try:
        parse_arch(text)
    except ProfileError:
        raise ProfileError(f"{option} {text}: no such file (give a profile file or an arch name)") from None
    return arch_profile_file(text, option)


def load_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def _read(path: Path) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: {yaml_problem(exc)}") from exc


def load_profile(path: str | Path) -> dict:
    """Read and validate one profile; the file stem must equal its ``arch``."""
    path = Path(path)
    profile = validate_profile(_read(path), str(path))
    if path.stem != profile["arch"]:
        raise ProfileError(
            f"{path}: field 'arch': {profile['arch']!r} does not match the file name "
            f"(expected {path.stem!r}, or rename the file to {profile['arch']}.yaml)"
        )
    return profile


def read_profile_figures(path: str | Path) -> dict:
    """A profile's figures, schema defaults filled in, *not* validated: for a workflow job, whose figures
    the run's plan validated and the job compares with its view (``oto.run.context.stage_profile``).
    Validating again in each of hundreds of jobs would load jsonschema (~0.1 s) every time."""
    path = Path(path)
    data = _read(path)
    if not isinstance(data, Mapping):
        validate_profile(data, str(path))  # raises, naming the file
    return _derived_defaults(_with_defaults(copy.deepcopy(dict(data)), load_schema()))


def validate_profile(data: Any, source: str) -> dict:
    """Validate already-loaded profile data; return a copy with schema defaults filled in."""
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ProfileError(f"{source}: the document is {kind}, expected a mapping of profile fields")
    import jsonschema  # here, not at the top: a workflow job reads its validated figures without it

    schema = load_schema()
    problems = sorted(
        {p for e in jsonschema.Draft202012Validator(schema).iter_errors(data) for p in _problems(e)}
        | set(_non_finite(data))
    )
    if problems:
        field, problem = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ProfileError(f"{source}: field '{field}': {problem}{more}")
    profile = _derived_defaults(_with_defaults(copy.deepcopy(dict(data)), schema))
    problems = _inconsistencies(profile) or _isa_inconsistencies(profile, data)
    if problems:
        field, problem = problems[0]
        raise ProfileError(f"{source}: field '{field}': {problem}")
    return profile


def _non_finite(data: Any, base: str = "") -> Iterator[tuple[str, str]]:
    """NaN and infinities: JSON Schema's bounds cannot catch NaN (every comparison with it is false), and a
    NaN clock would turn every ceiling, timing check and score into NaN."""
    if isinstance(data, float) and not math.isfinite(data):
        yield base or "<document>", f"{data!r} is not a finite number (NaN and infinity are not physical)"
    elif isinstance(data, Mapping):
        for k, v in data.items():
            yield from _non_finite(v, f"{base}.{k}" if base else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _non_finite(v, f"{base}[{i}]")


def _inconsistencies(p: dict) -> list[tuple[str, str]]:
    """Cross-field rules JSON Schema cannot state."""
    found = []
    mem = p["memory"]
    if mem["sustained_bandwidth_gbs"] > mem["peak_bandwidth_gbs"]:
        found.append(
            (
                "memory.sustained_bandwidth_gbs",
                f"{mem['sustained_bandwidth_gbs']} exceeds peak_bandwidth_gbs {mem['peak_bandwidth_gbs']}",
            )
        )
    expected = isa_name(p["isa"])
    if p["arch"] != expected:
        found.append(("isa", f"{p['isa']} names {expected}, not arch {p['arch']!r}"))
    if p["max_lds_per_workgroup"] > p["lds_bytes_per_cu"]:
        found.append(
            (
                "max_lds_per_workgroup",
                f"{p['max_lds_per_workgroup']} exceeds lds_bytes_per_cu {p['lds_bytes_per_cu']}",
            )
        )
    if p["vgprs_per_lane_max"] > p["vgpr_budget_per_simd"]:
        found.append(
            (
                "vgprs_per_lane_max",
                f"{p['vgprs_per_lane_max']} exceeds vgpr_budget_per_simd {p['vgpr_budget_per_simd']}",
            )
        )
    if p["sgprs_max"] > p["sgprs_per_simd"]:
        found.append(("sgprs_max", f"{p['sgprs_max']} exceeds sgprs_per_simd {p['sgprs_per_simd']}"))
    if p["wavefront_size"] % p["lanes_per_simd"]:
        found.append(
            (
                "wavefront_size",
                f"{p['wavefront_size']} is not a multiple of lanes_per_simd {p['lanes_per_simd']}",
            )
        )
    if p["max_workgroup_size"] % p["wavefront_size"]:
        found.append(
            (
                "max_workgroup_size",
                f"{p['max_workgroup_size']} is not a multiple of wavefront_size {p['wavefront_size']}",
            )
        )
    timing = p["timing"]
    for key in ("launch_us", "memory_latency_ns"):  # JSON Schema's bounds let NaN through
        if key in timing and not math.isfinite(timing[key]):
            found.append((f"timing.{key}", f"{timing[key]} is not a finite number"))
    for rate_class, mhz in timing.get("sustained_clock_mhz", {}).items():
        if not math.isfinite(mhz):
            found.append((f"timing.sustained_clock_mhz.{rate_class}", f"{mhz} is not a finite number"))
        elif mhz > p["clock_mhz"]:
            found.append(
                (f"timing.sustained_clock_mhz.{rate_class}", f"{mhz} exceeds clock_mhz {p['clock_mhz']}")
            )
    # No board runs above the datasheet (1% slack: gfx900's fitted second board holds FP64 at x1.008).
    for name, point in (timing.get("operating_points") or {}).items():
        where = f"timing.operating_points.{name}"
        own = timing.get("sustained_clock_mhz", {})
        for rate_class, factor in (point.get("clock") or {}).items():
            mhz = float(own.get(rate_class, p["clock_mhz"])) * factor
            if mhz > p["clock_mhz"] * 1.01:
                problem = f"{factor} x the sustained clock is {mhz:.1f} MHz, above clock_mhz {p['clock_mhz']}"
                found.append((f"{where}.clock.{rate_class}", problem))
        gbs = mem["sustained_bandwidth_gbs"] * float(point.get("bandwidth", 1.0))
        if gbs > mem["peak_bandwidth_gbs"] * 1.01:
            problem = f"{point.get('bandwidth')} x the sustained bandwidth is {gbs:.1f} GB/s, above the peak"
            found.append((f"{where}.bandwidth", problem))
    if p["apu"] and not mem["shared_with_cpu"]:
        found.append(("memory.shared_with_cpu", "must be true for an APU (apu: true)"))
    if p["wavefront_size"] not in p["wavefront_sizes"]:
        found.append(
            ("wavefront_size", f"{p['wavefront_size']} is not one of wavefront_sizes {p['wavefront_sizes']}")
        )
    wgp = p["workgroup_processor"]
    for block, keys in (
        ("workgroup_processor", ("compute_units", "lds_bytes")),
        ("wmma", ("instructions", "rates")),
    ):
        # both or neither: an empty block (the schema's default) says the GPU has none
        found += [(f"{block}.{k}", "missing required field") for k in keys if p[block] and k not in p[block]]
    if found:
        return found
    if wgp and p["compute_units"] % wgp["compute_units"]:
        found.append(
            (
                "compute_units",
                f"{p['compute_units']} is not a whole number of work-group processors of "
                f"{wgp['compute_units']} CUs (workgroup_processor.compute_units)",
            )
        )
    if wgp and wgp["lds_bytes"] < p["max_lds_per_workgroup"]:
        found.append(("workgroup_processor.lds_bytes", f"{wgp['lds_bytes']} is below max_lds_per_workgroup"))
    for rate_class, rate in p["wmma"].get("rates", {}).items():
        if p["rates"][rate_class] < rate:
            found.append(
                (
                    f"rates.{rate_class}",
                    f"{p['rates'][rate_class]} is below wmma.rates.{rate_class} {rate}: the rate is the peak "
                    "of the fastest path",
                )
            )
    own = {"compute_units": p["compute_units"], "clock_mhz": p["clock_mhz"]}
    own["peak_bandwidth_gbs"] = mem["peak_bandwidth_gbs"]
    for name, bounds in (p.get("device_range") or {}).items():
        if bounds["min"] > bounds["max"]:
            found.append((f"device_range.{name}", f"min {bounds['min']} exceeds max {bounds['max']}"))
        elif not bounds["min"] <= own[name] <= bounds["max"]:
            found.append(
                (
                    f"device_range.{name}",
                    f"[{bounds['min']}, {bounds['max']}] does not hold the profile's own {own[name]}",
                )
            )
    found += _stock_library_problems(p)
    return found


def hsa_override_version(arch: str) -> str:
    """The HSA_OVERRIDE_GFX_VERSION under which HIP reports ``arch``: gfx900 → 9.0.0, gfx90c → 9.0.12."""
    return ".".join(str(v) for v in parse_arch(arch))


def _stock_library_problems(p: dict) -> list[tuple[str, str]]:
    stock = p["stock_library"]
    found = []
    version = hsa_override_version(stock["arch"])
    if stock["hsa_override_gfx_version"] != version:
        found.append(
            (
                "stock_library.hsa_override_gfx_version",
                f"{stock['hsa_override_gfx_version']!r} is not {stock['arch']}'s version {version!r} "
                "(HIP reads major.minor.stepping, the stepping in decimal)",
            )
        )
    if stock["arch"] == p["arch"] and stock["logic_prefix"] != p["tensile"]["logic_prefix"]:
        found.append(
            (
                "stock_library.logic_prefix",
                f"{stock['logic_prefix']!r}: the stock library is {p['arch']}'s own, whose prefix is "
                f"tensile.logic_prefix {p['tensile']['logic_prefix']!r}",
            )
        )
    return found


# The fields an ISA family needs, beyond the schema's (oto.tensile.isa names the families): RDNA groups its
# CUs in work-group processors; RDNA3 has WMMA (its rates set the half, bf16 and int8 ceilings) and dual
# issue.
_WMMA_RATE_CLASSES = ("fp16_packed", "fp16_hpa", "bf16", "int8")


def _isa_inconsistencies(p: dict, raw: Mapping) -> list[tuple[str, str]]:
    """The profile against what Tensile and oto's legality rules know of its ISA (oto.tensile.isa): an ISA
    the rules do not model, and a field the ISA needs that is missing, or one it cannot have."""
    from oto.tensile.isa import UnknownIsa, isa_caps

    name = isa_name(p["isa"])
    caps_from = parse_arch(p["tensile"]["caps_from"])
    try:
        caps = isa_caps(tuple(p["isa"]), caps_from)
    except UnknownIsa as exc:
        return [(exc.field, str(exc))]
    found = []
    if p["has_mfma"] != caps.has_mfma:
        found.append(("has_mfma", f"{p['has_mfma']}: Tensile's capabilities for {name} say {caps.has_mfma}"))
    if sorted(p["wavefront_sizes"]) != sorted(caps.wavefront_sizes):
        found.append(
            (
                "wavefront_sizes",
                f"{p['wavefront_sizes']}: {name} runs {sorted(caps.wavefront_sizes)} "
                f"(Tensile's ArchCaps HasWave32: {caps.has_wave32})",
            )
        )
    if caps.has_wave32 and not p["workgroup_processor"]:
        found.append(
            ("workgroup_processor", f"missing: {name} (RDNA) groups its CUs in work-group processors")
        )
    if caps.has_wmma:
        if not raw.get("wmma"):
            found.append(
                ("wmma", f"missing: {name} ({caps.family}) has WMMA; its instructions and rates are needed")
            )
        for rate_class in _WMMA_RATE_CLASSES:
            if raw.get("wmma") and rate_class not in p["wmma"]["rates"]:
                found.append(
                    (
                        f"wmma.rates.{rate_class}",
                        f"missing: {name} runs {rate_class} on WMMA (v_wmma_*); its rate sets the "
                        f"{rate_class} ceiling",
                    )
                )
        if "fp32" not in p["dual_issue"]:
            found.append(("dual_issue.fp32", f"missing: {name} ({caps.family}) dual-issues FP32"))
    else:
        if p["wmma"]:
            found.append(("wmma", f"{name} has no WMMA (Tensile's capabilities: HasWMMA false)"))
        if p["dual_issue"]:
            found.append(("dual_issue", f"{name} has no dual issue (RDNA3 and later)"))
    return found


def _derived_defaults(profile: dict) -> dict:
    """Defaults that depend on other fields: one wavefront size unless the profile lists the ISA's."""
    profile.setdefault("wavefront_sizes", [profile["wavefront_size"]])
    return profile


def _with_defaults(instance: dict, schema: Mapping) -> dict:
    """Fill absent optional fields from the schema's ``default`` (objects only, recursively)."""
    for name, sub in schema.get("properties", {}).items():
        if name not in instance and "default" in sub:
            instance[name] = copy.deepcopy(sub["default"])
        if isinstance(instance.get(name), dict) and sub.get("type") == "object":
            _with_defaults(instance[name], sub)  # a block filled in above gets its own defaults too
    return instance


def _problems(error: jsonschema.ValidationError) -> list[tuple[str, str]]:
    """(field path, one-line problem) pairs of one schema error; a missing or unknown key is named itself."""
    base = ""
    for part in error.absolute_path:
        base += f"[{part}]" if isinstance(part, int) else (f".{part}" if base else str(part))
    prefix = f"{base}." if base else ""
    instance = error.instance if isinstance(error.instance, Mapping) else {}
    if error.validator == "required":
        return [(prefix + k, "missing required field") for k in error.validator_value if k not in instance]
    if error.validator == "additionalProperties":
        known = set(error.schema.get("properties", {}))
        unknown = [str(k) for k in instance if k not in known]
        return [(prefix + k, "unknown field (not in the arch profile schema)") for k in unknown]
    return [(base or "<document>", _one_line(error.message))]


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


# ---- what a stage may read of a profile -------------------------------------------------------------------


class UndeclaredProfileField(RuntimeError):
    """A stage read a profile field it does not declare (not a KeyError: ``.get`` must not hide it)."""


def _canonical(value: Any) -> Any:
    """Values whose repr does not depend on key order or on 1800 vs 1800.0 (the view is compared by repr)."""
    if isinstance(value, Mapping):
        return {str(k): _canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def profile_view(profile: Mapping, fields: Iterable[str]) -> dict:
    """The given fields (dotted paths: ``memory.sustained_bandwidth_gbs``; a parent path takes the whole
    block) of a validated profile as a plain dict, keys sorted and numbers canonical: equal views mean the
    figures a stage derives from the profile are equal, whatever the comments or the key order."""
    out: dict[str, Any] = {}
    for path in sorted(set(fields), key=lambda f: f.count(".")):
        parts = path.split(".")
        src, dst = profile, out
        for part in parts[:-1]:
            if dst.get(part) is src[part]:  # the whole block is in already
                break
            src, dst = src[part], dst.setdefault(part, {})
        else:
            if parts[-1] in src:  # an optional field the profile does not have (calibration) stays out
                dst.setdefault(parts[-1], src[parts[-1]])
    return _canonical(out)


def view_paths(view: Mapping, base: str = "") -> list[str]:
    """The leaf paths of a view (inverse of :func:`profile_view` for its shape); an empty block (a profile
    without WMMA: ``wmma: {}``) is a leaf of its own, and so is a block whose keys a dotted path cannot name
    (a calibration record's ``chip:sustained_clock_mhz.fp32``)."""
    out = []
    for k, v in view.items():
        path = f"{base}{k}"
        nested = isinstance(v, Mapping) and v and all("." not in str(key) for key in v)
        out += view_paths(v, f"{path}.") if nested else [path]
    return out


class ProfileView(dict):
    """A stage's profile: only the fields of its view, with the profile's own values. Reading any other field
    the profile has raises :class:`UndeclaredProfileField`, so a stage cannot depend on a figure that the
    workflow does not re-run it for (``oto.run.profile_views``)."""

    def __init__(self, profile: Mapping, view: Mapping, path: str = ""):
        super().__init__(
            {
                k: ProfileView(profile[k], v, f"{path}{k}.") if isinstance(v, Mapping) else profile[k]
                for k, v in view.items()
            }
        )
        self._fields = frozenset(profile)
        self._path = path

    def _undeclared(self, key: Any) -> UndeclaredProfileField:
        return UndeclaredProfileField(
            f"arch profile field '{self._path}{key}' is read by a stage that does not declare it "
            "(oto.run.profile_views): the workflow would not re-run the stage when it changes"
        )

    def __missing__(self, key: Any) -> Any:
        if key in self._fields:
            raise self._undeclared(key)
        raise KeyError(key)

    def get(self, key: Any, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        if key in self._fields:
            raise self._undeclared(key)
        return default

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        if key in self._fields:
            raise self._undeclared(key)
        return False

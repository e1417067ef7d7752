"""``oto upstream --arch gfx90c``: the tuned library as a change to rocBLAS and Tensile, ready for review.

The kit folder holds:

- ``library/src/blas3/Tensile/Logic/asm_full/<schedule>/<schedule>_<problem type>.yaml``: every library's
  final winners as a logic file labelled with the arch itself (the profile's ``tensile.logic_prefix``, e.g.
  ``gfx90c``), laid out and named as rocBLAS keeps its own (``asm_full/vega10/vega10_Cijk_Ailk_Bljk_SB
  .yaml``), each with its provenance record beside it (JSON: TensileCreateLibrary reads only YAML);
- ``patches/ROCm-Tensile.patch``, ``patches/ROCm-rocBLAS.patch``: what an architecture needs in Tensile and
  rocBLAS besides logic files (the ``SupportedISA`` entry, the ``architectureMap`` entry that selects the
  logic files, the assembler capabilities, the C++ host's ``Processor`` enum, its serialisation and
  lazy-loading tables, the build's target lists, rocBLAS's lazy-loading arch switch). With checkouts
  (``--tensile-src``, ``--rocblas-src``) each is a unified diff made on their files (``git apply`` or
  ``patch -p1`` in the checkout); without, it lists each edit with its file. The edits were read off
  ROCm/Tensile a164ed70 (4.44.0) and ROCm/rocBLAS b520bc83 (4.4.0); an anchor a later version moved is
  reported, naming the file, never guessed;
- ``PR.md``: the pull request's description, from the logic files' provenance and the verify and compare
  results. It is refused while any of them is simulated or missing, unless ``--allow-simulated`` (then it
  says so at its top);
- ``kit.yaml``: what is in the kit and where each part came from.

``check_with_tensile`` runs TensileCreateLibrary over the kit's logic folder the way rocBLAS's build runs it
(``TensileCreateLibraryFiles`` with rocBLAS's defaults: merged files, separate architectures, lazy loading,
msgpack), the arch registered at run time as the patch registers it, and lists what it built.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oto
from oto.deck.model import read_library_yaml
from oto.files import atomic_write_text, read_yaml, read_yaml_mirrored, write_yaml
from oto.hardware.simulated.checks import final_model_check
from oto.measurement.selection import final_row_problem
from oto.rocblas.compare import tuned_failures_note
from oto.rocblas.decisions import apply_replacements
from oto.rocblas.verify import read_verify
from oto.tensile.create_library import tcl_command
from oto.tensile.install import register_args
from oto.tensile.logic_writer import logic_file_name, write_library_logic
from oto.tensile.provenance import logic_record, record_path, write_record
from oto.tensile.runtime import isa_of, name_of

ROCBLAS_LOGIC = Path("library/src/blas3/Tensile/Logic/asm_full")
SOURCES = "ROCm/Tensile a164ed70 (Tensile 4.44.0) and ROCm/rocBLAS b520bc83 (rocBLAS 4.4.0)"


class UpstreamRefused(RuntimeError):
    """The kit would present numbers that were not measured (or are missing) as evidence."""


class EditError(ValueError):
    """An anchor of an edit is not in the file (another version of Tensile or rocBLAS); names both."""


# ---- the changes an architecture needs ----


@dataclass(frozen=True)
class Edit:
    repo: str  # ROCm/Tensile | ROCm/rocBLAS
    path: str  # in the repository
    what: str  # what changes, in one line
    apply: Callable[[str], str]  # the edit on the file's text


def _hip_enum(arch: str) -> int:
    """hipGcnArch's number of an arch (Tensile's AMDGPU::Processor values): gfx90a = 910, gfx90c = 912."""
    major, minor, step = isa_of(arch)
    return major * 100 + minor * 10 + step


def _neighbour(text: str, pattern: str, arch: str, path: str) -> str:
    """The arch a new entry goes after: the highest one of the same major version below ``arch`` among the
    names ``pattern`` (one group: the name) finds in ``text``."""
    mine = isa_of(arch)
    found = set()
    for name in re.findall(pattern, text):
        try:
            isa = isa_of(name)
        except ValueError:
            continue
        if isa[0] == mine[0] and isa < mine:
            found.add((isa, name))
    if not found:
        raise EditError(f"{path}: no gfx{mine[0]} entry below {arch} to place it after ({pattern!r})")
    return max(found)[1]


def _lines_after(text: str, start: str, end: str | None, path: str, transform: Callable[[str], str]) -> str:
    """Insert, after the block that starts at the first line matching ``start`` and ends at the first line
    from there matching ``end`` (the start line itself when None), the block's lines transformed."""
    lines = text.splitlines(keepends=True)
    first = next((i for i, ln in enumerate(lines) if re.search(start, ln)), None)
    if first is None:
        raise EditError(f"{path}: no line matching {start!r}")
    last = first
    if end is not None:
        last = next((i for i in range(first, len(lines)) if re.search(end, lines[i])), None)
        if last is None:
            raise EditError(f"{path}: the block at line {first + 1} has no end matching {end!r}")
    block = [transform(ln) for ln in lines[first : last + 1]]
    return "".join(lines[: last + 1] + block + lines[last + 1 :])


def _renamed(old: str, new: str) -> Callable[[str], str]:
    subs = {old: new, str(_hip_enum(old)): str(_hip_enum(new))}
    return lambda line: re.sub("|".join(map(re.escape, subs)), lambda m: subs[m.group(0)], line)


def architecture_edits(profile: Mapping[str, Any]) -> list[Edit]:
    """The edits that make Tensile and rocBLAS know ``profile``'s arch (see the module doc); the assembler
    capabilities are those of the profile's ``tensile.caps_from``, as oto registers them at run time."""
    arch = str(profile["arch"])
    donor = str((profile.get("tensile") or {}).get("caps_from") or "")
    schedule = str(profile["tensile"]["logic_prefix"])
    isa = isa_of(arch)
    isa_text = f"({isa[0]},{isa[1]},{isa[2]})"

    def supported_isa(text: str) -> str:
        m = re.search(r'globalParameters\["SupportedISA"\] = \[(.*?)\]', text, re.S)
        if not m:
            raise EditError('Tensile/Common.py: no globalParameters["SupportedISA"] list')
        tuples = re.findall(r"\((\d+), *(\d+), *(\d+)\)", m.group(1))
        below = [t for t in tuples if int(t[0]) == isa[0] and tuple(map(int, t)) < isa]
        if not below:
            raise EditError(f"Tensile/Common.py: SupportedISA has no gfx{isa[0]} entry below {arch}")
        after = max(below, key=lambda t: tuple(map(int, t)))
        spelled = re.search(rf"\({after[0]}, *{after[1]}, *{after[2]}\)", m.group(1)).group(0)
        body = m.group(1).replace(spelled, f"{spelled}, {isa_text}", 1)
        return text[: m.start(1)] + body + text[m.end(1) :]

    def architecture_map(text: str) -> str:
        m = re.search(r"architectureMap = \{(.*?)\}", text, re.S)
        if not m:
            raise EditError("Tensile/Common.py: no architectureMap")
        near = _neighbour(m.group(1), r"'(gfx[0-9a-f]+)':", arch, "Tensile/Common.py architectureMap")
        start = re.escape(f"'{near}':")
        return _lines_after(
            text, start, None, "Tensile/Common.py",
            lambda ln: re.match(r"\s*", ln).group(0) + f"'{arch}':'{schedule}',\n",
        )  # fmt: skip

    def asm_caps(text: str) -> str:
        path = "Tensile/AsmCaps.py"
        d = isa_of(donor)
        old_key, new_key = f"({d[0]}, {d[1]}, {d[2]}):", f"({isa[0]}, {isa[1]}, {isa[2]}):"
        start = rf"^\s*\(?{re.escape(old_key)} \{{"
        lines = text.splitlines()
        first = next((i for i, ln in enumerate(lines) if re.search(start, ln)), None)
        if first is not None and not lines[first].lstrip().startswith("("):
            raise EditError(f"{path}: {donor}'s entry opens the table: place {arch}'s by hand")
        end = next((i for i in range(first or 0, len(lines)) if re.search(r"\}[,}]\s*$", lines[i])), None)
        if first is not None and end is not None and lines[end].rstrip().endswith("}}"):
            raise EditError(f"{path}: {donor}'s entry closes the table: place {arch}'s by hand")
        return _lines_after(text, start, r"\}[,}]\s*$", path, lambda ln: ln.replace(old_key, new_key))

    def amdgpu_hpp(text: str) -> str:
        path = "Tensile/Source/lib/include/Tensile/AMDGPU.hpp"
        near = _neighbour(text, r"(?m)^\s*(gfx[0-9a-f]+)\s*=\s*\d+,", arch, path)
        step = _renamed(near, arch)
        text = _lines_after(text, rf"^\s*{near}\s*=\s*\d+,", None, path, step)
        text = _lines_after(text, rf"case AMDGPU::Processor::{near}:", r"return", path, step)
        return _lines_after(text, rf'else if\(deviceString\.find\("{near}"\)', r"^\s*\}\s*$", path, step)

    def predicates_hpp(text: str) -> str:
        path = "Tensile/Source/lib/include/Tensile/Serialization/Predicates.hpp"
        near = _neighbour(text, r'enumCase\(io, value, "(gfx[0-9a-f]+)"', arch, path)
        return _lines_after(text, rf'enumCase\(io, value, "{near}"', None, path, _renamed(near, arch))

    def placeholder_hpp(text: str) -> str:
        path = "Tensile/Source/lib/include/Tensile/PlaceholderLibrary.hpp"
        near = _neighbour(text, r"case LazyLoadingInit::(gfx[0-9a-f]+):", arch, path)
        step = _renamed(near, arch)
        text = _lines_after(text, rf"^\s*{near},\s*$", None, path, step)
        return _lines_after(text, rf"case LazyLoadingInit::{near}:", r"return", path, step)

    def tensile_cmake(text: str) -> str:
        lists = [ln for ln in text.splitlines() if "set(TENSILE_GPU_ARCHS" in ln]
        near = _neighbour(" ".join(lists), r"\b(gfx[0-9a-f]+)\b", arch, "Tensile/Source/CMakeLists.txt")
        add = re.compile(rf"\b({near}(?::xnack-)?)(?=\s)")
        return "".join(
            add.sub(rf"\1 {arch}", ln) if "set(TENSILE_GPU_ARCHS" in ln else ln
            for ln in text.splitlines(keepends=True)
        )

    def rocblas_cmake(text: str) -> str:
        lists = re.findall(r"set\( TARGET_LIST_ROCM_(\d+)\.(\d+) ", text)
        if not lists:
            raise EditError("CMakeLists.txt: no TARGET_LIST_ROCM_<version> list")
        newest = max(lists, key=lambda v: (int(v[0]), int(v[1])))
        start = rf'set\( TARGET_LIST_ROCM_{newest[0]}\.{newest[1]} "'
        lines = text.splitlines(keepends=True)
        i = next(i for i, ln in enumerate(lines) if re.search(start, ln))
        near = _neighbour(lines[i], r"(gfx[0-9a-f]+)(?::xnack[+-])?[;\"]", arch, "CMakeLists.txt")
        lines[i] = re.sub(rf"({near}(?::xnack[+-])?);", rf"\1;{arch};", lines[i], count=1)
        return "".join(lines)

    def tensile_host(text: str) -> str:
        path = "library/src/tensile_host.cpp"
        near = _neighbour(text, r'deviceString\.find\("(gfx[0-9a-f]+)"\)', arch, path)
        return _lines_after(
            text, rf'else if\(deviceString\.find\("{near}"\)', r"^\s*\}\s*$", path, _renamed(near, arch)
        )

    isa_name = name_of(isa)
    return [
        Edit("ROCm/Tensile", "Tensile/Common.py", f"SupportedISA: add {isa_text} ({isa_name})",
             supported_isa),
        Edit("ROCm/Tensile", "Tensile/Common.py",
             f"architectureMap: '{arch}':'{schedule}', which selects the {schedule}_*.yaml logic files",
             architecture_map),
        Edit("ROCm/Tensile", "Tensile/AsmCaps.py",
             f"assembler-capability cache: {isa_text} with {donor}'s entry (clang gives them the same)",
             asm_caps),
        Edit("ROCm/Tensile", "Tensile/Source/lib/include/Tensile/AMDGPU.hpp",
             f"Processor::{arch} = {_hip_enum(arch)}, its name, and toProcessorId", amdgpu_hpp),
        Edit("ROCm/Tensile", "Tensile/Source/lib/include/Tensile/Serialization/Predicates.hpp",
             f'the Processor enum table: "{arch}" (else a library naming it fails with "Enum not found!")',
             predicates_hpp),
        Edit("ROCm/Tensile", "Tensile/Source/lib/include/Tensile/PlaceholderLibrary.hpp",
             f"LazyLoadingInit::{arch} and its TensileLibrary_*_{arch} pattern", placeholder_hpp),
        Edit("ROCm/Tensile", "Tensile/Source/CMakeLists.txt", f"TENSILE_GPU_ARCHS: add {arch}",
             tensile_cmake),
        Edit("ROCm/rocBLAS", "CMakeLists.txt", f"the newest TARGET_LIST_ROCM_*: add {arch}", rocblas_cmake),
        Edit("ROCm/rocBLAS", "library/src/tensile_host.cpp",
             f"getLazyLoadingArch: {arch} -> Tensile::LazyLoadingInit::{arch}", tensile_host),
    ]  # fmt: skip


def patch_name(repo: str) -> str:
    """``ROCm/Tensile`` -> ``patches/ROCm-Tensile.patch``."""
    return f"patches/{repo.replace('/', '-')}.patch"


def src_flag(repo: str) -> str:
    """The ``oto upstream`` option that names a checkout of ``repo`` (ROCm/Tensile: --tensile-src)."""
    return f"--{repo.split('/')[1].lower()}-src"


def patch_text(edits: Sequence[Edit], sources: Mapping[str, Path | None]) -> tuple[dict[str, str], list[str]]:
    """({repository: its patch}, problems). A repository's patch is a unified diff of its files (``git apply``
    or ``patch -p1`` in its checkout) when its checkout is given (``sources``: repo -> folder), else its
    edits described, file by file; either way the header lists every edit. An edit whose anchor is missing
    is a problem naming file and anchor, and the rest is still written."""
    patches: dict[str, str] = {}
    problems: list[str] = []
    for repo in dict.fromkeys(e.repo for e in edits):
        mine = [e for e in edits if e.repo == repo]
        root = sources.get(repo)
        out = [
            f"# oto {oto.__version__}: what {repo} needs for the architecture besides logic files.",
            f"# Edits read off {SOURCES}; " + (f"diff against {root}." if root else "no checkout given."),
            *[f"#   {e.path}: {e.what}" for e in mine],
        ]
        if root is None:
            out.append(f"# The diff itself: oto upstream {src_flag(repo)} <a {repo} checkout>.")
            patches[repo] = "\n".join(out) + "\n"
            continue
        for path in dict.fromkeys(e.path for e in mine):
            try:
                before = (Path(root) / path).read_text()
            except OSError as exc:
                problems.append(f"{repo}:{path}: unreadable in {root} ({exc.strerror or exc})")
                continue
            after = before
            for e in (e for e in mine if e.path == path):
                try:
                    after = e.apply(after)
                except EditError as exc:
                    problems.append(f"{repo}: {exc}")
            diff = difflib.unified_diff(
                before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
            )
            out.append("".join(diff).rstrip("\n"))
        patches[repo] = "\n".join(out) + "\n"
    return patches, problems


# ---- the PR description ----


def _numbers(doc: Mapping[str, Any] | None) -> str:
    return str((doc or {}).get("numbers") or "missing")


def refusal(
    records: Sequence[Mapping[str, Any]], verify: Mapping | None, compare: Mapping | None
) -> list[str]:
    """Why the kit's evidence is not measured: one line per part that is simulated, replayed or missing."""
    why = []
    kinds = sorted({str(r.get("numbers")) for r in records})
    if kinds != ["measured"]:
        why.append(f"the logic files' winners are {', '.join(kinds) or 'of no recorded provenance'}")
    for name, doc in (("verify", verify), ("compare", compare)):
        if _numbers(doc) != "measured":
            why.append(f"the {name} results are {_numbers(doc)}")
    return why


def _patch_kinds(edits: Sequence[Edit], diffed: Collection[str]) -> str:
    """What each repository's patch file is: a diff to apply, or (no checkout given) the edits to make."""
    kinds = []
    for repo in dict.fromkeys(e.repo for e in edits):
        if repo in diffed:
            kinds.append(f"{repo}'s a diff (`git apply` in its checkout)")
        else:
            kinds.append(
                f"{repo}'s the edits listed, no diff (`oto upstream {src_flag(repo)} <checkout>` writes one)"
            )
    return "; ".join(kinds) + ":"


def pr_description(
    profile: Mapping[str, Any],
    logic: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    verify: Mapping | None,
    compare: Mapping | None,
    edits: Sequence[Edit],
    not_measured: Sequence[str],
    coverage: str | None = None,
    diffed: Collection[str] = (),
) -> str:
    """PR.md (see the module doc). ``logic``: per logic file {file, library, solutions, rows}; ``diffed``: the
    repositories whose patch is a diff (their checkout was given), the others' lists the edits."""
    arch, schedule = str(profile["arch"]), str(profile["tensile"]["logic_prefix"])
    out = []
    if not_measured:
        out += [
            "> **NOT FOR SUBMISSION.** "
            + "; ".join(not_measured)
            + ". Written with --allow-simulated: every",
            "> figure below that is not measured says so; nothing here is evidence about a real GPU.",
            "",
        ]
    out += [
        f"# Tuned Tensile logic for {arch} ({profile.get('name', arch)})",
        "",
        "## What",
        "",
        f"- {len(logic)} logic file(s) in `{ROCBLAS_LOGIC / schedule}/`, named as rocBLAS names its own "
        f"(`{schedule}_<problem type>.yaml`): {sum(x['solutions'] for x in logic)} solutions, "
        f"{sum(x['rows'] for x in logic)} exact sizes, families "
        f"{', '.join(sorted({x['library'].split('_', 3)[3] for x in logic}))}.",
        *([coverage] if coverage else []),
        f"- `patches/`: {arch} made known to Tensile and rocBLAS, a file per repository: "
        + _patch_kinds(edits, diffed),
        *[f"  - {e.repo} `{e.path}`: {e.what}" for e in edits],
        "",
        "## Where the numbers come from",
        "",
        f"Written by oto {oto.__version__} (commit {oto.source_commit() or 'unknown: not a git checkout'}); "
        "each library's night is the run that finished it (its id digests that run's whole config; the "
        "`.provenance.json` beside each logic file holds its settings).",
        "",
    ]
    for r in records:
        prov = r.get("provenance") or {}
        facts = ", ".join(
            f"{k} {prov[k]}" for k in ("tensile_version", "device", "model_version", "seed") if k in prov
        )
        drift = (r.get("measurement") or {}).get("drift", "")
        night = (r.get("night") or {}).get("id") or "not recorded"
        out.append(
            f"- `{r.get('library')}`: **{r.get('numbers')}** by {r.get('backend')} ({facts}); drift: "
            f"{drift}; night `{night}`"
        )
    out += ["", f"## Correctness (verify: rocBLAS's own client, {_numbers(verify)})", ""]
    kit_libraries = {x["library"] for x in logic}
    if verify:
        client = (verify.get("client") or {}).get("client", "rocblas-bench")
        checked = verify.get("libraries") or {}
        missing = sorted(kit_libraries - set(checked))
        out.append(
            f"Every deck size of each library below checked with `{client} -v 1` with the library "
            "installed; a kernel taken out is replaced in the logic files as the run's "
            "logic stage replaced it." + (f" **Not verified: {', '.join(missing)}.**" if missing else "")
        )
        out.append("")
        out.append("| library | pass | fail | crash | timeout | gpu_reset | unverified | kernels taken out |")
        out.append("|---|---|---|---|---|---|---|---|")
        for lib, d in sorted((lib, d) for lib, d in checked.items() if lib in kit_libraries):
            c = d.get("counts") or {}
            unverified = c.get("malformed", 0) + c.get("unsupported", 0)
            out.append(
                f"| {lib} | {c.get('pass', 0)} | {c.get('fail', 0)} | {c.get('crash', 0)} "
                f"| {c.get('timeout', 0)} "
                f"| {c.get('gpu_reset', 0)} | {unverified} | {len(d.get('changes') or [])} |"
            )
    else:
        out.append("Not run.")
    out += ["", f"## Performance (compare: paired, interleaved rocblas-bench A/B, {_numbers(compare)})", ""]
    if compare:
        for baseline, fams in sorted((compare.get("against") or {}).items()):
            out.append(
                f"Speed-up of the tuned library over **{baseline}** per family (95% interval of the median):"
            )
            out.append("")
            out.append(
                "| family | sizes | median [95% CI] | geomean | p10..p90 | win/tie/loss | regressions |"
            )
            out.append("|---|---|---|---|---|---|---|")
            regressions, wrong, own = [], [], []
            for fam, s in sorted(fams.items()):
                ci = s.get("median_ci") or ["?", "?"]
                out.append(
                    f"| {fam} | {s.get('measured')}/{s.get('sizes')} | {s.get('median_speedup')} "
                    f"[{ci[0]}, {ci[1]}] | {s.get('geomean_speedup')} | {s.get('p10')}..{s.get('p90')} | "
                    f"{s.get('wins')}/{s.get('ties')}/{s.get('losses')} | {len(s.get('regressions') or [])} |"
                )
                regressions += [(fam, r) for r in s.get("regressions") or []]
                wrong += s.get("baseline_failed") or []
                if failed := s.get("failed"):  # the tuned library's own calls: a hang must be seen
                    own.append(f"- {fam}: {tuned_failures_note(failed)}")
            out.append("")
            out += [*own, ""] if own else []
            for _fam, r in regressions:
                out.append(
                    f"- regression vs {baseline}: {r['library']} size {r['size_index']}: {r['speedup']} "
                    f"[{r['ci_low']}, {r['ci_high']}]"
                )
            if wrong:  # the baseline gave wrong results there: left out of its figures, fixed by the library
                out.append(
                    f"- {len(wrong)} size(s) left out: {baseline}'s kernel gave wrong results there on "
                    f"{arch} (finalize's race); the tuned library ships its own kernel there, checked by "
                    "verify above: " + "; ".join(f"{w['library']} size {w['size_index']}" for w in wrong)
                )
            if regressions or wrong:
                out.append("")
    else:
        out.append("Not run.")
    out += [
        "",
        "## Reproduce",
        "",
        "```sh",
        f"oto upstream --arch {arch}    # this kit, from the results folder",
        "TensileCreateLibrary --merge-files --no-short-file-names --separate-architectures "
        f"--lazy-library-loading --library-format=msgpack --architecture={arch} {ROCBLAS_LOGIC} "
        "build/Tensile HIP",
        "```",
        "",
        f"Generated by oto {oto.__version__}.",
    ]
    return "\n".join(out) + "\n"


# ---- the kit ----


def checked_final(path: Path, doc: Any, arch: str) -> dict[str, Any]:
    """A final.yaml the kit can hand on, else UpstreamRefused naming the file and field: a library with its
    rows and kernels, numbers of this arch, every winner a kernel it lists with a positive, finite score (none
    only where the floor failed) and GFLOPS. (A hand-edited winner raised a KeyError after the kit's old logic
    files were deleted; a NaN score shipped as a row of 0 GFLOPS.)"""
    if not isinstance(doc, Mapping) or not doc.get("library") or not isinstance(doc.get("per_size"), list):
        raise UpstreamRefused(f"{path}: not a final.yaml (fields 'library', 'per_size')")
    kernels = doc.get("kernels") if isinstance(doc.get("kernels"), Mapping) else {}
    theirs = (doc.get("provenance") or {}).get("arch")
    if theirs and theirs != arch:
        raise UpstreamRefused(
            f"{path}: field 'provenance.arch': {theirs!r}: another GPU's library, not {arch}'s"
        )
    for j, row in enumerate(doc["per_size"]):
        if not isinstance(row, Mapping) or not row.get("winner"):
            continue
        if problem := final_row_problem(row, kernels):
            col, value, why = problem
            raise UpstreamRefused(f"{path}: field 'per_size[{j}].{col}': {value!r} {why}")
    return dict(doc)


def coverage_line(results: Path, logic: Sequence[Mapping[str, Any]], unfinished: Sequence[str]) -> str:
    """What share of the stock footprint the kit covers (the run's deck.yaml), and what it leaves out."""
    deck = read_yaml_mirrored(results / "deck.yaml") if (results / "deck.yaml").is_file() else {}
    prov = (deck or {}).get("provenance") or {}
    source = prov.get("stats_of_source") or {}
    line = (
        f"- Coverage: {len(logic)} of the {prov.get('libraries_in_source') or '?'} GEMM libraries rocBLAS "
        f"ships for the stock {prov.get('deck_of') or '?'} footprint, {sum(x['rows'] for x in logic)} exact "
        f"sizes of its {source.get('unique_sizes') or '?'}"
    )
    if cap := ((deck or {}).get("size_cap") or {}).get("text"):
        line += f"; deck {cap}"
    if unfinished:
        line += f"; not in the kit, no final.yaml: {', '.join(unfinished)}"
    line += "."
    if prov.get("libraries_in_source") and len(logic) < int(prov["libraries_in_source"]):
        line += (
            " **Partial:** once `architectureMap` maps this arch to its own logic (the patches below), a "
            "problem type without a logic file here has none for it (it used the stock library's before): "
            "tune the whole footprint (`families: all`, `deck.max_sizes: null`) before submitting."
        )
    return line


def write_kit(
    results: Path,
    profile: Mapping[str, Any],
    out: Path,
    verify: Mapping | None = None,
    compare: Mapping | None = None,
    allow_simulated: bool = False,
    sources: Mapping[str, Path | None] | None = None,
) -> dict[str, Any]:
    """The kit from ``results`` (``results/<arch>``: each library's final.yaml and deck.yaml) into ``out``.
    Raises UpstreamRefused, writing nothing, when the evidence is not measured (see the module doc)."""
    results, out = Path(results), Path(out)
    finals = sorted(results.glob("*/final.yaml"))
    if not finals:
        raise UpstreamRefused(f"{results}: no library has a final.yaml: nothing to hand upstream")
    schedule = str(profile["tensile"]["logic_prefix"])
    finals_docs = [(p, checked_final(p, read_yaml_mirrored(p), str(profile["arch"]))) for p in finals]
    verified = (verify or {}).get("libraries") or {}
    # the kernels verify took out are replaced as the logic stage replaces them (oto.rocblas.decisions)
    finals_docs = [(p, apply_replacements(doc, verified.get(doc["library"]))) for p, doc in finals_docs]
    # how well the model behind simulated numbers was checked on this chip, as the logic stage's files say
    checks = [final_model_check(doc, str(profile["arch"])) for _, doc in finals_docs]
    records = [
        logic_record(doc, Path(logic_file_name(schedule, doc["library"])), "native", check)
        for (_, doc), check in zip(finals_docs, checks, strict=True)
    ]
    not_measured = refusal(records, verify, compare)
    unverified = sorted(doc["library"] for _, doc in finals_docs if doc["library"] not in verified)
    if verify and unverified:
        not_measured.append(f"verify has no result for {', '.join(unverified)}")
    unfinished = sorted(
        d.parent.name for d in results.glob("Cijk_*/deck.yaml") if not (d.parent / "final.yaml").is_file()
    )
    if not_measured and not allow_simulated:
        raise UpstreamRefused(
            "; ".join(not_measured)
            + ": the kit presents measured evidence only (--allow-simulated writes it, marked as such)"
        )
    logic_dir = out / ROCBLAS_LOGIC / schedule
    staging = logic_dir.with_name(f".{logic_dir.name}.writing")  # the kit's old logic stays until it is done
    shutil.rmtree(staging, ignore_errors=True)
    logic = []
    for (path, doc), record, check in zip(finals_docs, records, checks, strict=True):
        deck = read_library_yaml(path.parent / "deck.yaml")
        target = staging / logic_file_name(schedule, deck.name)
        solutions, rows, notes = write_library_logic(
            doc, deck, profile, "native", target, source=str(path), model_check=check
        )
        write_record(record, record_path(target))
        logic.append({"file": str((logic_dir / target.name).relative_to(out)), "library": deck.name,
                      "solutions": solutions, "rows": rows, "notes": notes})  # fmt: skip
    if logic_dir.exists():
        shutil.rmtree(logic_dir)
    staging.rename(logic_dir)
    edits = architecture_edits(profile)
    patches, problems = patch_text(edits, sources or {})
    for repo, text in patches.items():
        atomic_write_text(out / patch_name(repo), text)
    coverage = coverage_line(results, logic, unfinished)
    atomic_write_text(
        out / "PR.md",
        pr_description(
            profile,
            logic,
            records,
            verify,
            compare,
            edits,
            not_measured,
            coverage,
            {repo for repo, root in (sources or {}).items() if root is not None},
        ),
    )
    kit = {
        "arch": profile["arch"],
        "oto_version": oto.__version__,
        "logic_dir": str(ROCBLAS_LOGIC / schedule),
        "logic": logic,
        "patches": {"files": [patch_name(r) for r in patches],
                    "edits": [f"{e.repo}:{e.path}: {e.what}" for e in edits],
                  "against": {r: str(p) for r, p in (sources or {}).items() if p}, "problems": problems},
        "numbers": {"logic": sorted({str(r["numbers"]) for r in records}), "verify": _numbers(verify),
                    "compare": _numbers(compare)},
        "not_measured": not_measured,
        "unfinished": unfinished,  # libraries of the run without a final.yaml: not in the kit
    }  # fmt: skip
    write_yaml(out / "kit.yaml", kit)
    return kit


def check_with_tensile(
    kit: Path, profile: Mapping[str, Any], tensile_cfg: Mapping[str, Any], out: Path, jobs: int = 2,
    timeout_s: float = 6 * 3600,
) -> dict[str, Any]:  # fmt: skip
    """TensileCreateLibrary over the kit's ``asm_full`` folder as rocBLAS's build runs it (see the module
    doc), into ``out``: {rc, files, log, command}; {} when Tensile is not found."""
    arch = str(profile["arch"])
    out = Path(out).resolve()  # TensileCreateLibrary writes build_tmp/ in its working folder: run it in out
    cmd = tcl_command(
        arch, Path(kit).resolve() / ROCBLAS_LOGIC, out, tensile_cfg, jobs, register_args(profile)
    )
    if cmd is None:
        return {}
    cmd.insert(cmd.index("--merge-files") + 1, "--no-short-file-names")  # rocBLAS's default
    out.mkdir(parents=True, exist_ok=True)
    log = out / "tensile_create_library.log"
    with open(log, "w") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        try:
            rc = subprocess.run(
                cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s, cwd=out
            ).returncode
        except subprocess.TimeoutExpired:
            rc = None
    files = sorted(p.name for p in (out / "library").glob("*") if p.suffix in (".dat", ".co", ".hsaco"))
    return {"rc": rc, "files": files, "log": str(log), "command": " ".join(cmd)}


def main(argv: Sequence[str]) -> int:
    from oto.hardware.profile import load_profile

    ap = argparse.ArgumentParser(prog="oto upstream", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", required=True, help="the arch profile (arch_profiles/<arch>.yaml)")
    ap.add_argument("--results", type=Path, default=Path("results"), help="the results parent folder")
    ap.add_argument("--out", type=Path, help="the kit folder (default: <results>/<arch>/upstream)")
    ap.add_argument(
        "--verify", type=Path, help="verify results (default: every <results>/<arch>/<library>/verify.yaml)"
    )
    ap.add_argument(
        "--compare", type=Path, help="compare results (default: <results>/<arch>/compare/compare.yaml)"
    )
    ap.add_argument(
        "--allow-simulated", action="store_true", help="write the kit from simulated evidence, marked"
    )
    ap.add_argument("--tensile-src", type=Path, help="a ROCm/Tensile checkout: the patch becomes a diff")
    ap.add_argument("--rocblas-src", type=Path, help="a ROCm/rocBLAS checkout: the patch becomes a diff")
    ap.add_argument(
        "--check", action="store_true", help="run TensileCreateLibrary over the kit (Tensile needed)"
    )
    args = ap.parse_args(list(argv))
    profile = load_profile(Path("arch_profiles") / f"{args.arch}.yaml")
    arch_dir = args.results / args.arch
    out = args.out or arch_dir / "upstream"
    docs = {}
    for name in ("verify", "compare"):
        path = getattr(args, name) or arch_dir / name / f"{name}.yaml"  # the verify and compare rules' files
        docs[name] = read_yaml(path) if Path(path).exists() else None
    if args.verify is None:  # one verify job per library: their files together
        docs["verify"] = read_verify(arch_dir)
    try:
        kit = write_kit(
            arch_dir, profile, out, docs["verify"], docs["compare"], args.allow_simulated,
            {"ROCm/Tensile": args.tensile_src, "ROCm/rocBLAS": args.rocblas_src},
        )  # fmt: skip
    except UpstreamRefused as exc:
        print(f"oto upstream: refused: {exc}", file=sys.stderr)
        return 1
    print(f"kit in {out}: {len(kit['logic'])} logic file(s) under {kit['logic_dir']}, patches/, PR.md")
    for p in kit["patches"]["problems"]:
        print(f"  patch: {p}", file=sys.stderr)
    if args.check:
        from oto.config import config_defaults

        res = check_with_tensile(out, profile, config_defaults("tensile"), out / "tensile-check")
        if not res:
            print("  TensileCreateLibrary: Tensile not found (set $OTO_TENSILE_PYTHON)", file=sys.stderr)
            return 1
        print(f"  TensileCreateLibrary: rc {res['rc']}, {len(res['files'])} file(s); log {res['log']}")
        return 0 if res["rc"] == 0 else 1
    return 0

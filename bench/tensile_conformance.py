"""Conformance: everything oto writes, real Tensile 4.44 accepts (issue 13).

Where Tensile is installed ($OTO_TENSILE_PYTHON, or a `Tensile` script on PATH), this takes a simulated run
over every family of the deck (one generation, backend sim, two launches per kernel and size: the files are
checked, not the timings) and checks its files the way a new user's GPU run would use them:

1. every library's emitted ``gen0/tensile_config.yaml`` (candidates and the references they race), as
   written, goes through the real ``Tensile`` benchmark program with a stand-in client (tests/
   stand_in_client.py: writes a results CSV, so Tensile's LibraryLogic step runs too). Counted per kernel:
   forked (Tensile's ``Actual Solutions ... after SolutionStructs``), rejected (``rejecting solution``),
   generated (``after KernelWriter``), assembled (solutions of the benchmark library built into code
   objects); a kernel oto sent that Tensile did not fork, generate or assemble is a disagreement, and so is
   a run that did not end with rc 0 and a library logic file;
2. every library's final winners are written as logic files for both labels (``native``: the arch itself,
   gfx90c, or another with ``--arch``; and ``spoof``: the arch of the profile's ``stock_library``, gfx900 for
   gfx90c and gfx902, gfx1030 for gfx1035, gfx1100 for gfx1103) by the logic stage, and
   each label's set goes through TensileCreateLibrary twice: the lazy build rocBLAS uses
   (``TensileLibrary_lazy_<label>.dat`` + one child per problem type, code objects assembled) and a merged
   build (``--generate-sources-and-exit``: the merged ``TensileLibrary.dat`` the package stage writes
   natively). oto's own writer (oto.tensile.native_library) must give the same libraries, field by field;
   every differing field is a disagreement.

Prints one row per family (libraries, kernels, forked, rejected, generated, assembled, logic solutions,
disagreements) and then every disagreement. Target: zero on all 13 families. Results: bench/RESULTS.md.

Every Tensile and TensileCreateLibrary run has a timeout (``--timeout``, ``--tcl-timeout``): a run that
hangs is killed with its process group and counted as a disagreement naming its log, and the bench goes
on to the next one. The stand-in client runs without its test fates (``STAND_IN_CLIENT_NO_FATES``: the
emitted configs carry whatever WorkGroupMapping the strategies chose, and a WGM of 16/32/64 is a failure
only in the backend's tests).

    export OTO_TENSILE_PYTHON=...   # any Tensile install (docs/tensile.md §1)
    python bench/tensile_conformance.py [--run RESULTS_PARENT] [--arch gfx902] [--families SB HB ...]
                                        [--jobs 2]
"""

from __future__ import annotations

import argparse
import collections
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgpack
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from oto.config import config_defaults  # noqa: E402
from oto.gemm import Library  # noqa: E402
from oto.stages import logic as logic_stage  # noqa: E402
from oto.tensile.create_library import build_library, tcl_command  # noqa: E402
from oto.tensile.install import RUNTIME_SCRIPT, register_args, tensile_python_from_path  # noqa: E402
from oto.tensile.labels import logic_label  # noqa: E402
from oto.tensile.logic_writer import logic_file_name  # noqa: E402
from oto.tensile.native_library import build_master_library  # noqa: E402
from oto.tensile.outputs import generation_errors, match_solutions, read_solutions  # noqa: E402
from workflow_helpers import make_workdir  # noqa: E402  (the tests' scratch-copy helper)

TARGET = "results/{arch}/TensileLibrary.dat"
STAND_IN = REPO / "tests" / "stand_in_client.py"
LABELS = ("native", "spoof")  # the labels whose logic goes through TensileCreateLibrary (oto.tensile.labels)
_FORKED = re.compile(r"# Actual Solutions: (\d+) / (\d+) after SolutionStructs")
_GENERATED = re.compile(r"# Actual Solutions: (\d+) / (\d+) after KernelWriter")


def simulate(work: Path, families: list[str] | str, arch: str | None = None) -> Path:
    """A one-generation simulated run over ``families`` in a scratch copy of the repository (resumed when
    ``work`` already holds one), for ``arch`` (default: config/config.yaml's). Its GPU lock is private: other
    oto runs on the machine do not queue it."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config.update(families=families, max_generations=1, backend="sim")
    if arch:
        config["arch"] = arch
    config.setdefault("package", {})["create_library"] = "never"
    # The files are what is checked, not the timings: a light measurement protocol (no racing, two launches
    # per kernel and size) keeps the run over the whole deck to minutes.
    config.setdefault("benchmark", {}).update(repetitions=2, bootstrap=50, racing={"enabled": False})
    work.mkdir(parents=True, exist_ok=True)
    root = work / "oto" if (work / "oto").exists() else make_workdir(work, config)
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--cores",
        "2",
        "--rerun-incomplete",
        TARGET.format(arch=config["arch"]),
    ]
    (work / "tmp").mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(work / "tmp")}
    t0 = time.monotonic()
    with open(work / "snakemake.log", "a") as log:
        rc = subprocess.run(cmd, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    if rc:
        sys.exit(f"simulated run failed (rc {rc}); log {work / 'snakemake.log'}")
    print(f"# simulated run: {time.monotonic() - t0:.0f} s in {root}", flush=True)
    return root


# ---- 1. emitted configs through the Tensile benchmark program ---------------------------------------------


def run_killable(cmd: list[str], log: Path, timeout_s: float, cwd: Path | None = None) -> int | None:
    """``cmd`` with its output in ``log``; killed with its whole process group (Tensile, its joblib workers,
    the client) after ``timeout_s``: then None, and the log says so."""
    with open(log, "w") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            fh.write(f"\n# conformance: killed after {timeout_s:.0f} s\n")
            return None


def tensile_run(
    python: str, profile: dict, cfg: Path, out: Path, asm_cache: Path, timeout_s: float = 3600
) -> dict[str, Any]:
    """Run one emitted config as written; count what Tensile did with each kernel. A finished run of the
    same config in ``out`` is read back instead of run again (``--configs-only`` first, the rest later).
    A run that fails to start or to be read is a result too (``error``), never the end of the bench."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:  # another invocation on the same folder waits, then reads back
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _tensile_run(python, profile, cfg, out, asm_cache, timeout_s)
        except Exception as exc:  # noqa: BLE001 - recorded as a disagreement naming the config
            return {"rc": -1, "error": f"{type(exc).__name__}: {exc}", "log": out / "tensile.log"}


def _tensile_run(
    python: str, profile: dict, cfg: Path, out: Path, asm_cache: Path, timeout_s: float
) -> dict[str, Any]:
    digest = hashlib.sha256(cfg.read_bytes()).hexdigest()
    saved = out / "result.json"
    if saved.exists():
        res = json.loads(saved.read_text())
        if res.pop("config_sha256", None) == digest:
            return {**res, "log": Path(res["log"])}
    client = out / "client.sh"
    client.write_text(f'#!/bin/sh\nSTAND_IN_CLIENT_NO_FATES=1 exec {sys.executable} {STAND_IN} "$@"\n')
    client.chmod(0o755)
    compiler = list(config_defaults("tensile")["compiler_args"])
    cmd = [
        python, str(RUNTIME_SCRIPT), "tensile", *register_args(profile), "--arch", profile["arch"],
        *compiler, "--asm-cache", str(asm_cache), "--prebuilt-client", str(client),
        str(cfg), str(out / "out"),
    ]  # fmt: skip
    t0 = time.monotonic()
    rc = run_killable(cmd, out / "tensile.log", timeout_s, cwd=out)
    text = (out / "tensile.log").read_text(errors="replace")
    forked = _FORKED.search(text)
    generated = _GENERATED.search(text)
    step = next((out / "out" / "1_BenchmarkProblems").glob("*_00"), None)
    sols = (
        read_solutions(step / "Data" / "00_Final.yaml")
        if step and (step / "Data" / "00_Final.yaml").exists()
        else []
    )
    lib_dat = step / "00_Final" / "source" / "library" / "TensileLibrary.dat" if step else None
    assembled = 0
    if lib_dat is not None and lib_dat.exists():
        built = msgpack.unpackb(lib_dat.read_bytes(), strict_map_key=False)
        co = list(lib_dat.parent.glob("*.co")) + list(lib_dat.parent.glob("*.hsaco"))
        assembled = len(built["solutions"]) if co else 0
    res = {
        "rc": rc,
        "timeout_s": timeout_s if rc is None else None,
        "seconds": time.monotonic() - t0,
        "forked": int(forked.group(1)) if forked else 0,
        "rejected": text.count("rejecting solution"),
        "generated": int(generated.group(1)) if generated else 0,
        "writer_errors": generation_errors(text),
        "assembled": assembled,
        "solutions": sols,
        "logic": sorted(p.name for p in (out / "out" / "3_LibraryLogic").glob("*.yaml")),
        "log": str(out / "tensile.log"),
    }
    if rc is not None:  # a killed run is tried again by the next bench over the same folder
        saved.write_text(json.dumps({**res, "config_sha256": digest}, default=str))
    return {**res, "log": Path(res["log"])}


def check_config(library: str, lib_dir: Path, res: dict[str, Any]) -> tuple[dict, list[str]]:
    cfg = yaml.safe_load((lib_dir / "gen0" / "tensile_config.yaml").read_text())
    problems = cfg["BenchmarkProblems"]
    sent = problems[0][1]["ForkParameters"][0]["Groups"][0] if problems else []
    cands = yaml.safe_load((lib_dir / "gen0" / "candidates.yaml").read_text())
    ids = [k["id"] for k in cands.get("kernels", [])]
    by_params = {json.dumps(k["params"], sort_keys=True, default=str): k["id"] for k in cands["kernels"]}
    kernels = {
        by_params.get(json.dumps(p, sort_keys=True, default=str), f"#{i}"): p for i, p in enumerate(sent)
    }
    if "error" in res:
        why = f"{library}: the Tensile run failed: {res['error']} (log {res['log']})"
        return {"kernels": len(sent)}, [why]
    log_text = Path(res["log"]).read_text(errors="replace") if Path(res["log"]).exists() else ""
    if "Using cached solution data" in log_text:
        # an earlier run of this very config in the same folder forked and generated them: Tensile's cache
        # holds exactly the solutions it kept, and its log no longer counts them
        res = {**res, "forked": len(res["solutions"]), "generated": len(res["solutions"])}
    row = {
        "kernels": len(sent),
        "forked": res["forked"],
        "rejected": res["rejected"],
        "generated": res["generated"],
        "assembled": res["assembled"],
    }
    issues = []
    if not sent:
        return row, issues
    if res["rc"] is None:
        issues.append(f"{library}: Tensile killed after {res['timeout_s']:.0f} s (log {res['log']})")
    elif res["rc"] != 0:
        issues.append(f"{library}: Tensile exited {res['rc']} (log {res['log']})")
    matched = match_solutions(res["solutions"], kernels)
    for kid in kernels:
        if kid not in matched:
            issues.append(f"{library}: kernel {kid} sent, not in Tensile's solutions (log {res['log']})")
    for what in ("forked", "generated", "assembled"):
        if res[what] != len(sent):
            issues.append(f"{library}: {what} {res[what]} of {len(sent)} kernels")
    if res["writer_errors"]:
        issues.append(f"{library}: kernel writer errors {res['writer_errors']}")
    if not res["logic"]:
        issues.append(f"{library}: Tensile's LibraryLogic step wrote no logic file")
    if len(set(ids)) != len(ids):
        issues.append(f"{library}: candidates.yaml lists an id twice")
    return row, issues


# ---- 2. logic files through TensileCreateLibrary, both labels ---------------------------------------------


def diff(ours: Any, theirs: Any, path: str = "", out: list | None = None, limit: int = 40) -> list[str]:
    """Every field where two library states differ (at most ``limit``)."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in list(dict.fromkeys([*ours, *theirs])):
            if key not in ours or key not in theirs:
                out.append(f"{path}/{key}: only in {'oto' if key in ours else 'TensileCreateLibrary'}")
            else:
                diff(ours[key], theirs[key], f"{path}/{key}", out, limit)
        if list(ours) != list(theirs) and set(ours) == set(theirs):
            out.append(f"{path}: key order differs")
    elif isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            out.append(f"{path}: {len(ours)} entries (oto) vs {len(theirs)} (TensileCreateLibrary)")
        for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
            diff(a, b, f"{path}[{i}]", out, limit)
    elif ours != theirs or type(ours) is not type(theirs):
        out.append(f"{path}: oto {ours!r:.80} vs TensileCreateLibrary {theirs!r:.80}")
    return out


def write_logic(
    root: Path, arch: str, profile: dict, label: str, dest: Path, libraries: list[str]
) -> list[Path]:
    schedule, _, _ = logic_label(profile, label)
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in libraries:
        final = root / "results" / arch / name / "final.yaml"
        if final.exists():
            out = dest / logic_file_name(schedule, name)
            logic_stage.run(final, root / "results" / arch / name / "deck.yaml", profile, label, out)
            paths.append(out)
    return paths


MERGED_MARK = ".oto-merged-build"  # in a scratch folder tcl_merged made: a rerun may clear it


def merged_scratch(work: Path) -> None:
    """``work`` as an empty scratch folder of tcl_merged's. One an earlier run made (``--work`` kept) is
    cleared, so its logic copies and TensileLibrary.dat are never read as this run's; a folder it did not
    make is used only when empty, else refused and left as it is."""
    if work.is_dir() and not work.is_symlink() and (work / MERGED_MARK).is_file():
        shutil.rmtree(work)
    elif work.exists() and (not work.is_dir() or any(work.iterdir())):
        raise RuntimeError(
            f"{work}: exists and is not a merged build's scratch folder; remove it or pick --work"
        )
    work.mkdir(parents=True, exist_ok=True)
    (work / MERGED_MARK).touch()


def tcl_merged(
    python: str,
    arch: str,
    paths: list[Path],
    work: Path,
    profile: dict,
    timeout_s: float = 6 * 3600,
    jobs: int = 2,
) -> Path:
    """TensileCreateLibrary's merged TensileLibrary.dat (the package stage's layout), sources only, built in
    ``work`` (:func:`merged_scratch`)."""
    merged_scratch(work)
    logic_dir, out = work / "logic", work / "out"
    logic_dir.mkdir()
    for p in paths:
        shutil.copy(p, logic_dir / p.name)
    cmd = tcl_command(arch, logic_dir, out, {"python": python}, jobs, register_args(profile))
    i = cmd.index("--separate-architectures")
    cmd = [*cmd[:i], "--generate-sources-and-exit", *[c for c in cmd[i:] if c != "--lazy-library-loading"
                                                      and c != "--separate-architectures"]]  # fmt: skip
    # its scratch (build_tmp/, a.out) goes to the work folder, not the working directory
    rc = run_killable(cmd, work / "tcl-merged.log", timeout_s, cwd=work)
    dat = out / "library" / "TensileLibrary.dat"
    if rc != 0 or not dat.exists():
        raise RuntimeError(f"merged TensileCreateLibrary failed (rc {rc}); log {work / 'tcl-merged.log'}")
    return dat


def check_label(
    python: str,
    root: Path,
    arch: str,
    profile: dict,
    label: str,
    work: Path,
    libraries,
    merged_too: bool = True,
    tcl_timeout_s: float = 6 * 3600,
    lazy_too: bool = True,
    jobs: int = 2,
) -> tuple:
    """(solutions per family, [(families, issue)], seconds) for one label's logic files."""
    t0 = time.monotonic()
    _, label_arch, _ = logic_label(profile, label)
    paths = write_logic(root, arch, profile, label, work / label / "logic", libraries)
    per_family: collections.Counter = collections.Counter()
    families_of: dict[str, set[str]] = collections.defaultdict(set)  # library file stem -> families
    found: list[str] = []
    for p in paths:
        doc = yaml.load(p.read_text(), Loader=yaml.CSafeLoader)
        fam = Library.parse(p.stem.split("_", 1)[1]).family.code
        per_family[fam] += len(doc[5])
        for stem in build_master_library([p], arch=label_arch, lazy=True)[1]:
            families_of[stem].add(fam)
    issues = _check_label_files(
        python, paths, label, label_arch, work, profile, found, merged_too, tcl_timeout_s, lazy_too, jobs
    )
    return per_family, [(sorted(_families(m, families_of)), m) for m in issues], time.monotonic() - t0


def check_labels(
    python: str, root: Path, arch: str, profile: dict, work: Path, libraries, jobs: int = 2, **builds
) -> dict[str, tuple]:
    """:func:`check_label` for every label of :data:`LABELS`: the native one and the spoof one (the profile's
    ``stock_library``, so gfx1030 for gfx1035 and gfx1100 for gfx1103 as gfx900 for gfx90c). With ``jobs``
    1 the labels' builds run one after the other, else side by side, each TensileCreateLibrary with
    ``--jobs`` ``jobs``; ``builds``: check_label's merged_too, tcl_timeout_s and lazy_too."""
    jobs = max(1, jobs)
    with ThreadPoolExecutor(min(2, jobs)) as pool:
        checked = pool.map(
            lambda lb: check_label(python, root, arch, profile, lb, work, libraries, jobs=jobs, **builds),
            LABELS,
        )
        return dict(zip(LABELS, checked, strict=True))


def _families(msg: str, families_of: dict[str, set[str]]) -> set[str]:
    hit = [fams for stem, fams in families_of.items() if stem in msg]
    return set().union(*hit) if hit else {"(all)"}


def _check_label_files(
    python, paths, label, label_arch, work, profile, issues, merged_too, tcl_timeout_s, lazy_too=True, jobs=2
) -> list[str]:
    if lazy_too:
        issues = _check_lazy(python, paths, label, label_arch, work, profile, issues, tcl_timeout_s, jobs)
    if not merged_too:
        return issues
    try:
        merged = tcl_merged(python, label_arch, paths, work / label / "merged", profile, tcl_timeout_s, jobs)
        real = msgpack.unpackb(merged.read_bytes(), strict_map_key=False)
        ours_merged = json.loads(json.dumps(build_master_library(paths, arch=label_arch)))
        issues += [f"{label}: TensileLibrary.dat (merged){d}" for d in diff(ours_merged, real)]
    except RuntimeError as exc:
        issues.append(f"{label}: {exc}")
    return issues


def _check_lazy(python, paths, label, label_arch, work, profile, issues, tcl_timeout_s, jobs=2) -> list[str]:
    """The lazy build rocBLAS loads (parent + one child per problem type, code objects assembled)."""
    lib_dir = work / label / "library"
    prefix = logic_label(profile, label).prefix
    try:
        manifest = build_library(
            paths,
            label_arch,
            lib_dir,
            {"python": python},
            jobs=jobs,
            timeout_s=tcl_timeout_s,
            prefix=prefix,
            register=register_args(profile),
        )
    except Exception as exc:  # noqa: BLE001 - reported as a disagreement with the log it names
        return [*issues, f"{label}: TensileCreateLibrary failed: {exc}"]
    parent, children = build_master_library(paths, arch=label_arch, lazy=True)
    ours = {f"TensileLibrary_lazy_{label_arch}": parent, **children}
    theirs = {Path(f).stem for f in manifest["files"] if f.endswith(".dat")}
    for stem in sorted(set(ours) | theirs):
        if stem not in ours or stem not in theirs:
            issues.append(f"{label}: {stem}.dat only in {'oto' if stem in ours else 'TensileCreateLibrary'}")
            continue
        real = msgpack.unpackb((lib_dir / f"{stem}.dat").read_bytes(), strict_map_key=False)
        issues += [f"{label}: {stem}.dat{d}" for d in diff(json.loads(json.dumps(ours[stem])), real)]
    codes = [f for f in manifest["files"] if f.endswith((".co", ".hsaco"))]
    if not codes:
        issues.append(f"{label}: TensileCreateLibrary built no code object")
    return issues


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, help="an earlier run's repository copy (holds results/<arch>)")
    ap.add_argument("--families", nargs="*", default=None, help="family codes (default: the whole deck)")
    ap.add_argument("--arch", default=None, help="the GPU simulated (default: config/config.yaml's, gfx90c)")
    ap.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="Tensile benchmark runs at a time; also TensileCreateLibrary's --jobs, and with 1 the two "
        "labels' builds one after the other",
    )
    ap.add_argument(
        "--timeout", type=float, default=3600, help="seconds per Tensile benchmark run before it is killed"
    )
    ap.add_argument(
        "--tcl-timeout", type=float, default=6 * 3600, help="seconds per TensileCreateLibrary run"
    )
    ap.add_argument("--work", type=Path, help="scratch folder to keep (default: a temporary one)")
    ap.add_argument("--libraries", nargs="*", default=None, help="library names (default: every one)")
    ap.add_argument(
        "--no-merged",
        action="store_true",
        help="skip the merged TensileCreateLibrary build (the lazy one compares every solution already)",
    )
    ap.add_argument(
        "--no-lazy",
        action="store_true",
        help="skip the lazy TensileCreateLibrary build (for a merged build of logic already checked lazily)",
    )
    ap.add_argument(
        "--logic-only",
        action="store_true",
        help="check the logic files of the libraries finalized so far (of --run), not the emitted configs",
    )
    ap.add_argument(
        "--configs-only",
        action="store_true",
        help="check the emitted configs of the libraries emitted so far (of --run), not the logic files",
    )
    args = ap.parse_args()
    python = os.environ.get("OTO_TENSILE_PYTHON") or tensile_python_from_path()
    if not python:
        print("Tensile not installed ($OTO_TENSILE_PYTHON or `Tensile` on PATH): nothing to check")
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="oto-conformance-"))
    work.mkdir(parents=True, exist_ok=True)
    root = args.run or simulate(work / "sim", args.families or "all", args.arch)
    config = yaml.safe_load((root / "config" / "config.yaml").read_text())
    arch = config["arch"]
    profile = yaml.safe_load((root / "arch_profiles" / f"{arch}.yaml").read_text())
    results = root / "results" / arch
    libraries = sorted(p.parent.name for p in results.glob("*/deck.yaml"))
    if args.configs_only:
        libraries = [n for n in libraries if (results / n / "gen0" / "tensile_config.yaml").exists()]
        # one library of every family first, then the second of every family, ...
        rank: collections.Counter = collections.Counter()
        order = {}
        for n in libraries:
            fam = Library.parse(n).family.code
            order[n] = (rank[fam], fam)
            rank[fam] += 1
        libraries.sort(key=order.__getitem__)
    if args.logic_only:
        libraries = [n for n in libraries if (results / n / "final.yaml").exists()]
    if args.families:
        libraries = [n for n in libraries if Library.parse(n).family.code in args.families]
    if args.libraries:
        libraries = [n for n in libraries if n in args.libraries]
    asm_cache = Path(os.environ.get("OTO_TENSILE_ASM_CACHE") or work / "asmcache.yaml")
    if not asm_cache.exists():  # one probe, before the parallel runs
        first = libraries[0]
        tensile_run(
            python,
            profile,
            results / first / "gen0" / "tensile_config.yaml",
            work / "tensile" / first,
            asm_cache,
            args.timeout,
        )

    label_issues: dict[str, list[str]] = collections.defaultdict(list)
    label_counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    label_seconds = {}
    checked = (
        {}
        if args.configs_only
        else check_labels(
            python,
            root,
            arch,
            profile,
            work / "tcl",
            libraries,
            args.jobs,
            merged_too=not args.no_merged,
            tcl_timeout_s=args.tcl_timeout,
            lazy_too=not args.no_lazy,
        )
    )
    for label, (per_family, found, seconds) in checked.items():
        label_seconds[label] = seconds
        for fam, n in per_family.items():
            label_counts[fam][f"logic {label}"] += n
        for fams, msg in found:
            for fam in fams:
                label_issues[fam].append(msg)

    t0 = time.monotonic()
    configs = [] if args.logic_only else libraries
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        runs = dict(
            zip(
                configs,
                pool.map(
                    lambda n: tensile_run(
                        python,
                        profile,
                        results / n / "gen0" / "tensile_config.yaml",
                        work / "tensile" / n,
                        asm_cache,
                        args.timeout,
                    ),
                    configs,
                ),
                strict=True,
            )
        )
    bench_seconds = time.monotonic() - t0
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    issues: dict[str, list[str]] = collections.defaultdict(list)
    for name in configs:
        fam = Library.parse(name).family.code
        row, found = check_config(name, results / name, runs[name])
        table[fam].update(row, libraries=1)
        issues[fam] += found
    for fam, counts in label_counts.items():
        table[fam].update(counts)
    for fam, msgs in label_issues.items():
        issues[fam] += msgs
    tensile = subprocess.run(
        [python, "-c", "import Tensile; print(Tensile.__version__)"], capture_output=True, text=True
    )
    print(f"# Tensile {tensile.stdout.strip()} ({python}); run {root}; scratch {work}")
    print(
        f"# benchmark program: {len(configs)} configs in {bench_seconds:.0f} s ({args.jobs} at a time); "
        + ", ".join(f"TensileCreateLibrary {k}: {v:.0f} s" for k, v in label_seconds.items())
    )
    cols = [
        "libraries",
        "kernels",
        "forked",
        "rejected",
        "generated",
        "assembled",
        "logic native",
        "logic spoof",
    ]
    print(f"{'family':10s} " + " ".join(f"{c:>12s}" for c in cols) + f" {'disagreements':>13s}")
    total = collections.Counter()
    for fam in sorted(table):
        total.update(table[fam])
        print(f"{fam:10s} " + " ".join(f"{table[fam][c]:12d}" for c in cols) + f" {len(issues[fam]):13d}")
    n_issues = sum(len(v) for v in issues.values())
    print(f"{'all':10s} " + " ".join(f"{total[c]:12d}" for c in cols) + f" {n_issues:13d}")
    for fam, msgs in sorted(issues.items()):
        for m in msgs:
            print(f"DISAGREEMENT {fam}: {m}")
    return 0 if n_issues == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

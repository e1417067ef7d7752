"""The upstream kit through TensileCreateLibrary as rocBLAS's build runs it (issue 28).

Takes a run's results (``--run``: a repository copy holding ``results/<arch>``, e.g. the one
``bench/tensile_conformance.py`` leaves in its scratch folder), writes ``oto upstream``'s kit from it (marked
``--allow-simulated`` when its winners are simulated: the files are checked, not the numbers), and runs
TensileCreateLibrary over the kit's ``library/src/blas3/Tensile/Logic/asm_full`` folder with rocBLAS's build
options (merged files, separate architectures, lazy loading, msgpack, long names, ``--architecture=<arch>``):

1. with the installed Tensile ($OTO_TENSILE_PYTHON), gfx90c registered at run time by oto's runtime script;
2. with ``--patched-python``: a Tensile with the kit's ``patches/ROCm-Tensile.patch`` applied, run as plain
   ``TensileCreateLibrary`` (no registration): the patch alone must make it take the kit.

Each built ``.dat`` is compared field by field with oto's own writer for the kit's logic files (for the
plain build with solutions named: it numbers them in the file system's order of the logic files, which oto's
runtime script sorts). Prints one row per build: logic files, solutions, rc, seconds, files built, .dat files
compared, disagreements.

    python bench/upstream_kit.py --run /tmp/oto-conformance-x/sim/oto [--families DB SB] [--patched-python P]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgpack
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from oto.gemm import Library  # noqa: E402
from oto.rocblas.upstream import ROCBLAS_LOGIC, check_with_tensile, write_kit  # noqa: E402
from oto.tensile.native_library import build_master_library  # noqa: E402
from tensile_conformance import diff  # noqa: E402


def named(doc):
    """A library with every solution index replaced by the solution's name, every mapping's keys and every
    Matching table's rows sorted: plain TensileCreateLibrary takes the logic files in the file system's
    order (oto's runtime script sorts them), which numbers the solutions and orders rows of the same size
    from several files, so two builds of the same files compare by name and size."""
    names = {int(s["index"]): s["name"] for s in doc.get("solutions", [])}

    def walk(x, parent_key=""):
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if k == "index" and parent_key in ("table", "library", "solutions") and isinstance(v, int):
                    out[k] = names.get(v, v)
                else:
                    out[k] = walk(v, k)
            return out
        if isinstance(x, list):
            items = [walk(v, parent_key) for v in x]
            if parent_key == "table":  # rows of one key from several files: their order is the files' order
                items.sort(key=lambda r: json.dumps([r.get("key"), r.get("index"), r.get("speed")]))
            return items
        return x

    doc = walk(doc)
    doc["solutions"] = sorted(doc.get("solutions", []), key=lambda s: str(s["index"]))
    return json.loads(json.dumps(doc, sort_keys=True))


def compare_dats(logic: list[Path], arch: str, built: Path, by_name: bool = False) -> tuple[int, list[str]]:
    parent, children = build_master_library(logic, arch=arch, lazy=True)
    ours = {f"TensileLibrary_lazy_{arch}": parent, **children}
    issues = []
    for stem, state in ours.items():
        path = built / "library" / f"{stem}.dat"
        if not path.exists():
            issues.append(f"{stem}.dat: only in oto")
            continue
        real = msgpack.unpackb(path.read_bytes(), strict_map_key=False)
        mine = json.loads(json.dumps(state))
        if by_name:
            mine, real = named(mine), named(real)
        issues += [f"{stem}.dat{d}" for d in diff(mine, real)]
    return len(ours), issues


def plain_tcl(python: str, kit: Path, arch: str, out: Path, jobs: int) -> dict:
    """TensileCreateLibrary of a patched Tensile, no oto registration, rocBLAS's options."""
    cmd = [
        python, "-c", "from Tensile.TensileCreateLibrary import TensileCreateLibrary as m; m()",
        "--merge-files", "--separate-architectures", "--lazy-library-loading", "--no-short-file-names",
        "--library-format=msgpack", "--cxx-compiler=hipcc", "--code-object-version=V4", "--no-enumerate",
        f"--architecture={arch}", f"--jobs={jobs}", str(kit / ROCBLAS_LOGIC), str(out), "HIP",
    ]  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    log = out / "tensile_create_library.log"
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT).returncode
    files = sorted(p.name for p in (out / "library").glob("*") if p.suffix in (".dat", ".co", ".hsaco"))
    return {"rc": rc, "files": files, "log": str(log)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="a run's repository copy (holds results/<arch>)")
    ap.add_argument("--families", nargs="*", help="family codes (default: every library of the run)")
    ap.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--patched-python", help="a Python whose Tensile has the kit's Tensile patch applied")
    args = ap.parse_args()
    config = yaml.safe_load((args.run / "config" / "config.yaml").read_text())
    arch = config["arch"]
    profile = yaml.safe_load((args.run / "arch_profiles" / f"{arch}.yaml").read_text())
    work = args.work or Path(tempfile.mkdtemp(prefix="oto-upstream-"))
    results = args.run / "results" / arch
    if args.families:  # a results folder view holding only those families' libraries
        view = work / "results" / arch
        view.mkdir(parents=True, exist_ok=True)
        for lib in results.glob("*/final.yaml"):
            if Library.parse(lib.parent.name).family.code in args.families:
                (view / lib.parent.name).mkdir(exist_ok=True)
                for name in ("final.yaml", "deck.yaml"):
                    (view / lib.parent.name / name).write_bytes((lib.parent / name).read_bytes())
        results = view
    kit_dir = work / "kit"
    kit = write_kit(results, profile, kit_dir, allow_simulated=True)
    logic = sorted((kit_dir / ROCBLAS_LOGIC / profile["tensile"]["logic_prefix"]).glob("*.yaml"))
    solutions = sum(x["solutions"] for x in kit["logic"])
    print(
        f"# kit {kit_dir}: {len(logic)} logic files, {solutions} solutions; evidence: {kit['not_measured']}"
    )
    rows = []
    python = os.environ.get("OTO_TENSILE_PYTHON")
    builds = [("installed Tensile + oto registration", python)] if python else []
    if args.patched_python:
        builds.append(("patched Tensile, plain TensileCreateLibrary", args.patched_python))
    for what, py in builds:
        out = work / ("tcl-registered" if "registration" in what else "tcl-patched")
        t0 = time.monotonic()
        if "registration" in what:
            res = check_with_tensile(kit_dir, profile, {"python": py}, out, jobs=args.jobs)
        else:
            res = plain_tcl(py, kit_dir, arch, out, args.jobs)
        seconds = time.monotonic() - t0
        by_name = "registration" not in what
        compared, issues = compare_dats(logic, arch, out, by_name) if res["rc"] == 0 else (0, ["TCL failed"])
        rows.append((what, res["rc"], seconds, len(res["files"]), compared, issues, res["log"]))
    print("| build | logic files | solutions | rc | seconds | files built | .dat compared | disagreements |")
    print("|---|---|---|---|---|---|---|---|")
    for what, rc, seconds, files, compared, issues, _ in rows:
        cells = [what, len(logic), solutions, rc, f"{seconds:.0f}", files, compared, len(issues)]
        print("| " + " | ".join(map(str, cells)) + " |")
    for what, *_, issues, log in rows:
        for i in issues[:20]:
            print(f"DISAGREEMENT {what}: {i} (log {log})")
    return 0 if rows and all(r[1] == 0 and not r[5] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""A stand-in for ``oto/tensile/runtime.py`` + Tensile, for testing the tensile backend without Tensile.

It reads the benchmark config the backend wrote and behaves like Tensile 4.44 on the outside: console log
(``reject:`` / ``rejecting solution`` / ``overflowed resources`` lines, names wrapped at 80 columns),
``1_BenchmarkProblems/<PT>_00/Data/00_Final.yaml`` (solutions) and ``00_Final.csv`` (results, ``", "``
separated, CSVExportWinner layout). Each candidate's fate is chosen by its WorkGroupMapping:

    1 rejected by Tensile     2 register overflow     4 assembly fails (Tensile exits 1)
    16 validation fails (-1)  32 client crashes on it (truncated CSV, rc 139)
    64 client hangs on it     anything else: ok, GFlops from the tile shape

and, like Tensile 4.44 (see :func:`tensile_checks`): StaggerU 2 makes the kernel writer fail with
``Generating kernel source resulted in error 3`` (no kernel name, as 4.44 prints it for VALU kernels; with no
kernel left, Tensile stops with "No valid solutions found"); kernels that resolve to the same solution (LdsPad
-1 is 0 for Source kernels) are forked once; a problem type with initial strides must be a TensorContraction
with its index keys (else exit 255), and GlobalSplitU > 1 with UseInitialStridesCD asserts (exit 1).
"""

import json
import os
import sys
import time
from pathlib import Path

import yaml
from oto.tensile.results_csv import LEADING, TRAILING, WINNER

FATE = {1: "reject", 2: "overflow", 4: "asm", 16: "invalid", 32: "crash", 64: "hang"}
WRITER_ERROR_STAGGER = 2  # StaggerU value whose kernel the kernel writer cannot generate (error 3)


def tensile_checks(pt_cfg, cands):
    """Tensile's problem-type checks and its fork-time dedupe: (exit code, message) or (0, unique cands)."""
    if pt_cfg.get("UseInitialStridesCD") or pt_cfg.get("UseInitialStridesAB"):
        needs = ("NumIndicesC", "IndexAssignmentsA", "IndexAssignmentsB")
        if pt_cfg.get("OperationType") != "TensorContraction" or any(k not in pt_cfg for k in needs):
            return 255, "ExactSize [64, 64, 1, 64] doesn't match indices of ProblemType"
        if pt_cfg.get("UseInitialStridesCD") and any(c.get("GlobalSplitU", 1) > 1 for c in cands):
            return 1, "Traceback (most recent call last):\n  KernelWriterBetaOnly.py\nAssertionError"
    unique, seen = [], set()
    for c in cands:
        resolved = dict(c)
        if resolved.get("KernelLanguage") == "Source":
            for key in ("LdsPadA", "LdsPadB"):
                resolved[key] = max(resolved.get(key, 0), 0)
        key = yaml.safe_dump(resolved, sort_keys=True)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return 0, unique


def name(pt, p):
    tt, wg = p["ThreadTile"], p["WorkGroup"]
    kl = "A" if p.get("KernelLanguage", "Assembly") == "Assembly" else "S"
    return (
        f"{pt}_MT{tt[0] * wg[0]}x{tt[1] * wg[1]}x{p['DepthU']}_SN_1LDSB0_"
        f"DU{p['DepthU']}_GSU{p['GlobalSplitU']}_"
        f"IU{p.get('InnerUnroll', 1)}_KL{kl}_PGR{p['PrefetchGlobalRead']}_PLR{p['PrefetchLocalRead']}_"
        f"TT{tt[0]}_{tt[1]}_VW{p['VectorWidth']}_WG{wg[0]}_{wg[1]}_{wg[2]}_WGM{p['WorkGroupMapping']}"
    )


def wrap(text):
    return "\n".join(text[i : i + 80] for i in range(0, len(text), 80))


def main(argv):
    if argv[0] == "probe":
        print(
            json.dumps(
                {
                    "version": "4.44.0",
                    "python": sys.executable,
                    "path": "fake",
                    "supported_isa": [],
                    "native": {"gfx90c": False},
                }
            )
        )
        return 0
    if argv[0] == "tcl":  # TensileCreateLibrary on a malformed logic file
        print("Traceback (most recent call last):\nKeyError: 'ProblemType'")
        return 1
    assert argv[0] == "tensile", argv
    args = argv[1:]
    cache = Path(args[args.index("--asm-cache") + 1])
    client = args[args.index("--prebuilt-client") + 1]
    cfg_path, out = Path(args[-2]), Path(args[-1])
    with open(cache.parent / "calls.txt", "a") as fh:
        fh.write(f"{'probe' if not cache.exists() else 'cached'} {cfg_path.parent.name}\n")
    if not cache.exists():
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("fake asm caps\n")
    cfg = yaml.safe_load(cfg_path.read_text())
    pt_cfg, group = cfg["BenchmarkProblems"][0]
    pt = "Cijk_Ailk_Bjlk_SB"
    cands = group["ForkParameters"][0]["Groups"][0]
    sizes = [e["Exact"] for e in group["BenchmarkFinalParameters"][0]["ProblemSizes"]]
    reps = cfg["GlobalParameters"]["NumBenchmarks"]
    rc, checked = tensile_checks(pt_cfg, cands)
    if rc:
        print(checked)
        return rc
    cands = checked
    print("# Enumerating Solutions")
    sols = []
    for p in cands:
        fate = FATE.get(p["WorkGroupMapping"])
        if fate == "reject":
            print("\nreject: fake rule says no to WGM1")
            print("rejecting solution \n" + wrap(name(pt, p)))
        else:
            sols.append(p)
    print(f"# Actual Solutions: {len(sols)} / {len(cands)} after SolutionStructs")
    if not sols:
        print("Your parameters resulted in 0 valid solutions.")
        return 1
    if any(FATE.get(p["WorkGroupMapping"]) == "asm" for p in sols):
        print("Traceback (most recent call last):\nsubprocess.CalledProcessError: clang exited 1")
        return 1
    kept = []
    for p in sols:
        if p.get("StaggerU") == WRITER_ERROR_STAGGER:
            print("> UserWarning: \nGenerating kernel source resulted in error 3")
            continue
        if FATE.get(p["WorkGroupMapping"]) == "overflow":
            print(
                wrap(
                    f"> UserWarning: {name(pt, p)} overflowed resources. errorCode=1, msg='too many vgprs', "
                    "vgprs=260, sgprs=60"
                )
            )
        else:
            kept.append(p)
    if not kept:
        print("Traceback (most recent call last):\nRuntimeError: No valid solutions found")
        return 1
    data = out / "1_BenchmarkProblems" / f"{pt}_00" / "Data"
    data.mkdir(parents=True, exist_ok=True)
    docs = [{"MinimumRequiredVersion": "4.44.0"}, {"ProblemSizes": [{"Exact": s} for s in sizes]}]
    docs += [{**p, "SolutionNameMin": name(pt, p), "LdsNumElements": 4096} for p in kept]
    (data / "00_Final.yaml").write_text(yaml.safe_dump(docs))
    if client.endswith("null-client.sh"):
        (data / "00_Final.csv").write_text("")
        return 0
    names = [name(pt, p) for p in kept]
    # The client's column layout, as oto.tensile.results_csv reads it (winner columns on).
    head = ["GFlops", "SizeI", "SizeJ", "SizeK", "SizeL", *LEADING, *WINNER, *TRAILING, *names]
    with open(data / "00_Final.csv", "w") as fh:
        fh.write(", ".join(head) + "\n")
        for _ in range(reps):
            for i, (m, n, b, k) in enumerate(sizes):
                vals = []
                for p in kept:
                    fate = FATE.get(p["WorkGroupMapping"])
                    if fate == "crash":
                        fh.write(f"{i}, {m}, {n}")  # cut mid-line, as a dying client leaves it
                        fh.flush()
                        return 139
                    if fate == "hang":
                        fh.flush()
                        time.sleep(3600)
                    tt, wg = p["ThreadTile"], p["WorkGroup"]
                    vals.append(-1.0 if fate == "invalid" else 10.0 * tt[0] * tt[1] + wg[0])
                flops = 2 * m * n * b * k
                best = max(range(len(vals)), key=lambda j: vals[j]) if vals else -1
                g = vals[best] if vals else -1
                row = [
                    i,
                    m,
                    n,
                    b,
                    k,
                    m,
                    m,
                    m,
                    n,
                    0,
                    f"{g:g}",
                    f"{flops / (g * 1e3):g}" if g > 0 else -1,
                    best,
                    names[best] if vals else "",
                    flops,
                    0,
                    0,
                    *(f"{v:g}" for v in vals),
                ]
                fh.write(", ".join(str(x) for x in row) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))

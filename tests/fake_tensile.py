"""A stand-in for ``oto/tensile/runtime.py`` + Tensile, for testing the tensile backend without Tensile.

It reads the benchmark config the backend wrote and behaves like Tensile 4.44 on the outside: console log
(``reject:`` / ``rejecting solution`` / ``overflowed resources`` lines, names wrapped at 80 columns),
``1_BenchmarkProblems/<PT>_00/Data/00_Final.yaml`` (solutions), and the client's files Tensile's
BenchmarkProblems step writes: ``00_Final/source/ClientParameters.ini`` (ClientWriter.writeClientConfigIni:
library, code objects, results file, one problem-size block per size with its strides, the global
parameters) and the benchmark library ``00_Final/source/library/TensileLibrary.dat`` (msgpack: solutions with
their index and name, a Problem map of Single solutions); then it runs the prebuilt client as Tensile's
run.sh does (``<client> --config-file ClientParameters.ini``). The timing client is tests/stand_in_client.py.
Each candidate's build fate is chosen by its WorkGroupMapping (the client's fates are in stand_in_client.py):

    1 rejected by Tensile     2 register overflow     4 assembly fails (Tensile exits 1)
    anything else: built

and, like Tensile 4.44 (see :func:`tensile_checks`): StaggerU 2 makes the kernel writer fail with
``Generating kernel source resulted in error 3`` (no kernel name, as 4.44 prints it for VALU kernels; with no
kernel left, Tensile stops with "No valid solutions found"); StaggerU 4 makes it refuse the kernel's VGPR
budget (``Generating asm kernel error: total vgpr: 259 not in [0, 256]. kernel=<name>``, the name as
Tensile's min naming gives it: without the ThreadTile the batch shares); kernels that resolve to the same
solution (LdsPad -1 is 0 for Source kernels) are forked once; a problem type with initial strides must be a
TensorContraction with its index keys (else exit 255), and GlobalSplitU > 1 with UseInitialStridesCD asserts
(exit 1).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import msgpack
import yaml

FATE = {1: "reject", 2: "overflow", 4: "asm"}
TYPES = {0: "Float", 1: "Double", 2: "ComplexFloat", 3: "ComplexDouble", 4: "Half"}  # Tensile's DataType
WRITER_ERROR_STAGGER = 2  # StaggerU value whose kernel the kernel writer cannot generate (error 3)
VGPR_ERROR_STAGGER = 4  # StaggerU value whose kernel exceeds the VGPR budget (KernelWriterAssembly)


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
        if key not in seen:  # the solution Tensile keeps is the resolved one (its solutions file says 0)
            seen.add(key)
            unique.append(resolved)
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
    ta, tb = pt_cfg.get("TransposeA", False), pt_cfg.get("TransposeB", False)
    pt = f"Cijk_{'Alik' if ta else 'Ailk'}_{'Bjlk' if tb else 'Bljk'}_SB"
    cands = group["ForkParameters"][0]["Groups"][0]
    sizes = [e["Exact"] for e in group["BenchmarkFinalParameters"][0]["ProblemSizes"]]
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
        if p.get("StaggerU") == VGPR_ERROR_STAGGER:
            tt, wg = p["ThreadTile"], p["WorkGroup"]
            short = f"{pt}_MT{tt[0] * wg[0]}x{tt[1] * wg[1]}x{p['DepthU']}_SN_K1_WG{wg[0]}_{wg[1]}_{wg[2]}"
            print(f"Generating asm kernel error: total vgpr: 259 not in [0, 256]. kernel={short}\n")
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
    step = out / "1_BenchmarkProblems" / f"{pt}_00"
    data = step / "Data"
    data.mkdir(parents=True, exist_ok=True)
    docs = [{"MinimumRequiredVersion": "4.44.0"}, {"ProblemSizes": [{"Exact": s} for s in sizes]}]
    docs += [{**p, "SolutionNameMin": name(pt, p), "LdsNumElements": 4096} for p in kept]
    (data / "00_Final.yaml").write_text(yaml.safe_dump(docs))
    source = step / "00_Final" / "source"
    (source / "library").mkdir(parents=True, exist_ok=True)
    code_objects = [
        source / "library" / "Kernels.so-000-gfx90c.hsaco",
        source / "library" / "TensileLibrary_gfx90c.co",
    ]
    for co in code_objects:
        co.write_text("fake code object\n")
    rows = [
        {"predicate": {"type": "And", "value": []}, "library": {"type": "Single", "index": i}}
        for i in range(len(kept))
    ]
    solutions = [{"index": i, "name": name(pt, p), "libraryLogicIndex": -1} for i, p in enumerate(kept)]
    lib = {"solutions": solutions, "library": {"type": "Problem", "rows": rows}}
    (source / "library" / "TensileLibrary.dat").write_bytes(msgpack.packb(lib))
    ini = source / "ClientParameters.ini"
    ini.write_text(
        client_ini(pt_cfg, sizes, cfg["GlobalParameters"], source, code_objects, data / "00_Final.csv")
    )
    # Tensile runs the client unless the results file is there (BenchmarkProblems: "Already benchmarked")
    if (data / "00_Final.csv").exists():
        print("# Already benchmarked; skipping.")
        return 0
    rc = subprocess.run([client, "--config-file", str(ini)]).returncode
    print(f"clientExit={rc}")
    return 0


def client_ini(pt_cfg, sizes, glob, source, code_objects, results):
    """ClientParameters.ini as ClientWriter.writeClientConfigIni writes it (default LDs: LDD = LDC = M, LDA
    the size of A's first index, LDB of B's)."""
    ta, tb = pt_cfg.get("TransposeA", False), pt_cfg.get("TransposeB", False)
    a, b = ("lik" if ta else "ilk"), ("jlk" if tb else "ljk")
    kind = TYPES.get(pt_cfg.get("DataType", 0), "Float")
    lines = [
        f"library-file={source / 'library' / 'TensileLibrary.dat'}",
        *(f"code-object={co}" for co in code_objects),
        f"results-file={results}",
        "performance-metric=DeviceEfficiency",
        f"problem-identifier=Contraction_l_A{a}_B{b}_Cijk_Dijk",
        f"a-type={kind}", f"b-type={kind}", f"c-type={kind}", f"d-type={kind}", f"alpha-type={kind}",
        f"beta-type={kind}",
        "strided-batched=True",
    ]  # fmt: skip
    dim = {"i": 0, "j": 1, "k": 2, "l": 3}
    for m, n, bt, k in sizes:
        s = (m, n, bt, k)
        lines += [
            f"problem-size={m},{n},{bt},{k}",
            f"a-strides=-1,{s[dim[a[0]]]},-1",
            f"b-strides=-1,{s[dim[b[0]]]},-1",
            f"c-strides=-1,{m},-1",
            f"d-strides=-1,{m},-1",
        ]
    lines += [
        "device-idx=0", "init-a=Random", "init-b=Random", "init-c=Random", "init-d=Zero",
        f"num-elements-to-validate={glob.get('NumElementsToValidate', 0)}",
        f"num-benchmarks={glob.get('NumBenchmarks', 1)}",
        f"num-warmups={glob.get('NumWarmups', 0)}",
        f"num-enqueues-per-sync={glob.get('EnqueuesPerSync', 1)}",
        f"num-syncs-per-benchmark={glob.get('SyncsPerBenchmark', 1)}",
        f"use-gpu-timer={glob.get('KernelTime', True)}",
        f"hardware-monitor={glob.get('HardwareMonitor', False)}",
        f"sleep-percent={glob.get('SleepPercent', 0)}",
        f"csv-export-extra-cols={glob.get('CSVExportWinner', False)}",
        f"csv-merge-same-problems={glob.get('CSVMergeSameProblemID', False)}",
        "log-level=Debug",
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))

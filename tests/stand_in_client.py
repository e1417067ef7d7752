"""A stand-in for Tensile's benchmark client (tensile_client) on a machine without a GPU; the tensile
backend's tests run it as ``tensile.prebuilt_client`` (tests/test_tensile_backend.py with
tests/fake_tensile.py, and tests/test_tensile_real.py with real Tensile).

It does to the files what the client of Tensile 4.44 does (Tensile/Source/client: main.cpp,
ResultFileReporter.cpp, CSVStackFile.cpp): reads ClientParameters.ini and the benchmark library it names
(msgpack .dat or .yaml), then times benchmark run after run (``num-benchmarks``), problem after problem (the
ini's ``problem-size=`` blocks, in order), and at each problem every solution in library index order. The
results file is created empty at start; the header row is written just before the first data row, and one
row per (run, problem) when the problem is done, ", " separated, doubles as C++ ``setprecision(6)`` prints
them: ``GFlops`` (the problem index), ``SizeI..SizeL``, ``LDD, LDC, LDA, LDB`` (strides[1]), ``WinnerFreq``
(0: no hardware monitor), with ``csv-export-extra-cols`` ``WinnerGFlops, WinnerTimeUS, WinnerIdx,
WinnerName``, then ``TotalFlops, WinnerPower, WinnerTemperature`` and one GFlops column per solution.

Made-up numbers: a solution with ThreadTile a x b and WorkGroup c x .. runs at 10·a·b + c GFlops (for Float;
/16 for Double and ComplexDouble, x2 for Half, as an APU's rates go). Those come from the solution's
``sizeMapping`` in the library (what real Tensile writes), else from its name (``_TT<a>_<b>_``, ``_WG<c>_``;
Tensile's min naming leaves out what a batch shares, so a name may carry neither: then the macro tile
``_MT<x>x<y>x`` stands for them). Its fate comes from its WorkGroupMapping (``sizeMapping``, else ``_WGM<n>``
in its name: 16 fails validation, -1; 32: the client crashes on it, rc 139, the row of that problem is never
written; 64: it hangs once, until killed or $STAND_IN_CLIENT_HANG_S seconds, default 3600; none with
$STAND_IN_CLIENT_NO_FATES) or from the regular expression in $STAND_IN_CLIENT_INVALID (-1).
With $STAND_IN_CLIENT_RESET (a regular expression) the client plays a GPU reset on the solutions it matches:
when it reaches one, it appends a line to $STAND_IN_CLIENT_RESET_COUNT (if set) and kills its whole process
group and its caller's (when the caller leads its own group: a job started in its own session), as a reset
that takes the desktop session down does.
$STAND_IN_CLIENT_LOG names a file that gets one line per timed cell (run, problem, solution name), the
order the client really ran them in. With $STAND_IN_CLIENT_GPU_METRICS the client plays an APU whose clock
drops 150 MHz per call from 1800 MHz: at start it writes that clock to the named file as a gpu_metrics v2.2
table (tests/gpu_metrics_blobs.py), waits 0.3 s for the sampler, and its GFlops scale with the clock; with
$STAND_IN_CLIENT_GPU_METRICS_VANISH the file is then removed, as if the driver went away mid-run.
"""

import os
import re
import signal
import sys
import time
from pathlib import Path

import msgpack
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_metrics_blobs import renoir  # noqa: E402

NOMINAL_MHZ = 1800


def g6(x: float) -> str:
    return f"{x:.6g}"


def main(argv):
    if "--best-solution" in argv:  # LibraryClient's second call
        return 0
    ini_path = argv[argv.index("--config-file") + 1]
    kv = [ln.split("=", 1) for ln in Path(ini_path).read_text().splitlines() if "=" in ln]
    get = {k: v for k, v in kv}
    sizes = [[int(x) for x in v.split(",")] for k, v in kv if k == "problem-size"]
    strides = {
        key: [[int(x) for x in v.split(",")] for k, v in kv if k == key]
        for key in ("a-strides", "b-strides", "c-strides", "d-strides")
    }
    lib_path = Path(get["library-file"])
    if lib_path.suffix == ".yaml":
        lib = yaml.safe_load(lib_path.read_text())
    else:
        lib = msgpack.unpackb(lib_path.read_bytes(), strict_map_key=False)
    solutions = sorted(lib["solutions"], key=lambda s: s["index"])
    names = [s["name"] for s in solutions]
    runs = int(get.get("num-benchmarks", 1))
    extra = get.get("csv-export-extra-cols", "False") == "True"
    ident = get.get("problem-identifier", "Contraction_l_Ailk_Bjlk_Cijk_Dijk")
    a_first, b_first = re.search(r"_A(\w)\w*_B(\w)", ident).groups()
    dim = {"i": 0, "j": 1, "k": 2, "l": 3}
    kind = get.get("a-type", "Float")
    rate = {"Double": 1 / 16, "ComplexDouble": 1 / 16, "Half": 2.0}.get(kind, 1.0)
    invalid = os.environ.get("STAND_IN_CLIENT_INVALID")
    reset = os.environ.get("STAND_IN_CLIENT_RESET")
    trace = os.environ.get("STAND_IN_CLIENT_LOG")
    clock = NOMINAL_MHZ
    metrics = os.environ.get("STAND_IN_CLIENT_GPU_METRICS")
    if metrics:
        counter = Path(metrics + ".calls")
        calls = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(calls + 1))
        clock = max(NOMINAL_MHZ - 150 * calls, 600)
        tmp = Path(metrics + ".tmp")
        tmp.write_bytes(renoir(clock_mhz=clock, temperature_c=60.0 + calls, power_w=12.0))
        tmp.replace(metrics)
        time.sleep(0.3)
        if os.environ.get("STAND_IN_CLIENT_GPU_METRICS_VANISH"):  # the driver's file goes away mid-run
            Path(metrics).unlink()
            time.sleep(0.2)

    def shape(sol):
        """(ThreadTile, WorkGroup0, WorkGroupMapping) of a solution: its sizeMapping, else its name."""
        name, sm = sol["name"], sol.get("sizeMapping") or {}
        if sm.get("threadTile") and sm.get("workGroup"):
            return sm["threadTile"][:2], int(sm["workGroup"][0]), int(sm.get("workGroupMapping", 0))
        tt, wg = re.search(r"_TT(\d+)_(\d+)_", name + "_"), re.search(r"_WG(\d+)_", name + "_")
        wgm = re.search(r"_WGM(\d+)(?=_|$)", name)
        mt = re.search(r"_MT(\d+)x(\d+)x", name)
        wg0 = int(wg.group(1)) if wg else 16
        if tt:
            tile = [int(tt.group(1)), int(tt.group(2))]
        elif mt:  # neither spelled out: the macro tile over a 16 x 16 workgroup stands for them
            tile = [max(1, int(mt.group(1)) // wg0), max(1, int(mt.group(2)) // 16)]
        else:
            tile = [4, 4]
        return tile, wg0, int(wgm.group(1)) if wgm else 0

    def gflops(sol):
        tile, wg0, wgm = shape(sol)
        fate = {16: "invalid", 32: "crash", 64: "hang"}.get(wgm)
        if os.environ.get("STAND_IN_CLIENT_NO_FATES"):  # a whole workflow: the strategies pick any WGM
            fate = None
        if fate is None and invalid and re.search(invalid, sol["name"]):
            fate = "invalid"
        value = (10.0 * int(tile[0]) * int(tile[1]) + wg0) * rate * clock / NOMINAL_MHZ
        return fate, value

    head = ["GFlops", "SizeI", "SizeJ", "SizeK", "SizeL", "LDD", "LDC", "LDA", "LDB", "WinnerFreq"]
    if extra:
        head += ["WinnerGFlops", "WinnerTimeUS", "WinnerIdx", "WinnerName"]
    head += ["TotalFlops", "WinnerPower", "WinnerTemperature", *names]
    with open(get["results-file"], "w") as fh:  # the client opens (creates) the file at start
        first = True
        for run in range(runs):
            for p, (m, n, b, k) in enumerate(sizes):
                size = (m, n, b, k)

                def ld(key, letter, p=p, size=size):
                    s = strides[key][p][1] if strides[key] else -1
                    return s if s != -1 else size[dim[letter]]

                flops = 2 * m * n * b * k  # ContractionProblem::flopCount: 2 x packing (1 but int8x4)
                vals = []
                for sol in solutions:
                    name = sol["name"]
                    if reset and re.search(reset, name):
                        gpu_reset(name)
                    fate, value = gflops(sol)
                    if fate == "crash":
                        return 139  # this problem's row is never written
                    if fate == "hang":  # a hung kernel never returns: the caller's timeout kills the client
                        time.sleep(float(os.environ.get("STAND_IN_CLIENT_HANG_S", 3600)))
                        return 124
                    vals.append(-1.0 if fate == "invalid" else value)
                    if trace:
                        with open(trace, "a") as t:
                            t.write(f"{run} {p} {name}\n")
                valid = [j for j, v in enumerate(vals) if v > 0]
                best = max(valid, key=lambda j: vals[j]) if valid else -1
                row = [p, m, n, b, k, ld("d-strides", "i"), ld("c-strides", "i"), ld("a-strides", a_first),
                       ld("b-strides", b_first), 0]  # fmt: skip
                if extra:
                    win = vals[best] if valid else -1.0
                    time_us = flops / (win * 1e3) if valid else -1.0
                    row += [g6(win), g6(time_us), best, names[best] if valid else ""]
                row += [flops, 0, 0, *(g6(v) for v in vals)]
                if first:
                    fh.write(", ".join(head) + "\n")
                    first = False
                fh.write(", ".join(str(x) for x in row) + "\n")
                fh.flush()
    return 0


def gpu_reset(name):
    """The GPU goes down on this kernel: the client and the job that called it die (SIGKILL)."""
    count = os.environ.get("STAND_IN_CLIENT_RESET_COUNT")
    if count:
        with open(count, "a") as fh:
            fh.write(name + "\n")
    caller = os.getppid()
    if os.getpgid(caller) == caller:  # never a group the caller merely belongs to (the test runner's)
        os.killpg(caller, signal.SIGKILL)
    os.killpg(os.getpgid(0), signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

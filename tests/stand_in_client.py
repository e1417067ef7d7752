"""A stand-in for tensile_client on a machine without a GPU (used by tests/test_tensile_real.py).

It does what the client does to the files: reads ClientParameters.ini (sizes, and the leading dimensions
from the strides) and the benchmark library it names, and writes the results CSV (CSVExportWinner layout,
", " separated) for every problem × solution, repeated num-benchmarks times. GFlops are made up from the
solution's macro tile (MT0·MT1/16), and -1 (validation failed) for solutions whose name has ThreadTile 8x8,
so a test can check which column went to which kernel.
"""

import re
import sys
from pathlib import Path

import msgpack


def main(argv):
    ini = argv[argv.index("--config-file") + 1]
    if "--best-solution" in argv:
        return 0
    lines = Path(ini).read_text().splitlines()
    kv = [ln.split("=", 1) for ln in lines if "=" in ln]
    get = {k: v for k, v in kv}
    sizes = [[int(x) for x in v.split(",")] for k, v in kv if k == "problem-size"]
    # leading dimensions: the second stride of each tensor, in the problems' order (d, c, a, b columns)
    lds = {t: [int(v.split(",")[1]) for k, v in kv if k == f"{t}-strides"] for t in "dcab"}
    lib = msgpack.unpackb(Path(get["library-file"]).read_bytes(), strict_map_key=False)
    names = [s["name"] for s in sorted(lib["solutions"], key=lambda s: s["index"])]
    reps = int(get.get("num-benchmarks", 1))

    def gflops(name):
        if "_TT8_8_" in name:
            return -1.0
        m = re.search(r"_MT(\d+)x(\d+)x", name)
        return int(m.group(1)) * int(m.group(2)) / 16.0

    head = [
        "GFlops",
        "SizeI",
        "SizeJ",
        "SizeK",
        "SizeL",
        "LDD",
        "LDC",
        "LDA",
        "LDB",
        "WinnerFreq",
        "WinnerGFlops",
        "WinnerTimeUS",
        "WinnerIdx",
        "WinnerName",
        "TotalFlops",
        "WinnerPower",
        "WinnerTemperature",
        *names,
    ]
    with open(get["results-file"], "w") as fh:
        fh.write(", ".join(head) + "\n")
        for _ in range(reps):
            for i, (m, n, b, k) in enumerate(sizes):
                vals = [gflops(x) for x in names]
                best = max(range(len(vals)), key=lambda j: vals[j])
                flops = 2 * m * n * b * k
                row = [
                    i,
                    m,
                    n,
                    b,
                    k,
                    *(lds[t][i] if i < len(lds[t]) else m for t in "dcab"),
                    0,
                    f"{vals[best]:g}",
                    f"{flops / (vals[best] * 1e3):g}",
                    best,
                    names[best],
                    flops,
                    0,
                    0,
                    *(f"{v:g}" for v in vals),
                ]
                fh.write(", ".join(str(x) for x in row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

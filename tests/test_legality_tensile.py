"""oto.tensile.legality against Tensile's own Solution() on the RDNA ISAs (gfx1035, gfx1103, gfx1150) and
gfx90c: every shipped navi21/navi31 (or vega10) solution and seeded mutations of them and random points of
the ISA's search space, with the knobs only some ISAs have (wave32, WMMA, dot-product layouts) mixed into
every ISA's candidates. Runs where Tensile is installed ($OTO_TENSILE_PYTHON or a ``Tensile`` script on PATH)
and skips otherwise; the figures are in bench/RESULTS.md ("Legality against Tensile's Solution()")."""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml
from oto.gemm import PATTERNS, Library
from oto.tensile import legality
from oto.tensile.install import tensile_python_from_path
from oto.tensile.params import CandidateError, canonical, space_params

pytestmark = pytest.mark.slow
ORACLE = Path(__file__).with_name("tensile_solution_oracle.py")
SHARED = Path(__file__).resolve().parents[2] / "shared" / "reference"

# Parameters beyond a space's knobs worth mutating: the ones the rules read, the ISA knobs included.
EXTRAS = {
    "DepthU": [-1, -2, -3, -4, 4, 8, 16, 32],
    "BufferLoad": [True, False],
    "AssertFree0ElementMultiple": [1, 2, 4, 8],
    "AssertFree1ElementMultiple": [1, 2, 4, 8],
    "NumLoadsCoalescedA": [-1, 1, 2, 3, 4],
    "NumLoadsCoalescedB": [-1, 1, 2, 3],
    "1LDSBuffer": [-1, 0, 1],
    "MaxOccupancy": [1, 4, 40],
    "LdsPadA": [-1, 0, 2, 8, 16],
    "LdsPadB": [-1, 0, 4, 8, 16],
    "LdsBlockSizePerPadA": [-1, 0, 128, 256],
    "LdsBlockSizePerPadB": [-1, 0, 128, 256],
    "MacroTileShapeMax": [2, 4, 64],
    "VectorWidth": [-1, 1, 2, 4, 8],
    "LocalReadVectorWidth": [-1, 1, 2, 4, 8, 16],
    "StoreVectorWidth": [-1, 1, 2, 4],
    "FractionalLoad": [0, 1],
    "UnrollMajorLDSA": [False, True],
    "UnrollMajorLDSB": [False, True],
    "GlobalSplitUAtomicAdd": [False, True],
    "GlobalSplitUAlgorithm": ["SingleBuffer", "MultipleBuffer"],
    "MatrixInstruction": [[], [16, 16, 16, 1]],
    "WavefrontSize": [32, 64],
    "SourceSwap": [0, 1],
    "LocalDotLayout": [1, 2, 4],
    "KernelLanguage": ["Assembly", "Source"],
}
FAMILIES = (
    "SB", "DB", "HB", "HHS_BH", "HSS_BH", "BBS_BH", "I8II_BH", "SB_GB", "HB_GB", "HHS_BH_GB", "CB_GB",
    "ZB_GB", "BBS_BH_GB", "I8II_BH_GB",
)  # fmt: skip
# Where oto's rules reject on purpose and Tensile's Solution() does not (test_tensile_real.OTO_ONLY): the
# kernel writer's failures that legality predicts.
OTO_ONLY = ("overflowedResources", "BetaOnly")
ISAS = {  # arch: (ISA, donor of Tensile's assembler caps, shipped logic of its family, mutation seed)
    "gfx90c": ((9, 0, 12), (9, 0, 0), "rocblas-vega10", 7),
    "gfx1035": ((10, 3, 5), (10, 3, 0), "rocblas-navi21", 8),
    "gfx1103": ((11, 0, 3), (11, 0, 2), "rocblas-navi31", 9),
    "gfx1150": ((11, 5, 0), (11, 5, 1), "rocblas-navi31", 10),
}


@pytest.fixture(scope="session")
def tensile_python() -> str:
    python = os.environ.get("OTO_TENSILE_PYTHON") or tensile_python_from_path()
    if not python:
        pytest.skip("Tensile not installed (set $OTO_TENSILE_PYTHON or put `Tensile` on PATH)")
    if subprocess.run([python, "-c", "import Tensile"], capture_output=True).returncode != 0:
        pytest.skip(f"{python} cannot import Tensile")
    return python


def tensile_problem_type(lib: Library) -> dict:
    f = lib.family
    return {
        "OperationType": "GEMM",
        "DataType": f.a.enum,
        "DestDataType": f.dest.enum,
        "ComputeDataType": f.compute.enum,
        "HighPrecisionAccumulate": f.hpa,
        "TransposeA": lib.transpose_a,
        "TransposeB": lib.transpose_b,
        "UseBeta": True,
        "Batched": True,
        "StridedBatched": f.strided_batched,
        "UseInitialStridesAB": f.initial_strides_ab,
        "UseInitialStridesCD": f.initial_strides_cd,
    }


def candidates(
    folder: Path, limits: legality.Limits, n_mutants: int, seed: int
) -> list[tuple[Library, dict]]:
    """Every shipped solution of ``folder`` (the parameters legality reads), then seeded mutations of them and
    random points of the ISA's space, each with up to three further parameters set."""
    shipped = []
    for path in sorted(folder.glob("*_Cijk_*.yaml")):
        doc = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
        lib = Library.parse(path.stem.split("_", 1)[1])
        shipped += [(lib, {k: v for k, v in s.items() if k in legality.TENSILE_DEFAULTS}) for s in doc[5]]
    space = space_params(limits.caps)
    rng = random.Random(seed)
    out = list(shipped)
    while len(out) < len(shipped) + n_mutants:
        if rng.random() < 0.3:
            lib = Library.build(rng.choice(FAMILIES), rng.choice(list(PATTERNS)))
            cand = {k: rng.choice(p.values) for k, p in space.items()}
        else:
            lib, base = rng.choice(shipped)
            cand = {k: base[k] for k in space if k in base}
            for k in rng.sample(list(space), rng.choice([0, 1, 2, 3])):
                cand[k] = rng.choice(space[k].values)
        try:
            c = canonical(cand)
        except CandidateError:
            continue
        for k in rng.sample(list(EXTRAS), rng.choice([0, 1, 2, 3])):
            c[k] = rng.choice(EXTRAS[k])
        out.append((lib, c))
    return out


@pytest.mark.parametrize("arch", list(ISAS))
def test_legality_agrees_with_tensile_solution(tensile_python, arch):
    isa, donor, logic, seed = ISAS[arch]
    if not (SHARED / logic).is_dir():
        pytest.skip(f"shared reference data not found at {SHARED / logic}")
    limits = legality.Limits(isa=isa, caps_from=donor)
    cands = candidates(SHARED / logic, limits, n_mutants=3000, seed=seed)
    assert len(cands) >= 2000
    payload = [
        {"problem_type": tensile_problem_type(lib), "params": p, "isa": list(isa), "caps_from": list(donor)}
        for lib, p in cands
    ]
    res = subprocess.run(
        [tensile_python, str(ORACLE)], input=json.dumps(payload), capture_output=True, text=True, timeout=7200
    )
    assert res.returncode == 0, res.stderr[-2000:]
    real = json.loads(
        res.stdout.strip().splitlines()[-1]
    )  # the JSON is the last line Tensile's Python prints
    assert len(real) == len(cands)
    classes: Counter = Counter()
    disagreements = []
    for (lib, params), (tensile_valid, rejects) in zip(cands, real, strict=True):
        ours = legality.check_raw(lib, params, limits)
        if isinstance(tensile_valid, str):  # Tensile raised instead of rejecting: must be invalid for us
            classes["tensile exception, oto rejects"] += 0 if ours.valid else 1
            if ours.valid:
                disagreements.append((lib.name, params, ours.reasons, tensile_valid))
            continue
        oto_valid = ours.valid or all(any(o in r for o in OTO_ONLY) for r in ours.reasons)
        if oto_valid != tensile_valid:
            disagreements.append((lib.name, params, ours.reasons, rejects))
        elif not ours.valid and oto_valid:
            classes["oto-only"] += 1
        elif not tensile_valid:
            if not (set(ours.reasons) & set(rejects)):  # same verdict, and a reason in Tensile's words
                disagreements.append((lib.name, params, ours.reasons, rejects))
            classes["both reject"] += 1
        else:
            classes["both accept"] += 1
    wmma = sum(1 for _, p in cands if p.get("MatrixInstruction"))
    print(
        f"\n{arch}: {len(cands)} candidates ({wmma} WMMA): {dict(classes)}; disagreements", len(disagreements)
    )
    assert not disagreements, disagreements[:5]
    assert classes["both accept"] > 500 and classes["both reject"] > 500

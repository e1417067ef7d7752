"""Checks against real Tensile. They run when Tensile is installed and skip otherwise (CI has none).

Tensile is found through $OTO_TENSILE_PYTHON (the Python whose ``import Tensile`` works) or a ``Tensile``
script on PATH; the toolchain (hipcc, clang, clang-offload-bundler) must be findable by Tensile (on Debian's
ROCm packages see docs/tensile.md). $OTO_TENSILE_ASM_CACHE may name an assembler cache to share between runs;
otherwise the first test pays Tensile's ~50 s probe once per session. Kernel generation takes minutes, so the
build and packaging tests are also marked ``slow``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import msgpack
import pytest
import yaml
from oto.backends.base import Kernel, Problem
from oto.backends.tensile import TensileBackend
from oto.gemm import PATTERNS, Library
from oto.tensile import legality
from oto.tensile.create_library import build_library
from oto.tensile.install import RUNTIME_SCRIPT, register_args, tensile_python_from_path
from oto.tensile.labels import logic_label
from oto.tensile.logic_writer import logic_file_name, problem_type, solution_entry, write_logic_file
from oto.tensile.native_library import build_master_library
from oto.tensile.outputs import match_solutions, read_solutions
from oto.tensile.params import PARAMS, CandidateError, candidate_id, canonical

ROOT = Path(__file__).resolve().parents[1]
ORACLE = Path(__file__).with_name("tensile_solution_oracle.py")


@pytest.fixture(scope="session")
def tensile_python() -> str:
    python = os.environ.get("OTO_TENSILE_PYTHON") or tensile_python_from_path()
    if not python:
        pytest.skip("Tensile not installed (set $OTO_TENSILE_PYTHON or put `Tensile` on PATH)")
    ok = subprocess.run([python, "-c", "import Tensile"], capture_output=True).returncode == 0
    if not ok:
        pytest.skip(f"{python} cannot import Tensile")
    return python


@pytest.fixture(scope="session")
def asm_cache(tmp_path_factory) -> str:
    return os.environ.get("OTO_TENSILE_ASM_CACHE") or str(tmp_path_factory.mktemp("asm") / "asmcache.yaml")


@pytest.fixture(scope="session")
def profile():
    return yaml.safe_load((ROOT / "arch_profiles" / "gfx90c.yaml").read_text())


# ---- legality cross-check: oto.tensile.legality vs Tensile's own Solution() ----

FAMILIES = ("SB", "DB", "HB", "HHS_BH", "HSS_BH", "SB_GB", "DB_GB", "HB_GB", "HHS_BH_GB", "CB_GB", "ZB_GB")
# Non-PARAMS parameters worth mutating: the ones the §6 rules read.
EXTRAS = {
    "DepthU": [-1, -2, -3, -4, 4, 8, 16, 32],
    "BufferLoad": [True, False],
    "AssertFree0ElementMultiple": [1, 2, 4, 8],
    "NumLoadsCoalescedA": [-1, 1, 2, 3, 4],
    "NumLoadsCoalescedB": [-1, 1, 2, 3],
    "1LDSBuffer": [-1, 0, 1],
    "MaxOccupancy": [1, 4, 40],
    "LdsPadA": [-1, 0, 2],
    "LdsPadB": [-1, 0, 4],
    "MacroTileShapeMax": [2, 4, 64],
    "VectorWidth": [-1, 1, 2, 4],
    "LocalReadVectorWidth": [-1, 1, 2, 4, 8],
    "FractionalLoad": [0, 1],
}


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


def candidates(vega10_dir: Path, n_mutants: int, seed: int = 7) -> list[tuple[Library, dict]]:
    """Every shipped vega10 solution (own values) plus seeded mutations of them and random PARAMS points."""
    shipped = []
    for path in sorted(vega10_dir.glob("vega10_*.yaml")):
        doc = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
        lib = Library.parse(path.stem.removeprefix("vega10_"))
        shipped += [(lib, {k: v for k, v in s.items() if k in legality.TENSILE_DEFAULTS}) for s in doc[5]]
    rng = random.Random(seed)
    out = list(shipped)
    while len(out) < len(shipped) + n_mutants:
        if rng.random() < 0.3:
            lib = Library.build(rng.choice(FAMILIES), rng.choice(list(PATTERNS)))
            cand = {k: rng.choice(p.values) for k, p in PARAMS.items()}
        else:
            lib, base = rng.choice(shipped)
            cand = {k: base[k] for k in PARAMS if k in base}
            for k in rng.sample(list(PARAMS), rng.choice([0, 1, 2, 3])):
                cand[k] = rng.choice(PARAMS[k].values)
        try:
            c = canonical(cand)
        except CandidateError:
            continue
        for k in rng.sample(list(EXTRAS), rng.choice([0, 1, 2, 3])):
            c[k] = rng.choice(EXTRAS[k])
        out.append((lib, c))
    return out


# oto.tensile.legality rejects these on purpose where Tensile's Solution() accepts: Tensile finds them only
# while it writes the kernel (KernelWriterAssembly overflowedResources): oto rejects a candidate whose VGPR
# lower bound already exceeds the budget, and a half kernel with one store vector per thread, so neither is
# ever compiled; and GlobalSplitU > 1 with UseInitialStridesCD, on which the BetaOnly kernel writer asserts.
OTO_ONLY = ("overflowedResources", "BetaOnly")


def test_legality_agrees_with_tensile_solution(tensile_python, vega10_dir):
    cands = candidates(vega10_dir, n_mutants=3000)
    assert len(cands) >= 2000
    payload = [{"problem_type": tensile_problem_type(lib), "params": p} for lib, p in cands]
    res = subprocess.run(
        [tensile_python, str(ORACLE)], input=json.dumps(payload), capture_output=True, text=True, timeout=3600
    )
    assert res.returncode == 0, res.stderr[-2000:]
    real = json.loads(res.stdout)
    assert len(real) == len(cands)
    classes: Counter = Counter()
    disagreements = []
    for (lib, params), (tensile_valid, rejects) in zip(cands, real, strict=True):
        ours = legality.check_raw(lib, params)
        if isinstance(tensile_valid, str):  # Tensile asserted instead of rejecting: must be invalid for us
            classes["tensile exception, oto rejects"] += 0 if ours.valid else 1
            if ours.valid:
                disagreements.append((lib.name, params, ours.reasons, tensile_valid))
            continue
        oto_valid = ours.valid or all(any(o in r for o in OTO_ONLY) for r in ours.reasons)
        if oto_valid != tensile_valid:
            disagreements.append((lib.name, params, ours.reasons, rejects))
        elif not ours.valid and oto_valid:
            classes["oto-only VGPR bound"] += 1
        elif not tensile_valid:
            # same verdict; the first reason must be one Tensile printed (same words)
            if not (set(ours.reasons) & set(rejects)):
                disagreements.append((lib.name, params, ours.reasons, rejects))
            classes["both reject"] += 1
        else:
            classes["both accept"] += 1
    print(f"\n{len(cands)} candidates: {dict(classes)}; disagreements {len(disagreements)}")
    assert not disagreements, disagreements[:5]
    assert classes["both accept"] > 500 and classes["both reject"] > 500


# ---- emitted configs and the backend through kernel generation and gfx90c assembly ----


def sgemm_nt():
    lib = Library.parse("Cijk_Ailk_Bjlk_SB")
    pts = [
        dict(ThreadTile=[4, 4], WorkGroup=[16, 16, 1], DepthU=16, VectorWidth=4),
        dict(ThreadTile=[8, 8], WorkGroup=[8, 8, 1], DepthU=8, VectorWidth=4),
        dict(ThreadTile=[4, 4], WorkGroup=[16, 16, 1], DepthU=8, VectorWidth=4),  # Tensile: GLVW 2 != VW 4
    ]
    return lib, [Kernel(candidate_id(canonical(p)), canonical(p)) for p in pts]


@pytest.mark.slow
def test_emitted_config_assembles_for_gfx90c(tensile_python, asm_cache, profile, tmp_path):
    """The emit stage's config, as written, goes through real Tensile up to the client step."""
    from oto.tensile.benchmark_config import render_benchmark_yaml

    lib, ks = sgemm_nt()

    deck = SimpleNamespace(name=lib.name, problem_type=problem_type(lib.name))  # what the renderer reads

    kernels = [{"id": k.id, "params": k.params, "roles": ["candidate"]} for k in ks[:2]]
    text = render_benchmark_yaml(deck, profile, 0, kernels, [[256, 256, 1, 256]], 2)
    cfg = tmp_path / "tensile_config.yaml"
    cfg.write_text(text)
    client = tmp_path / "null-client.sh"
    client.write_text(f'#!/bin/sh\nexec {sys.executable} {RUNTIME_SCRIPT} null-client "$@"\n')
    client.chmod(0o755)
    cmd = [
        tensile_python,
        str(RUNTIME_SCRIPT),
        "tensile",
        *register_args(profile),
        "--arch",
        "gfx90c",
        "--cxx-compiler",
        "hipcc",
        "--code-object-version",
        "V4",
        "--asm-cache",
        asm_cache,
        "--prebuilt-client",
        str(client),
        str(cfg),
        str(tmp_path / "out"),
    ]
    # Tensile leaves build_tmp/ and a.out in its working folder: the test's, not the checkout
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=tmp_path)
    log = run.stdout + run.stderr
    assert "registered gfx90c" in log or "(9, 0, 12)" in log
    step = tmp_path / "out" / "1_BenchmarkProblems" / "Cijk_Ailk_Bjlk_SB_00"
    assert len(read_solutions(step / "Data" / "00_Final.yaml")) == 2, log[-3000:]
    assert list((step / "00_Final" / "source" / "library").glob("*gfx90c.co")), log[-3000:]
    assert (step / "00_Final" / "source" / "ClientParameters.ini").exists()


@pytest.mark.slow
def test_backend_build_with_real_tensile(tensile_python, asm_cache, profile, tmp_path):
    lib, ks = sgemm_nt()
    be = TensileBackend(profile, {"python": tensile_python, "asm_cache": asm_cache}, "test")
    res = be.build(Problem(lib, profile, problem_type(lib.name)), ks, tmp_path)
    assert [r.status for r in res] == ["ok", "ok", "rejected"], res
    assert "GlobalLoadVectorWidthA 2 must be == VectorWidth 4 or == 1" in res[2].reason
    assert res[0].resources["lds_bytes"] == 16384
    assert be.provenance()["tensile_version"].startswith("4.")


@pytest.mark.slow
def test_a_kernel_over_tensiles_vgpr_budget_is_a_register_overflow(
    tensile_python, asm_cache, profile, tmp_path
):
    """DGEMM TT8x8 on an 8x8 workgroup: oto's VGPR lower bound (256) passes it, Tensile's assembly writer
    needs more and refuses it ('total vgpr: 263 not in [0, 256]', its name without the ThreadTile the batch
    shares); the backend says register_overflow in Tensile's words."""
    lib = Library.parse("Cijk_Ailk_Bljk_DB")
    base = dict(ThreadTile=[8, 8], DepthU=16, VectorWidth=1, PrefetchLocalRead=1, PrefetchGlobalRead=1)
    ks = [
        Kernel(candidate_id(p), p)
        for p in (canonical({**base, "WorkGroup": wg}) for wg in ([8, 8, 1], [16, 8, 1]))
    ]
    assert legality.check(lib, ks[0].params, legality.Limits.from_profile(profile)).valid
    be = TensileBackend(profile, {"python": tensile_python, "asm_cache": asm_cache}, "test")
    res = be.build(Problem(lib, profile, problem_type(lib.name)), ks, tmp_path)
    assert [r.status for r in res] == ["register_overflow", "ok"], res
    assert "total vgpr" in res[0].reason and "not in [0, 256]" in res[0].reason


# ---- packaging: our logic files build with real TensileCreateLibrary, for both labels ----


@pytest.mark.slow
@pytest.mark.parametrize("package_label", ["native", "spoof"])
def test_logic_files_build_with_tensile_create_library(tensile_python, package_label, profile, tmp_path):
    lib, ks = sgemm_nt()
    pt = problem_type(lib.name)
    sols = [solution_entry(pt, k.params, i) for i, k in enumerate(ks[:2])]
    schedule, label, _ = logic_label(profile, package_label)  # gfx90c, or its stock library's vega10/gfx900
    logic = write_logic_file(
        tmp_path / logic_file_name(schedule, lib.name),
        problem_type=pt,
        solutions=sols,
        exact_rows=[([512, 512, 1, 512], 1, 731.6), ([1024, 1024, 1, 1024], 0, 1187.4)],
        schedule=schedule,
        architecture=label,
        device_names=["Device 1636"],
    )
    out = tmp_path / "library"
    manifest = build_library(
        [logic], label, out, {"python": tensile_python}, schedule, jobs=2, register=register_args(profile)
    )
    files = set(manifest["files"])
    assert f"TensileLibrary_lazy_{label}.dat" in files
    assert any(f.endswith(f"_{label}.co") for f in files)
    # our native writer gives the same libraries for the same logic
    parent, children = build_master_library([logic], arch=label, lazy=True)
    ours = {f"TensileLibrary_lazy_{label}": parent, **children}
    for stem, state in ours.items():
        real = msgpack.unpackb((out / f"{stem}.dat").read_bytes(), strict_map_key=False)
        assert real == json.loads(json.dumps(state)), stem


@pytest.mark.slow
def test_tensile_create_library_ignores_the_provenance_record_beside_a_logic_file(
    tensile_python, profile, tmp_path
):
    """The logic folder as oto leaves it (a logic file and its provenance record) is a valid logic path:
    TensileCreateLibrary builds the library from the YAML and never reads the JSON."""
    from oto.tensile.create_library import tcl_command
    from oto.tensile.provenance import record_path, write_record

    lib, ks = sgemm_nt()
    pt = problem_type(lib.name)
    logic_dir = tmp_path / "logic"
    logic = write_logic_file(
        logic_dir / logic_file_name("gfx90c", lib.name),
        problem_type=pt,
        solutions=[solution_entry(pt, ks[0].params, 0)],
        exact_rows=[([512, 512, 1, 512], 0, 731.6)],
        schedule="gfx90c",
        architecture="gfx90c",
        device_names=["Device 1636"],
    )
    record = write_record(
        {"library": lib.name, "numbers": "simulated", "logic_file": logic.name}, record_path(logic)
    )
    assert sorted(p.name for p in logic_dir.iterdir()) == [record.name, logic.name]
    cmd = tcl_command(
        "gfx90c",
        logic_dir,
        tmp_path / "out",
        {"python": tensile_python},
        jobs=2,
        register=register_args(profile),
    )
    # Tensile leaves build_tmp/ and a.out in its working folder: the test's, not the checkout
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=tmp_path)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert record.name not in run.stdout + run.stderr
    built = sorted(p.name for p in (tmp_path / "out" / "library").glob("*"))
    assert "TensileLibrary_lazy_gfx90c.dat" in built and any(n.endswith("_gfx90c.co") for n in built), built


@pytest.mark.slow
def test_backend_measure_path_with_real_tensile(tensile_python, asm_cache, profile, tmp_path):
    """build, then measure on real Tensile's files with a stand-in client (no GPU here): Tensile writes the
    client's parameters for the real sizes from its solution cache, each sweep is one client call on a
    re-ordered copy of Tensile's benchmark library, and each results column is mapped back to its kernel."""
    from oto.backends.base import Launch, MeasurePlan, Size

    lib, ks = sgemm_nt()
    ks = [
        *ks[:2],
        Kernel(
            candidate_id(canonical(dict(ThreadTile=[4, 4], WorkGroup=[8, 8, 1], DepthU=16))),
            canonical(dict(ThreadTile=[4, 4], WorkGroup=[8, 8, 1], DepthU=16)),
        ),
    ]
    client = tmp_path / "client.sh"
    client.write_text(  # the stand-in fails validation for TT8x8 solutions
        "#!/bin/sh\nSTAND_IN_CLIENT_INVALID=_TT8_8_ exec "
        f'{sys.executable} {Path(__file__).with_name("stand_in_client.py")} "$@"\n'
    )
    client.chmod(0o755)
    cfg = {
        "python": tensile_python,
        "asm_cache": asm_cache,
        "prebuilt_client": str(client),
        "telemetry": {"source": "none"},
        "journal": str(tmp_path / "gpu-journal"),
        "quarantine": str(tmp_path / "quarantine.jsonl"),
    }
    be = TensileBackend(profile, cfg, "test")
    prob = Problem(lib, profile, problem_type(lib.name))
    assert [r.status for r in be.build(prob, ks, tmp_path / "work")] == ["ok", "ok", "ok"]
    sizes = [Size(256, 256, 1, 256), Size(512, 384, 2, 128)]
    launches = [Launch(k.id, "candidate", s, r) for r in range(2) for s in range(2) for k in ks]
    samples = be.measure(prob, MeasurePlan({k.id: k for k in ks}, sizes, launches), tmp_path / "work")
    measure_log = next((tmp_path / "work" / "tensile").glob("batch-*/tensile-measure.log")).read_text()
    assert "Using cached solution data" in measure_log  # the real sizes' parameters, nothing regenerated
    calls = sorted((tmp_path / "work" / "tensile" / "client").glob("call-*"))
    assert len(calls) == 2 and {s.sweep for s in samples} == {0, 1}  # one client call per repetition
    assert len(samples) == 2 * 2 * 3 and [s.seq for s in samples] == list(range(12))
    for call in calls:  # the call's problems are the plan's sizes, with the strides Tensile wrote
        lines = (call / "ClientParameters.ini").read_text().splitlines()
        got = sorted(
            tuple(map(int, ln.split("=")[1].split(","))) for ln in lines if ln.startswith("problem-size=")
        )
        assert got == sorted(tuple(s.as_list()) for s in sizes)
    gflops = {ks[0].id: 10 * 4 * 4 + 16, ks[2].id: 10 * 4 * 4 + 8}  # the stand-in's 10·TT0·TT1 + WG0
    for s in samples:
        size = sizes[s.size_index]
        if s.kernel_id == ks[1].id:
            assert s.status == "validation_failed"
        else:
            flops = 2 * size.m * size.n * size.batch * size.k
            assert s.status == "ok" and s.time_us == pytest.approx(
                flops / (gflops[s.kernel_id] * 1e3), rel=1e-5
            )


# ---- one configuration per problem type of the deck ----


@pytest.mark.slow
def test_every_problem_type_of_the_deck_forks_generates_and_assembles(
    tensile_python, asm_cache, profile, tmp_path
):
    """Every family of the vega10 deck (one transpose pattern each): the config the backend builds (same
    ProblemType as the emitted one: benchmark_problem_type) with the spoof-floor references of two tuning
    sizes and a tuned-looking candidate goes through real Tensile in one run: every kernel is forked,
    generated and assembled."""
    from oto.deck.sources import load_deck
    from oto.deck.tuning_sizes import tuning_indices
    from oto.tensile.benchmark_config import benchmark_config

    deck = load_deck("manifest")
    limits = legality.Limits.from_profile(profile)
    problems, sent = [], {}
    for fam in sorted({lib.family for lib in deck.libraries.values()}):
        lib_deck = next(lib for lib in deck.libraries.values() if lib.family == fam)
        lib = Library.parse(lib_deck.name)
        idx = tuning_indices(lib_deck.sizes, 2)
        kernels = {r["id"]: r["params"] for r in lib_deck.references(idx, limits).values()}
        tries = [
            {"ThreadTile": [4, 4], "WorkGroup": [16, 16, 1], "DepthU": 16, "VectorWidth": vw} for vw in (2, 1)
        ]
        cand = next(
            c
            for c in (legality.resolve(lib, t, limits) for t in tries)
            if legality.check(lib, c, limits).valid
        )
        kernels[candidate_id(cand)] = cand
        cfg = benchmark_config(
            lib_deck.problem_type, list(kernels.values()), [lib_deck.sizes[i][:4] for i in idx], "gfx90c", 1
        )
        problems += cfg["BenchmarkProblems"]
        sent[lib_deck.name] = kernels
    cfg["BenchmarkProblems"] = problems
    path = tmp_path / "every_problem_type.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None, width=120))
    client = tmp_path / "client.sh"
    client.write_text(
        f'#!/bin/sh\nexec {sys.executable} {Path(__file__).with_name("stand_in_client.py")} "$@"\n'
    )
    client.chmod(0o755)
    cmd = [tensile_python, str(RUNTIME_SCRIPT), "tensile", *register_args(profile), "--arch", "gfx90c",
           "--cxx-compiler", "hipcc", "--code-object-version", "V4", "--asm-cache", asm_cache,
           "--prebuilt-client", str(client), str(path), str(tmp_path / "out")]  # fmt: skip
    # Tensile leaves build_tmp/ and a.out in its working folder: the test's, not the checkout
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=tmp_path)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert "Generating kernel source resulted in error" not in log and "rejecting solution" not in log
    for name, kernels in sent.items():
        step = tmp_path / "out" / "1_BenchmarkProblems" / f"{name}_00"
        sols = read_solutions(step / "Data" / "00_Final.yaml")
        assert len(match_solutions(sols, kernels)) == len(kernels) == len(sols), name
        assert list((step / "00_Final" / "source" / "library").glob("*.co")), name


@pytest.mark.slow
def test_gfx902_builds_with_the_caps_its_profile_names(tensile_python, asm_cache, tmp_path):
    """gfx902 is registered from its profile's tensile.caps_from (gfx900), also with an assembler cache that
    a gfx90c run wrote (it has no gfx902 entry): asm and Source kernels build."""
    prof = yaml.safe_load((ROOT / "arch_profiles" / "gfx902.yaml").read_text())
    lib = Library.parse("Cijk_Ailk_Bjlk_SB")
    base = dict(ThreadTile=[4, 4], WorkGroup=[16, 16, 1], DepthU=16, VectorWidth=4)
    ps = [canonical({**base, "KernelLanguage": kl}) for kl in ("Assembly", "Source")]
    ks = [Kernel(candidate_id(p), p) for p in ps]
    be = TensileBackend(prof, {"python": tensile_python, "asm_cache": asm_cache}, "test")
    res = be.build(Problem(lib, prof, problem_type(lib.name)), ks, tmp_path)
    assert [r.status for r in res] == ["ok", "ok"], res
    assert be.provenance()["isa"] == "gfx902"


@pytest.mark.slow
def test_tensile_create_library_reads_past_the_provenance_header(tensile_python, profile, tmp_path):
    """A logic file as the logic stage writes it, provenance comment lines first, builds the same library
    with TensileCreateLibrary as the same file without them. (The .dat's own provenance key is checked
    against Tensile's C++ loader by reading its source, oto.tensile.provenance.DAT_KEY: the loader is not
    part of Tensile's Python package, so no test here can run it.)"""
    from oto.tensile.provenance import logic_header

    lib, ks = sgemm_nt()
    pt = problem_type(lib.name)
    final = {"provenance": {"backend": "sim", "numbers": "simulated", "model_version": "simgpu-5", "seed": 1}}
    built = {}
    for name, notes in (("marked", logic_header(final)), ("bare", [])):
        logic = write_logic_file(
            tmp_path / name / "logic" / logic_file_name("gfx90c", lib.name),
            problem_type=pt,
            solutions=[solution_entry(pt, k.params, i) for i, k in enumerate(ks[:2])],
            exact_rows=[([512, 512, 1, 512], 1, 731.6), ([1024, 1024, 1, 1024], 0, 1187.4)],
            schedule="gfx90c",
            architecture="gfx90c",
            device_names=["Device 1636"],
            notes=notes,
        )
        out = tmp_path / name / "library"
        build_library(
            [logic],
            "gfx90c",
            out,
            {"python": tensile_python},
            "gfx90c",
            jobs=2,
            register=register_args(profile),
        )
        built[name] = {p.name: p.read_bytes() for p in sorted(out.glob("*.dat"))}
    assert built["marked"] and built["marked"] == built["bare"]


# ---- the upstream kit through TensileCreateLibrary as rocBLAS's build runs it ----


@pytest.mark.slow
def test_the_upstream_kit_builds_with_tensile_create_library_as_rocblas_builds(
    tensile_python, profile, tmp_path
):
    """``oto upstream``'s folder (library/src/blas3/Tensile/Logic/asm_full/gfx90c/) through
    TensileCreateLibrary with rocBLAS's build options (merged files, separate architectures, lazy loading,
    msgpack, long names): rc 0, the lazy gfx90c library and its children, equal to oto's own writer for the
    same logic files."""
    from oto.rocblas.upstream import ROCBLAS_LOGIC, check_with_tensile, write_kit
    from test_upstream_kit import COMPARE, VERIFY, results_folder

    kit = tmp_path / "kit"
    write_kit(results_folder(tmp_path), profile, kit, VERIFY, COMPARE)
    res = check_with_tensile(kit, profile, {"python": tensile_python}, tmp_path / "build", jobs=2)
    assert res["rc"] == 0, Path(res["log"]).read_text()[-3000:]
    assert "--lazy-library-loading" in res["command"] and "--no-short-file-names" in res["command"]
    assert "TensileLibrary_lazy_gfx90c.dat" in res["files"]
    assert any(f.endswith(("_gfx90c.co", "_gfx90c.hsaco")) for f in res["files"])  # the kernels, built
    logic = sorted((kit / ROCBLAS_LOGIC / "gfx90c").glob("*.yaml"))
    parent, children = build_master_library(logic, arch="gfx90c", lazy=True)
    for stem, state in {"TensileLibrary_lazy_gfx90c": parent, **children}.items():
        real = msgpack.unpackb(
            (tmp_path / "build" / "library" / f"{stem}.dat").read_bytes(), strict_map_key=False
        )
        assert real == json.loads(json.dumps(state)), stem

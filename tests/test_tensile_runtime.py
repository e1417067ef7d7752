"""oto/tensile/runtime.py (gfx90c registration, stand-in client), oto env, the memory guard, the emitted
config and the package manifest — all without Tensile (a minimal fake ``Tensile`` package stands in)."""

import importlib
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from oto import backends, environment
from oto.backends.base import Capabilities, Kernel, Launch, MeasurePlan, Problem, Sample, Size
from oto.gemm import Library
from oto.hardware import detect, memory
from oto.measurement import benchmarking
from oto.tensile import runtime as tensile_runtime
from oto.tensile.benchmark_config import APU_GLOBAL_PARAMETERS
from oto.tensile.packaging import PackageSettings
from oto.tensile.params import candidate_id, canonical

ROOT = Path(__file__).resolve().parents[1]
NATIVE = PackageSettings.from_config({})  # the schema's defaults: native, create_library auto, measured only
ALWAYS = PackageSettings.from_config({"package": {"create_library": "always"}})
ALLOW_SIMULATED = PackageSettings.from_config({"package": {"allow_simulated": True}})

FAKE_COMMON = """
globalParameters = {"SupportedISA": [(8, 0, 3), (9, 0, 0)]}
defaultGlobalParameters = {"SupportedISA": [(8, 0, 3), (9, 0, 0)]}
validISA = [(0, 0, 0), (8, 0, 3), (9, 0, 0)]
architectureMap = {"gfx900": "vega10"}
from .AsmCaps import getCapabilitiesCache
def probed():
    return getCapabilitiesCache(None)
"""
FAKE_ASMCAPS = """
def getCapabilitiesCache(version):
    return {(0, 0, 0): {"HasMFMA": False}, (9, 0, 0): {"HasMFMA": False, "v_mad_mix_f32": True}}
"""


FAKE_LIBRARYIO = """
def initAsmCapsCache(path):  # an --asm-cache file written before the ISA was registered
    return {(9, 0, 0): {"HasMFMA": False, "v_mad_mix_f32": True}}
"""


@pytest.fixture
def fake_tensile(tmp_path, monkeypatch):
    pkg = tmp_path / "Tensile"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("__version__ = '4.44.0'\n")
    (pkg / "Common.py").write_text(FAKE_COMMON)
    (pkg / "AsmCaps.py").write_text(FAKE_ASMCAPS)
    (pkg / "LibraryIO.py").write_text(FAKE_LIBRARYIO)
    monkeypatch.syspath_prepend(str(tmp_path))
    for m in [m for m in sys.modules if m == "Tensile" or m.startswith("Tensile.")]:
        monkeypatch.delitem(sys.modules, m)
    yield importlib.import_module("Tensile.Common")
    for m in [m for m in sys.modules if m == "Tensile" or m.startswith("Tensile.")]:
        del sys.modules[m]


def test_isa_names():
    assert tensile_runtime.isa_of("gfx90c") == (9, 0, 12)
    assert tensile_runtime.isa_of("gfx1030") == (10, 3, 0)
    assert tensile_runtime.isa_of("gfx90a:xnack-") == (9, 0, 10)
    assert tensile_runtime.name_of((9, 0, 12)) == "gfx90c"
    assert tensile_runtime.name_of((10, 3, 0)) == "gfx1030"
    with pytest.raises(ValueError):
        tensile_runtime.isa_of("all")
    assert tensile_runtime._target_isas(["--arch", "gfx90c", "--architecture=gfx900;gfx90c", "all"]) == [
        (9, 0, 12),
        (9, 0, 0),
        (9, 0, 12),
    ]


def test_register_copies_gfx900_caps_once(fake_tensile):
    common = fake_tensile
    assert tensile_runtime.register((9, 0, 12), (9, 0, 0)) is True
    assert (9, 0, 12) in common.globalParameters["SupportedISA"]
    assert (9, 0, 12) in common.defaultGlobalParameters["SupportedISA"]
    assert (9, 0, 12) in common.validISA and common.architectureMap["gfx90c"] == "gfx90c"
    caps = common.probed()  # Tensile's own call site sees the wrapped cache
    assert caps[(9, 0, 12)] == caps[(9, 0, 0)] and caps[(9, 0, 12)] is not caps[(9, 0, 0)]
    # a Tensile that knows the ISA is left alone
    assert tensile_runtime.register((9, 0, 12), (9, 0, 0)) is False
    assert common.globalParameters["SupportedISA"].count((9, 0, 12)) == 1
    assert tensile_runtime.probe({(9, 0, 12): (9, 0, 0)})["native"] == {"gfx90c": True}


def test_probe_reports_missing_gfx90c(fake_tensile):
    info = tensile_runtime.probe({(9, 0, 12): (9, 0, 0), (9, 0, 2): (9, 0, 0)})
    assert info["version"] == "4.44.0" and info["native"] == {"gfx90c": False, "gfx902": False}
    assert info["logic_names"] == {"gfx90c": None, "gfx902": None}  # registering names them after the ISA


def test_registrations_come_from_the_profiles(fake_tensile):
    """Every profile whose arch differs from its tensile.caps_from is registered with that donor's caps;
    runtime.py itself names no ISA."""
    from oto.tensile.install import register_args, registrations

    profiles = {p.stem: yaml.safe_load(p.read_text()) for p in (ROOT / "arch_profiles").glob("*.yaml")}
    assert registrations(profiles["gfx902"]) == {"gfx902": "gfx900"}
    assert registrations(profiles["gfx90c"]) == {"gfx90c": "gfx900"}
    assert registrations(profiles["gfx900"]) == {}
    assert registrations(profiles["gfx1035"]) == {"gfx1035": "gfx1030"}
    assert registrations(profiles["gfx1103"]) == {"gfx1103": "gfx1102"}
    assert registrations(profiles["gfx1150"]) == {"gfx1150": "gfx1151"}
    assert "DONORS" not in (ROOT / "workflow" / "oto" / "tensile" / "runtime.py").read_text()
    donors, rest = tensile_runtime.registrations_of(
        ["--oto-register", "gfx902=gfx900", "--arch", "gfx902", "cfg.yaml", "out"]
    )
    assert donors == {(9, 0, 2): (9, 0, 0)} and rest == ["--arch", "gfx902", "cfg.yaml", "out"]
    assert tensile_runtime._register_targets(rest, donors) == ["gfx902 (caps of gfx900)"]
    common = fake_tensile
    assert (9, 0, 2) in common.globalParameters["SupportedISA"]
    assert common.architectureMap["gfx902"] == "gfx902"
    assert common.probed()[(9, 0, 2)] == common.probed()[(9, 0, 0)]
    from Tensile import LibraryIO  # an asm cache file from before the registration gets the donor's caps too

    assert LibraryIO.initAsmCapsCache("asmcache.yaml")[(9, 0, 2)] == {"HasMFMA": False, "v_mad_mix_f32": True}
    # an ISA no profile asks for is left alone, even when named
    assert tensile_runtime._register_targets(["--arch", "gfx90c"], donors) == []
    assert register_args(profiles["gfx902"]) == ["--oto-register", "gfx902=gfx900"]


def test_null_client_writes_an_empty_results_file(tmp_path):
    results = tmp_path / "Data" / "00_Final.csv"
    ini = tmp_path / "ClientParameters.ini"
    ini.write_text(f"library-file=x.dat\nresults-file={results}\n")
    rc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "workflow" / "oto" / "tensile" / "runtime.py"),
            "null-client",
            "--config-file",
            str(ini),
        ]
    ).returncode
    assert rc == 0 and results.exists() and results.read_text() == ""


def test_override_and_auto_backend(monkeypatch):
    assert detect.override_arch("9.0.0") == "gfx900"
    assert detect.override_arch("9.0.12") == "gfx90c"
    assert detect.override_arch("10.3.0") == "gfx1030"
    assert detect.override_arch("bogus") is None
    profile = {"arch": "gfx90c"}
    gpu = {
        "agents": ["gfx90c"],
        "physical": "gfx90c",
        "effective": "gfx900",
        "override": "9.0.0",
        "source": "x",
    }
    monkeypatch.setattr(backends, "detect_gpu", lambda env=None: gpu)
    monkeypatch.setattr(backends, "KFD_DEVICE", Path(__file__))  # as if the ROCm driver were loaded
    monkeypatch.delenv("OTO_TENSILE_PYTHON", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert backends.auto_backend(profile, {}) == ("sim", "GPU gfx90c found but Tensile is not installed")
    assert backends.auto_backend(profile, {"python": sys.executable})[0] == "tensile"
    assert backends.auto_backend({"arch": "gfx1030"}, {"python": sys.executable})[0] == "sim"
    monkeypatch.setattr(backends, "detect_gpu", lambda env=None: {**gpu, "physical": None, "agents": []})
    assert backends.auto_backend(profile, {"python": sys.executable})[0] == "sim"
    # Without the driver's device nothing is probed: the GPU tools are never asked.
    monkeypatch.setattr(backends, "KFD_DEVICE", Path("/nonexistent/kfd"))
    monkeypatch.setattr(backends, "detect_gpu", lambda env=None: pytest.fail("probed without /dev/kfd"))
    assert backends.auto_backend(profile, {"python": sys.executable}) == (
        "sim",
        "no AMD GPU ROCm can use: /nonexistent/kfd is absent (no amdgpu compute driver)",
    )


def test_env_report_never_prints_the_key(monkeypatch, capsys):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret-value")
    monkeypatch.delenv("OTO_TENSILE_PYTHON", raising=False)
    monkeypatch.chdir(ROOT)
    assert environment.main([]) == 0
    out = capsys.readouterr().out
    assert "sk-secret" not in out and "ANTHROPIC_API_KEY set" in out and "backend auto →" in out


# ---- memory guard ----


@pytest.fixture
def profile():
    return yaml.safe_load((ROOT / "arch_profiles" / "gfx90c.yaml").read_text())


def test_memory_guard_skips_sizes_that_do_not_fit(profile):
    lib = Library.parse("Cijk_Ailk_Bljk_DB")
    assert memory.footprint_bytes(lib, 1024, 1024, 1, 1024) == 4 * 1024 * 1024 * 8
    too = memory.oversize(lib, [[8192, 8192, 1, 8192], [2048, 2048, 4, 2048]], profile)
    assert set(too) == {0} and "usable device memory 1.50 GiB" in too[0]


class _Recorder:
    numbers = "measured"

    def __init__(self, order="plan"):
        self.seen = []
        self.capabilities = Capabilities(order, "none")

    def measure(self, problem, plan, workdir):
        self.seen = list(plan.launches)
        return [
            Sample(i, la.kernel_id, la.role, la.size_index, la.rep, 5.0, "ok")
            for i, la in enumerate(plan.launches)
        ]


def test_benchmark_stage_applies_the_guard_for_every_backend(profile, tmp_path):
    p = canonical({"ThreadTile": [4, 4], "WorkGroup": [16, 16, 1]})
    k = Kernel(candidate_id(p), p)
    sizes = [Size(256, 256, 1, 256), Size(8192, 8192, 1, 8192)]
    launches = [Launch(k.id, "candidate", s, r) for r in range(2) for s in (1, 0)]
    rec = _Recorder()
    df = benchmarking.measure_frame(
        rec,
        Problem(Library.parse("Cijk_Ailk_Bljk_DB"), profile, {}),
        MeasurePlan({k.id: k}, sizes, launches),
        tmp_path,
    )
    assert [la.size_index for la in rec.seen] == [0, 0]  # the backend never saw the big size
    assert list(df["seq"]) == [0, 1, 2, 3]
    assert list(df["status"]) == ["too_large", "ok", "too_large", "ok"]
    assert "skipped" in df["reason"][0]
    assert (df["launch_order"] == "plan").all() and (df["clock_telemetry"] == "none").all()
    # a backend that reports its own order: what never ran comes after everything that did
    rec = _Recorder("reported")
    df = benchmarking.measure_frame(
        rec,
        Problem(Library.parse("Cijk_Ailk_Bljk_DB"), profile, {}),
        MeasurePlan({k.id: k}, sizes, launches),
        tmp_path,
    )
    assert list(df["seq"]) == [0, 1, 2, 3] and list(df["status"]) == ["ok", "ok", "too_large", "too_large"]


# ---- the emitted Tensile config ----


def test_emitted_config_matches_the_backend_settings(profile):
    from types import SimpleNamespace

    from oto.tensile.benchmark_config import render_benchmark_yaml
    from oto.tensile.logic_writer import problem_type

    Deck = SimpleNamespace(name="Cijk_Ailk_Bjlk_SB", problem_type=problem_type("Cijk_Ailk_Bjlk_SB"))

    ks = [
        canonical({"ThreadTile": [4, 4], "WorkGroup": [16, 16, 1]}),
        canonical({"ThreadTile": [8, 8], "WorkGroup": [8, 8, 1]}),
    ]
    kernels = [{"id": candidate_id(p), "params": p, "roles": ["candidate"]} for p in ks]
    ref = {"id": "kref", "params": ks[0], "roles": ["reference"]}
    doc = yaml.safe_load(
        render_benchmark_yaml(Deck, profile, 1, [*kernels, ref], [[64, 64, 1, 64], [128, 96, 2, 32]], 3)
    )
    g = doc["GlobalParameters"]
    for key, value in APU_GLOBAL_PARAMETERS.items():
        assert g[key] == value, key
    assert g["NumBenchmarks"] == 3 and g["Architecture"] == "gfx90c"
    pt, group = doc["BenchmarkProblems"][0]
    assert pt["TransposeB"] is True and pt["Batched"] is True
    assert group["ForkParameters"] == [{"Groups": [ks]}]  # exact bundles, references not forked twice
    sizes = group["BenchmarkFinalParameters"][0]["ProblemSizes"]
    assert sizes == [{"Exact": [64, 64, 1, 64]}, {"Exact": [128, 96, 2, 32]}]
    assert set(doc) == {"GlobalParameters", "BenchmarkProblems", "LibraryLogic"}
    for banned in (
        "JoinParameters",
        "BenchmarkForkParameters",
        "BenchmarkJoinParameters",
        "InitialSolutionParameters",
    ):
        assert banned not in group


# ---- package manifest without Tensile ----


def test_package_without_tensile_says_why(vega10_dir, tmp_path, profile, monkeypatch):
    from oto.stages import package
    from oto.tensile.provenance import record_path, write_record

    monkeypatch.delenv("OTO_TENSILE_PYTHON", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    logic = tmp_path / "gfx90c_Cijk_Ailk_Bljk_DB.yaml"
    text = (vega10_dir / "vega10_Cijk_Ailk_Bljk_DB.yaml").read_text()
    logic.write_text(text.replace("- vega10\n", "- gfx90c\n", 1).replace("- gfx900\n", "- gfx90c\n", 1))
    manifest = tmp_path / "library" / "manifest.yaml"
    record = write_record({"library": "Cijk_Ailk_Bljk_DB", "numbers": "measured"}, record_path(logic))
    package.run(
        [logic],
        profile,
        tmp_path / "TensileLibrary.dat",
        NATIVE,
        manifest=manifest,
        provenance_paths=[record],
    )
    doc = yaml.safe_load(manifest.read_text())
    assert doc["architecture"] == "gfx90c" and doc["tensile_create_library"]["files"] == []
    assert "Tensile not found" in doc["tensile_create_library"]["why"]
    assert doc["provenance"]["numbers"] == ["measured"]
    assert (tmp_path / "TensileLibrary.dat").stat().st_size > 0
    with pytest.raises(RuntimeError, match="create_library"):
        package.run(
            [logic], profile, tmp_path / "T.dat", ALWAYS, manifest=manifest, provenance_paths=[record],
        )  # fmt: skip


def test_package_builds_no_code_objects_from_simulated_winners(
    vega10_dir, tmp_path, profile, caplog, monkeypatch
):
    """Tensile is 'installed' (a command that fails loudly if run): simulated winners never reach it, unless
    package.allow_simulated opts in; the manifest says where the numbers came from and why."""
    from oto.stages import package
    from oto.tensile.create_library import PackagingError
    from oto.tensile.provenance import PackagingRefused, record_path, write_record

    logic = tmp_path / "logic" / "gfx90c_Cijk_Ailk_Bljk_DB.yaml"
    logic.parent.mkdir()
    text = (vega10_dir / "vega10_Cijk_Ailk_Bljk_DB.yaml").read_text()
    logic.write_text(text.replace("- vega10\n", "- gfx90c\n", 1).replace("- gfx900\n", "- gfx90c\n", 1))
    prov = {"backend": "sim", "numbers": "simulated", "model_version": "3", "seed": 1}
    record = write_record({"library": "Cijk_Ailk_Bljk_DB", "numbers": "simulated", "backend": "sim",
                           "provenance": prov, "measurement": {"drift": "clock_per_launch"}},
                          record_path(logic))  # fmt: skip
    assert record.name == "gfx90c_Cijk_Ailk_Bljk_DB.provenance.json"
    tcl = {"command": [sys.executable, "-c", "raise SystemExit(7)"]}
    manifest = tmp_path / "library" / "manifest.yaml"
    args = dict(manifest=manifest, tensile_cfg=tcl, provenance_paths=[record])
    with caplog.at_level(logging.INFO, logger="oto.tensile.packaging"):
        package.run([logic], profile, tmp_path / "TensileLibrary.dat", NATIVE, **args)
    # Tensile is there to build them: the gate is a warning on the terminal
    assert [r.levelno for r in caplog.records if "not run" in r.message] == [logging.WARNING]
    doc = yaml.safe_load(manifest.read_text())
    assert doc["provenance"]["numbers"] == ["simulated"]
    assert doc["provenance"]["libraries"]["Cijk_Ailk_Bljk_DB"]["model_version"] == "3"
    assert doc["tensile_create_library"]["files"] == []
    assert "winners are simulated" in doc["tensile_create_library"]["why"]
    assert "package.allow_simulated" in doc["tensile_create_library"]["why"]
    assert (tmp_path / "TensileLibrary.dat").stat().st_size > 0  # oto's own .dat is still written
    with pytest.raises(PackagingRefused, match="'always' but winners are simulated"):
        package.run([logic], profile, tmp_path / "T.dat", ALWAYS, **args)
    with pytest.raises(PackagingError, match="rc 7"):  # opted in: TensileCreateLibrary really runs
        package.run([logic], profile, tmp_path / "T.dat", ALLOW_SIMULATED, **args)
    # No Tensile at all (the simulator's demo): the same reason, recorded, but no warning at the run's end
    monkeypatch.delenv("OTO_TENSILE_PYTHON", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-tensile-here"))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="oto.tensile.packaging"):
        package.run([logic], profile, tmp_path / "T.dat", NATIVE, **{**args, "tensile_cfg": {}})
    assert [r.levelno for r in caplog.records if "not run" in r.message] == [logging.INFO]
    assert "winners are simulated" in yaml.safe_load(manifest.read_text())["tensile_create_library"]["why"]

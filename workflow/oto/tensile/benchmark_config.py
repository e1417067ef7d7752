"""Tensile benchmark configs: the GlobalParameters oto runs Tensile with on a consumer APU, the config the
tensile backend hands Tensile for one batch, and the human-readable ``tensile_config.yaml`` emit writes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import jinja2
import yaml

import oto
from oto.tensile.defaults import TENSILE_MIN_VERSION, benchmark_problem_type

# GlobalParameters for a consumer APU; the emitted tensile_config.yaml template uses the same values
# (tests/test_tensile_config.py checks they agree).
APU_GLOBAL_PARAMETERS: dict[str, Any] = {
    "MinimumRequiredVersion": TENSILE_MIN_VERSION,
    "NumElementsToValidate": 128,  # every candidate is validated: a wrong kernel can never win
    "KernelTime": True,  # device (event) timers
    "SleepPercent": 50,  # cool-down between data points on a thermally limited APU
    "NumWarmups": 1,
    "SyncsPerBenchmark": 1,
    "EnqueuesPerSync": 1,
    "DataInitTypeAB": 3,
    "DataInitTypeC": 3,
    "CSVExportWinner": True,
    "CSVMergeSameProblemID": False,
    "HardwareMonitor": False,  # rocm-smi clocks are not meaningful on an APU
    "PrintSolutionRejectionReason": True,
    "ExitOnFails": 0,  # a validation failure is recorded, the batch goes on
    "Device": 0,
}


def benchmark_config(
    problem_type: Mapping[str, Any],
    candidates: Sequence[Mapping[str, Any]],
    sizes: Sequence[Sequence[int]],
    architecture: str,
    benchmarks: int,
    library_logic: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Tensile benchmark config: the candidates as one Groups fork dimension, exact sizes."""
    problem = benchmark_problem_type(problem_type)
    doc: dict[str, Any] = {
        "GlobalParameters": {
            **APU_GLOBAL_PARAMETERS,
            "NumBenchmarks": int(benchmarks),
            "Architecture": architecture,
        },
        "BenchmarkProblems": [
            [
                problem,
                {
                    "BenchmarkCommonParameters": [{"EdgeType": ["ShiftPtr"]}, {"LoopTail": [True]}],
                    "ForkParameters": [{"Groups": [[_plain(c) for c in candidates]]}],
                    "BenchmarkFinalParameters": [
                        {"ProblemSizes": [{"Exact": [int(x) for x in s[:4]]} for s in sizes]}
                    ],
                },
            ]
        ],
    }
    if library_logic is not None:
        doc["LibraryLogic"] = dict(library_logic)
    return doc


def _plain(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, list | tuple) else v) for k, v in params.items()}


PROFILE_FIELDS = ("arch", "tensile.logic_prefix", "tensile.device_names")  # what the rendering reads
_FLOW_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class BenchmarkedLibrary(Protocol):
    """What a benchmark config needs of a library (a deck slice, :class:`oto.deck.model.LibraryDeck`, has
    it): its Tensile problem-type name and problem type. Tensile interop sits below the deck."""

    name: str
    problem_type: Mapping


def render_benchmark_yaml(
    deck: BenchmarkedLibrary,
    profile: Mapping,
    generation: int,
    kernels: list[Mapping],
    sizes: list[list[int]],
    repetitions: int,
    why_empty: str = "",
) -> str:
    """The ``tensile_config.yaml`` of a generation: its kernels (candidates and the references they race)
    and tuning sizes as a Tensile benchmark config a user can run by hand (the backend builds its own per
    batch with :func:`benchmark_config`)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("oto.tensile", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    # YAML flow style, not JSON: a kernel's AssertStride*Equal keeps integer keys ({0: 1}); libyaml's
    # emitter where PyYAML has it (the same text as the pure-Python one for kernel parameters, ~4x faster)
    env.filters["flow"] = lambda v: yaml.dump(
        v, Dumper=_FLOW_DUMPER, default_flow_style=True, width=1_000_000, sort_keys=False
    ).strip()
    problem = benchmark_problem_type(deck.problem_type)
    tensile = profile.get("tensile", {})
    # Candidates, then the spoof-floor references they race against: every kernel the generation builds
    # (one bundle per distinct kernel).
    cands, seen = [], set()
    for k in sorted(kernels, key=lambda k: "candidate" not in k["roles"]):
        key = json.dumps(k["params"], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            cands.append(k)
    return env.get_template("benchmark.yaml.j2").render(
        oto_version=oto.__version__,
        library=deck.name,
        generation=generation,
        arch=profile["arch"],
        min_version=TENSILE_MIN_VERSION,
        repetitions=repetitions,
        problem_type=problem,
        candidates=[dict(k["params"]) for k in cands],
        c_ids=[k["id"] + ("" if "candidate" in k["roles"] else " reference") for k in cands],
        sizes=[list(s[:4]) for s in sizes],
        schedule=tensile.get("logic_prefix", profile["arch"]),
        device_names=list(tensile.get("device_names", [])),
        why_empty=why_empty,
    )

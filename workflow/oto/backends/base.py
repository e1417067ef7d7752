"""The one interface every measurement backend (sim, tensile, replay) implements.

Stages call :func:`oto.backends.resolve` and then only ``build`` and ``measure``; they never branch on which
backend they hold. A backend states what its numbers are (``simulated``, ``replayed`` or ``measured``) and
that label travels with every record into every output. It also declares what its measurements can tell
(:class:`Capabilities`): whose order the launches ran in, what clock telemetry comes with them and how many
repetitions one call to its timer gives; scoring picks its drift estimator from those facts
(:func:`oto.measurement.scoring.choose_drift`), never from the backend's name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from oto.gemm import Library

if TYPE_CHECKING:
    from oto.deck.model import LibraryDeck

# Outcome classes. A failure is data: it is stored with the kernel and counted, never raised.
BUILD_OK = "ok"
BUILD_CLASSES = ("ok", "rejected", "compile_error", "register_overflow")
SAMPLE_OK = "ok"
# gpu_reset: a kernel quarantined by the GPU-reset journal (oto.registry.gpu_journal), never launched
SAMPLE_CLASSES = ("ok", "validation_failed", "timeout", "crash", "too_large", "gpu_reset")

# Whose order the samples' ``seq`` follows: the plan's (the backend ran the launches as listed) or the order
# the backend reports it really ran them in (Tensile's client: problem after problem, every solution of a
# problem back to back, in the order of its library).
LAUNCH_ORDERS = ("plan", "reported")
# Clock readings that come with the samples: one per launch, one per sweep (every launch of a sweep shares the
# clock its observer saw during the sweep), or none.
CLOCK_TELEMETRY = ("per_launch", "per_sweep", "none")
# What answers rocBLAS's own clients (rocblas-bench) for verify and compare (oto.rocblas.clients): the real
# binary on the backend's GPU, the backend's own model of the GPU through the same interface, or nothing (the
# rules then write why they were skipped).
ROCBLAS_CLIENTS = ("binary", "model", "none")


@dataclass(frozen=True)
class Capabilities:
    """What a backend's measurements can tell scoring (declared by each backend, recorded in samples.csv).

    ``repetitions_per_call``: the most repetitions of one (kernel, size) one call to the backend's timer gives
    (None: any number); a plan asking for more takes more calls, never reuses a measured cell."""

    launch_order: str
    clock_telemetry: str
    repetitions_per_call: int | None = None

    def __post_init__(self):
        if self.launch_order not in LAUNCH_ORDERS:
            raise ValueError(f"launch_order {self.launch_order!r} is not one of {', '.join(LAUNCH_ORDERS)}")
        if self.clock_telemetry not in CLOCK_TELEMETRY:
            raise ValueError(
                f"clock_telemetry {self.clock_telemetry!r} is not one of {', '.join(CLOCK_TELEMETRY)}"
            )

    def as_dict(self) -> dict[str, Any]:
        return {
            "launch_order": self.launch_order,
            "clock_telemetry": self.clock_telemetry,
            "repetitions_per_call": self.repetitions_per_call,
        }


@dataclass(frozen=True)
class Kernel:
    id: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class BuildResult:
    kernel_id: str
    status: str  # one of BUILD_CLASSES
    reason: str = ""
    resources: Mapping[str, int] = field(default_factory=dict)  # vgpr, sgpr, lds_bytes (estimates or real)


@dataclass(frozen=True)
class Size:
    m: int
    n: int
    batch: int
    k: int

    def as_list(self) -> list[int]:
        return [self.m, self.n, self.batch, self.k]


@dataclass(frozen=True)
class Launch:
    """One timed launch the plan asks for. A backend whose launch order is ``plan`` runs them as listed; one
    that reports its order runs every (kernel, size, rep) the plan names, in its own order, once per rep."""

    kernel_id: str
    role: str  # "candidate" or "reference"
    size_index: int
    rep: int


@dataclass(frozen=True)
class MeasurePlan:
    kernels: Mapping[str, Kernel]  # every kernel the launches name (built ok)
    sizes: Sequence[Size]
    launches: Sequence[Launch]  # interleaved order chosen by the benchmark stage


@dataclass(frozen=True)
class Sample:
    seq: int  # position in the order the launches really ran (the plan's, or the one the backend reports)
    kernel_id: str
    role: str
    size_index: int
    rep: int
    time_us: float  # NaN when status is not ok
    status: str  # one of SAMPLE_CLASSES
    reason: str = ""
    # Core clock at the launch as an observer read it (MHz); NaN where the backend has no clock telemetry.
    # With per-sweep telemetry every launch of a sweep carries its sweep's reading.
    clock_mhz: float = float("nan")
    sweep: int = -1  # the sweep (one pass of the client over its problems) the launch ran in; -1: none
    temperature_c: float = float("nan")  # GPU temperature an observer read (per launch or sweep)
    power_w: float = float("nan")  # GPU/socket power an observer read
    telemetry_note: str = ""  # why a reading is missing or was rejected ("" when fine or not applicable)


@dataclass(frozen=True)
class Problem:
    """What a backend needs to know about the library being tuned."""

    library: Library
    arch: Mapping[str, Any]  # the validated arch profile
    problem_type: Mapping[str, Any]  # Tensile ProblemType dict of the shipped logic file

    @classmethod
    def of(cls, deck: LibraryDeck, profile: Mapping[str, Any]) -> Problem:
        """The problem of one library of the deck on the profile's GPU."""
        return cls(library=Library.parse(deck.name), arch=profile, problem_type=deck.problem_type)


@dataclass(frozen=True)
class Costs:
    """What a backend's work costs in wall seconds, declared so that a run can be estimated before it starts
    (``oto plan``, the progress line's time left): one build and one measure invocation per racing round
    each pay ``startup_s``; every timed launch costs its kernel time × ``gpu_time_scale`` × (1 +
    ``cooldown_share``) plus ``launch_overhead_us``; every (kernel, size) pair adds ``warmups_per_pair``
    untimed launches per measure invocation."""

    startup_s: float = 0.0  # per backend invocation (process start-up, loading)
    build_s_per_kernel: float = 0.0
    launch_overhead_us: float = 0.0  # host time per timed launch beyond the kernel itself
    warmups_per_pair: int = 0
    cooldown_share: float = 0.0  # idle time after a launch, as a share of its kernel time
    gpu_time_scale: float = 1.0  # wall seconds per second of kernel time (1 on a GPU; the sim's pace)
    source: str = ""  # where the figures come from


class Backend(Protocol):
    name: str
    numbers: str  # "simulated" | "replayed" | "measured"
    PROFILE_FIELDS: tuple[str, ...]  # the arch-profile fields build and measure depend on
    launch_timeout_us: float  # no launch takes longer: a reported time above it is a bad timing

    capabilities: Capabilities
    rocblas_client: str  # one of ROCBLAS_CLIENTS

    @classmethod
    def from_config(cls, config: Mapping[str, Any], profile: Mapping[str, Any], stream: str) -> Backend:
        """This backend as ``config`` (defaults filled in) sets it up, for one job's ``stream``."""
        ...

    @classmethod
    def costs(cls, config: Mapping[str, Any]) -> Costs:
        """This backend's :class:`Costs` under ``config`` (a validated run config)."""
        ...

    def provenance(self) -> dict[str, Any]:
        """Facts that make a result reproducible: backend, numbers, versions, seeds."""
        ...

    def quarantined(self, library: str) -> dict[str, str]:
        """{kernel id: why} of ``library``'s kernels this GPU never runs again (they took it down: the
        GPU-reset quarantine, oto.registry.gpu_journal); none where no GPU runs them."""
        ...

    def build(self, problem: Problem, kernels: Sequence[Kernel], workdir: Path) -> list[BuildResult]:
        """Compile (or check) every kernel; one result per kernel, failures included."""
        ...

    def measure(self, problem: Problem, plan: MeasurePlan, workdir: Path) -> list[Sample]:
        """Run the plan; failures included. ``launch_order`` plan: one sample per launch, in plan order,
        ``seq`` its index in the plan. ``reported``: one sample per launch really run, ``seq`` its position in
        the order it ran; every (kernel, size, rep) the plan names is answered (a launch that never ran is a
        failed sample with its reason), and cells the backend's timer measured beyond them are returned
        too."""
        ...

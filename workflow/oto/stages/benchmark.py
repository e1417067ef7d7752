"""benchmark: time every built candidate at every tuning size, interleaved with the spoof-floor reference.

The launch order is the measurement design: each size's reference kernel is re-timed after every few
candidates, so the drift model in :mod:`oto.scoring` always has reference samples close in time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from oto.backends import resolve
from oto.backends.base import Kernel, Launch, MeasurePlan, Size
from oto.deck import read_library_yaml
from oto.files import atomic_write_text, read_yaml
from oto.scoring import SAMPLE_COLUMNS
from oto.stages.common import problem_for, stream_name

log = logging.getLogger(__name__)
REFERENCE_EVERY = 4  # candidates between two reference launches


@contextlib.contextmanager
def gpu_mutex(device: int = 0) -> Iterator[None]:
    """Serialise GPU work across processes; the kernel drops the lock even after kill -9."""
    with open(Path(tempfile.gettempdir()) / f"oto-gpu{device}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def interleave(
    candidates: Sequence[str], reference: Mapping[int, str], n_sizes: int, repetitions: int, seed: str
) -> list[Launch]:
    """Per repetition, visit sizes in shuffled order; at each size time ref, candidates…, ref, …, ref."""
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "little"))
    launches: list[Launch] = []
    for rep in range(repetitions):
        for size in rng.permutation(n_sizes):
            size = int(size)
            ref = reference.get(size)
            order = [c for c in rng.permutation(list(candidates)) if c != ref] if candidates else []
            if ref is not None:
                launches.append(Launch(ref, "reference", size, rep))
            for i, kid in enumerate(order, 1):
                launches.append(Launch(str(kid), "candidate", size, rep))
                if ref is not None and (i % REFERENCE_EVERY == 0 or i == len(order)):
                    launches.append(Launch(ref, "reference", size, rep))
    return launches


def measure_frame(backend, problem, plan: MeasurePlan, workdir: Path) -> pd.DataFrame:
    """Run a plan on the backend (holding the GPU lock) and return the samples in the samples.csv layout."""
    samples = []
    if plan.launches:
        with gpu_mutex():
            samples = backend.measure(problem, plan, Path(workdir))
    rows = [
        (
            s.seq,
            s.kernel_id,
            s.role,
            s.size_index,
            *plan.sizes[s.size_index].as_list(),
            s.rep,
            s.time_us,
            s.status,
            s.reason,
            backend.numbers,
        )
        for s in samples
    ]
    return pd.DataFrame(rows, columns=SAMPLE_COLUMNS)


def run(
    candidates_path: Path,
    build_path: Path,
    deck_path: Path,
    profile: Mapping,
    config: Mapping,
    workdir: Path,
    out_samples: Path,
    repetitions: int | None = None,
) -> pd.DataFrame:
    cands = read_yaml(candidates_path)
    build = read_yaml(build_path)
    deck = read_library_yaml(deck_path)
    stage = f"gen{cands['generation']}"
    backend = resolve(config, profile, stream_name(deck.name, stage))
    built = {b["id"] for b in build.get("kernels", []) if b["status"] == "ok"}
    kernels = {k["id"]: Kernel(k["id"], k["params"]) for k in cands.get("kernels", []) if k["id"] in built}
    candidates = [k["id"] for k in cands.get("kernels", []) if "candidate" in k["roles"] and k["id"] in built]
    reference = {int(i): kid for i, kid in (cands.get("reference") or {}).items() if kid in built}
    sizes = [Size(*map(int, s[:4])) for s in cands.get("sizes", [])]
    reps = int(repetitions or config["benchmark"]["repetitions"])
    launches = interleave(candidates, reference, len(sizes), reps, f"{config['seed']}:{deck.name}:{stage}")

    df = measure_frame(backend, problem_for(deck, profile), MeasurePlan(kernels, sizes, launches), workdir)
    atomic_write_text(out_samples, df.to_csv(index=False))
    log.info(
        "%s %s: %d launches (%s), %d kernels x %d sizes x %d reps",
        deck.name,
        stage,
        len(df),
        backend.numbers,
        len(kernels),
        len(sizes),
        reps,
    )
    return df

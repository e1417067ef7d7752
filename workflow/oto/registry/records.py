"""The experiment registry: everything ever proposed, rejected, built, benchmarked or failed, with provenance.

Two layers:

* **Per-job files** ``results/<arch>/<library>/gen<N>/registry.jsonl``, a declared output of each select
  job (Snakemake tracks them like any stage file). One JSON record per line and a final ``{"end": …}``
  line carrying the record count, so a half-written or corrupted file is detected line by line.
* **One consolidated store** ``results/<arch>/registry/registry.sqlite`` (SQLite), merged by the
  ``registry`` rule. It lives outside every rule's outputs on purpose: Snakemake deletes a job's outputs
  before rerunning it, and the store must outlive runs. Later runs in the same results folder read it, if
  present, as optional knowledge (mutate: evidence and transfer; emit: dedupe), which keeps the DAG static.

Why SQLite and not Parquet: it ships with Python (no new dependency on the GPU box), merges are
transactional (a killed consolidation leaves the previous store intact), a primary key gives dedupe by
(record kind, candidate, size, protocol, run) for free, and any tool can query it (``sqlite3``, pandas
``read_sql``, DuckDB's sqlite scanner). Parquet's columnar speed does not matter at tens of thousands of
rows.

Dedupe key of a measurement: (kernel id = hash of the canonical parameters, size, protocol). ``protocol``
hashes what makes two measurements comparable: the resolved backend's provenance — backend, numbers
(simulated | replayed | measured), the simulator's model version, seed and noise, or Tensile's version and the
device, or the replayed cache — and the repetition settings (:func:`protocol_of`). It is computed from the
backend a run resolves to (``backend: auto`` included), never from the config's spelling, so a simulated
demo and a run on the GPU in the same results folder never share a protocol; records of different simulator
model versions stay apart too. The same key is never benchmarked twice unless a proposal is a deliberate
top-up (proposer ``topup``).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import oto
from oto.numbers import finite

SCHEMA_VERSION = 1
KINDS = ("proposed", "rejected", "built", "benchmarked", "failed")
TOPUP = "topup"  # proposer of a deliberate re-measurement: allowed through dedupe
COLUMNS = (
    "kind",  # one of KINDS
    "kernel_id",
    "library",
    "family",
    "pattern",
    "arch",
    "generation",
    "proposer",
    "status",  # build or sample class (ok, illegal, duplicate, compile_error, timeout, …)
    "reason",
    "size",  # "M,N,B,K" for benchmarked/failed rows, "" otherwise
    "score",
    "ci_low",
    "ci_high",
    "time_us",
    "gflops",
    "params",  # canonical parameters, JSON
    "protocol",
    "config_hash",
    "backend",
    "numbers",  # simulated | replayed | measured
    "tool_versions",  # JSON: oto, backend model/Tensile versions
    "run_id",
    "recorded_at",  # unix time
    "source",  # per-job file the record came from
)
KEY = ("kind", "kernel_id", "library", "arch", "size", "protocol", "run_id", "generation")


class RegistryError(ValueError):
    pass


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def config_hash(config: Mapping) -> str:
    return _hash(config)


# Provenance facts that describe one job or this machine's plumbing, not the kind of measurement.
PER_JOB_FACTS = ("stream", "capabilities", "telemetry", "prebuilt_client", "probe", "device_seen_as")


def protocol_facts(provenance: Mapping) -> dict[str, Any]:
    """The part of a backend's provenance that makes two measurements comparable."""
    return {k: v for k, v in dict(provenance or {}).items() if k not in PER_JOB_FACTS}


def protocol_of(provenance: Mapping, config: Mapping) -> str:
    """What must match for two measurements to be the same experiment: the resolved backend's provenance
    (backend, numbers, model version or Tensile version and device, seeds and settings) and the repetitions
    per cell. Computable before measuring (mutate and emit resolve the backend), so they dedupe against it."""
    bench = config.get("benchmark", {})
    if not provenance or not provenance.get("numbers"):
        raise ValueError("protocol_of: a backend provenance with 'backend' and 'numbers' is needed")
    return _hash(
        {
            "backend": protocol_facts(provenance),
            "repetitions": bench.get("repetitions"),
            "bootstrap": bench.get("bootstrap"),
        }
    )


def run_id(config: Mapping) -> str:
    """Runs with the same config and seed are the same run (a resumed run is not a new one)."""
    return _hash({"config": config, "seed": config.get("seed")})


def size_key(size: Sequence) -> str:
    return ",".join(str(int(x)) for x in list(size)[:4])


def json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def generation_records(
    cands: Mapping,
    build: Mapping,
    scores: Sequence[Mapping],
    config: Mapping,
    arch: str,
    now: float | None = None,
) -> list[dict[str, Any]]:
    """Records of one select job: proposals, rejections, build outcomes and one row per (kernel, size)."""
    from oto.gemm import Library

    prov = dict(build.get("provenance") or {})
    lib = Library.parse(cands["library"])
    versions = {"oto": oto.__version__}
    versions.update({k: v for k, v in prov.items() if "version" in k})
    base = {
        "library": lib.name,
        "family": lib.family.code,
        "pattern": lib.pattern,
        "arch": arch,
        "generation": int(cands["generation"]),
        "protocol": protocol_of(prov, config),
        "config_hash": config_hash(config),
        "backend": prov.get("backend", ""),
        "numbers": prov.get("numbers", ""),
        "tool_versions": json.dumps(versions, sort_keys=True),
        "run_id": run_id(config),
        "recorded_at": now if now is not None else time.time(),
        "size": "",
    }
    kernels = {k["id"]: k for k in cands.get("kernels", [])}
    out = []
    for k in kernels.values():
        kind = "proposed" if "candidate" in k.get("roles", []) else "built"
        if kind == "proposed":
            out.append(_rec(base, "proposed", k, "new", k.get("rationale", "")))
    for r in cands.get("rejected", []):
        if r.get("id"):
            out.append(_rec(base, "rejected", r, r.get("class", ""), r.get("reason", "")))
    for b in build.get("kernels", []):
        k = kernels.get(b["id"], {"id": b["id"]})
        out.append(_rec(base, "built", k, b.get("status", ""), b.get("reason", "")))
    sizes = cands.get("sizes", [])
    for s in scores:
        k = kernels.get(str(s["kernel_id"]))
        if k is None:
            continue
        i = int(s["size_index"])
        ok = s.get("status") == "ok" and s.get("score") is not None and finite(s.get("score"))
        rec = _rec(base, "benchmarked" if ok else "failed", k, str(s.get("status", "")), "")
        rec["size"] = size_key(sizes[i]) if i < len(sizes) else str(i)
        for c in ("score", "ci_low", "ci_high", "time_us", "gflops"):
            rec[c] = finite(s.get(c))
        out.append(rec)
    return out


def _rec(base: Mapping, kind: str, k: Mapping, status: str, reason: str) -> dict[str, Any]:
    return {
        **base,
        "kind": kind,
        "kernel_id": k.get("id"),
        "proposer": k.get("proposer", ""),
        "status": status,
        "reason": reason,
        "params": json.dumps(k.get("params"), sort_keys=True),
    }

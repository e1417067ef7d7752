"""The evidence digest of one library and generation: what the agent reads (as quoted data).

Static per arch (cached in the system prompt): hardware limits and ceilings. Per call: the library, its
winners and their gap to the ceilings and to the spoof floor, failures by class, what was tried and how it
scored, and the shipped kernels. Everything is copied from the stage files, trimmed to bounded sizes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oto.gemm import Library
from oto.hardware.ceilings import family_peak_gflops

MAX_TRIED = 48
MAX_SIZES = 64
MAX_SEEDS = 8
MAX_FAILURES = 24
_PROFILE_KEYS = (
    "arch", "name", "compute_units", "simds_per_cu", "lanes_per_simd", "wavefront_size", "clock_mhz", "rates",
    "has_mfma", "lds_bytes_per_cu", "max_lds_per_workgroup", "vgprs_per_lane_max", "vgpr_budget_per_simd",
    "sgprs_max", "max_waves_per_simd", "max_workgroup_size", "l2_bytes", "memory",
)  # fmt: skip


def hardware(profile: Mapping[str, Any]) -> dict[str, Any]:
    hw = {k: profile[k] for k in _PROFILE_KEYS if k in profile}
    hw["memory"] = {k: v for k, v in dict(profile.get("memory", {})).items() if not isinstance(v, dict)}
    return hw


def tensile_digest(
    library: Library,
    generation: int,
    selection: Mapping[str, Any] | None,
    seeds: Sequence[Mapping[str, Any]],
    profile: Mapping[str, Any],
) -> dict[str, Any]:
    sel = selection or {}
    fam = library.family
    stock = (profile.get("stock_library") or {}).get("arch") or "gfx900"  # the library the owners run
    out: dict[str, Any] = {
        "library": library.name,
        "generation": generation,
        "problem": {
            "datatype_family": fam.code,
            "transpose_a": library.transpose_a,
            "transpose_b": library.transpose_b,
            "peak_gflops": round(family_peak_gflops(profile, fam), 3),
        },
        "score_meaning": f"kernel time of the shipped {stock} solution / kernel time (1.0 = spoof floor)",
        "shipped_kernels": [dict(s) for s in seeds[:MAX_SEEDS]],
    }
    if not sel:
        out["status"] = "first generation: nothing measured yet; start from the shipped kernels"
        return out
    out["summary"] = sel.get("summary", {})
    out["convergence_history"] = sel.get("convergence", {}).get("history", [])
    sizes = sel.get("sizes", [])
    out["winners_per_size"] = [
        {
            "size_MNBK": sizes[r["size_index"]] if r["size_index"] < len(sizes) else None,
            **{
                k: r.get(k)
                for k in ("winner", "score", "ci_low", "ci_high", "gflops", "pct_ceiling", "verdict")
            },
        }
        for r in sel.get("per_size", [])[:MAX_SIZES]
    ]
    out["winner_kernels"] = dict(sel.get("kernels", {}))
    out["tried"] = [
        {k: o.get(k) for k in ("id", "params", "score", "sizes_won", "failure")}
        for o in sel.get("observations", [])[:MAX_TRIED]
    ]
    out["measured_count"] = len(sel.get("measured", []))
    return out


def add_last_generation(
    digest: dict[str, Any], build: Mapping[str, Any] | None, candidates: Mapping[str, Any] | None
) -> None:
    """Failure reasons of the previous generation (build failures, rejected proposals) and the resources
    (VGPRs, SGPRs, LDS bytes) of the kernels it built, attached to the kernels the digest lists."""
    if not build and not candidates:
        return
    params = {k["id"]: k["params"] for k in (candidates or {}).get("kernels", [])}
    failures = [
        {
            "id": b["id"],
            "class": b["status"],
            "reason": str(b.get("reason", ""))[:300],
            "params": params.get(b["id"]),
        }
        for b in (build or {}).get("kernels", [])
        if b.get("status") != "ok"
    ]
    failures += [
        {"class": r.get("class"), "reason": str(r.get("reason", ""))[:300], "proposer": r.get("proposer"),
         "params": r.get("params")}
        for r in (candidates or {}).get("rejected", [])
    ]  # fmt: skip
    digest["last_generation_failures"] = failures[:MAX_FAILURES]
    resources = {b["id"]: b["resources"] for b in (build or {}).get("kernels", []) if b.get("resources")}
    for entry in digest.get("tried", []):
        if entry.get("id") in resources:
            entry["resources"] = resources[entry["id"]]

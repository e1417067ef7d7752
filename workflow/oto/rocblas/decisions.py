"""What verify decided, applied to a library's final winners: light on imports, since every logic job (and
the merge's) loads it. The decisions themselves: :mod:`oto.rocblas.verify` and :mod:`oto.rocblas.night`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def apply_replacements(final: Mapping[str, Any], library_verify: Mapping[str, Any] | None) -> dict[str, Any]:
    """``final`` with every size verify took a kernel out of given to its replacement (``library_verify``:
    verify.yaml's entry of the library; None or no changes: ``final`` unchanged). A replacement without a
    kernel leaves the size without a winner: no row, Tensile serves it from the nearest size's."""
    repl = {int(k): v for k, v in ((library_verify or {}).get("replacements") or {}).items()}
    if not repl:
        return dict(final)
    per_size = []
    for r in final["per_size"]:
        i = int(r["size_index"])
        if i in repl:
            r = {**r, "winner": repl[i]["kernel"], "gflops": repl[i]["gflops"], "verify": repl[i]["how"]}
        per_size.append(r)
    kernels = {**final["kernels"], **{v["kernel"]: v["params"] for v in repl.values() if v["kernel"]}}
    used = {r["winner"] for r in per_size if r.get("winner")}
    return {**final, "per_size": per_size, "kernels": {k: v for k, v in kernels.items() if k in used}}

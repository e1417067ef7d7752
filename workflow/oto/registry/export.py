"""Export and query the store: Kernel Tuner T4 results (``oto registry export-t4``) and counts
(``oto registry summary``)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import oto
from oto.registry.records import RegistryError
from oto.registry.store import Store


def export_t4(store: Path, out: Path, arch: str | None = None, library: str | None = None) -> dict[str, Any]:
    """Write the registry's measurements as Kernel Tuner T4 results (schema 1.0.0).

    One result per (kernel, library, size) measurement or failure; ``configuration`` holds the Tensile
    parameters plus the problem (library, size) so results of different problems stay distinct."""
    if Path(out).is_dir():
        raise RegistryError(f"{out}: a folder; name the T4 JSON file to write (e.g. {Path(out) / 't4.json'})")
    db = Store(store)
    where, params = ["kind IN ('benchmarked', 'failed', 'rejected')"], []
    if arch:
        where.append("arch = ?")
        params.append(arch)
    if library:
        where.append("library = ?")
        params.append(library)
    rows = db.query(f"SELECT * FROM records WHERE {' AND '.join(where)} ORDER BY recorded_at", params)
    held = {
        k: sorted({r[k] for r in db.query(f"SELECT DISTINCT {k} FROM records", [])})
        for k in ("arch", "library")
    }
    db.close()
    for key, wanted in (("arch", arch), ("library", library)):
        if wanted and wanted not in held[key]:
            known = ", ".join(map(str, held[key][:10])) + (" ..." if len(held[key]) > 10 else "")
            raise RegistryError(f"{store}: --{key} {wanted}: the store has no record of it (it has: {known})")
    invalidity = {"illegal": "constraints", "duplicate": "constraints", "timeout": "timeout"}
    results = []
    for r in rows:
        ok = r["kind"] == "benchmarked"
        conf = {**json.loads(r["params"] or "{}"), "library": r["library"], "size": r["size"]}
        status = r["status"] or ""
        inval = "correct" if ok else invalidity.get(status, "runtime" if r["kind"] == "failed" else "compile")
        if status == "validation_failed":
            inval = "correctness"
        t_ms = (r["time_us"] or 0.0) / 1000.0
        results.append(
            {
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r["recorded_at"] or 0)),
                "configuration": conf,
                "times": {"runtimes": [t_ms] if ok else [], "compilation": 0, "framework": 0},
                "invalidity": inval,
                "correctness": 1 if ok else 0,
                "measurements": [
                    {"name": "time", "value": t_ms if ok else 0.0, "unit": "ms"},
                    {"name": "score", "value": r["score"] or 0.0, "unit": "ratio to reference"},
                    {"name": "GFLOP/s", "value": r["gflops"] or 0.0, "unit": "GFLOP/s"},
                ],
                "objectives": ["time"],
                "metadata": {
                    "kernel_id": r["kernel_id"],
                    "arch": r["arch"],
                    "generation": r["generation"],
                    "proposer": r["proposer"],
                    "backend": r["backend"],
                    "numbers": r["numbers"],
                    "protocol": r["protocol"],
                },
            }
        )
    numbers = sorted({str(r["numbers"]) for r in rows})  # said at the top too: simulated is no measurement
    doc = {"schema_version": "1.0.0", "metadata": {"tool": f"oto {oto.__version__}", "numbers": numbers},
           "results": results}  # fmt: skip
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return {"results": len(results), "out": str(out)}


def main(argv: Sequence[str] | None = None) -> int:
    """``oto registry export-t4 STORE OUT [--arch A] [--library L]`` and ``oto registry summary STORE``."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(
        prog="oto registry",
        description="The experiment registry: every proposal, rejection, build and measurement of the runs "
        "in a results folder (results/<arch>/registry/registry.sqlite, merged by rule registry).",
    )
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{export-t4,summary}")
    store_help = "the registry store, e.g. results/gfx90c/registry/registry.sqlite"
    ex = sub.add_parser(
        "export-t4",
        help="write the registry as Kernel Tuner T4 results JSON",
        description="Write the registry as Kernel Tuner T4 results JSON for tools that read T4: one result "
        "per measured, failed or rejected (kernel, library, size) with its time (ms), score against the "
        "spoof floor and GFLOP/s; kernel id, proposer, backend, numbers and protocol in its metadata.",
    )
    ex.add_argument("store", type=Path, help=store_help)
    ex.add_argument("out", type=Path, help="the T4 JSON file to write")
    ex.add_argument("--arch", help="only this GPU (e.g. gfx90c; default: every arch in the store)")
    ex.add_argument(
        "--library", help="only this library (e.g. Cijk_Ailk_Bljk_DB; default: every library in the store)"
    )
    su = sub.add_parser(
        "summary",
        help="record counts of a registry store",
        description="Print the store's record counts by kind, and how many libraries and kernels it "
        "holds, as JSON.",
    )
    su.add_argument("store", type=Path, help=store_help)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "export-t4":
            res = export_t4(args.store, args.out, args.arch, args.library)
            print(f"wrote {res['results']} T4 results to {res['out']}")
        else:
            db = Store(args.store)
            print(json.dumps(db.summary(), indent=1))
            db.close()
    except RegistryError as exc:
        print(f"oto registry: {exc}", file=sys.stderr)
        return 2
    return 0

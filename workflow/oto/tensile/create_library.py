"""TensileCreateLibrary packaging: tuned logic files → the code objects and libraries rocBLAS loads.

Runs ``TensileCreateLibrary`` (through tensile_runtime.py, which registers gfx90c when the installed Tensile
lacks it) the way rocBLAS builds its own libraries: lazy loading, separate architectures, msgpack. The
outputs go flat into ``results/<arch>/library/``:

- ``TensileLibrary_lazy_<label>.dat``: the parent library (hardware predicate → placeholders);
- ``TensileLibrary_Type_<...>_<label>.dat``: one child per problem type (solutions, Matching table);
- ``TensileLibrary_<...>_<label>.co`` (assembly kernels) and ``.hsaco`` (HIP-source and helper kernels).

The label is the architecture the files claim (:mod:`oto.tensile.labels`): the tuned arch (native, e.g.
``gfx90c``: needs a rocBLAS/Tensile host that knows it) or its stock library's (``gfx900`` for gfx90c: a
drop-in for stock rocBLAS, run with HSA_OVERRIDE_GFX_VERSION=9.0.0); the logic stage already named and
labelled the logic files accordingly.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from oto.config import config_defaults

log = logging.getLogger(__name__)

FLAGS = (
    "--no-enumerate",
    "--merge-files",
    "--separate-architectures",
    "--lazy-library-loading",
    "--library-format=msgpack",
)
KEEP = (".dat", ".co", ".hsaco")


class PackagingError(RuntimeError):
    pass


def tcl_command(
    arch_label: str,
    logic_dir: Path,
    out_dir: Path,
    tensile_cfg: Mapping[str, Any],
    jobs: int,
    register: Sequence[str] = (),
):
    """The TensileCreateLibrary command line; ``register``: runtime.py's --oto-register options (from the
    arch profile, :func:`oto.tensile.install.register_args`)."""
    from oto.tensile.install import tensile_command

    prefix = tensile_command(tensile_cfg)
    if prefix is None:
        return None

    compiler = list(tensile_cfg.get("compiler_args") or config_defaults("tensile")["compiler_args"])
    # TensileCreateLibrary spells the options with '='
    tcl_args = [f"{a}={b}" for a, b in zip(compiler[::2], compiler[1::2], strict=False)]
    return [
        *prefix,
        "tcl",
        *register,
        *FLAGS,
        *tcl_args,
        f"--architecture={arch_label}",
        f"--jobs={max(1, jobs)}",
        str(logic_dir.resolve()),
        str(out_dir.resolve()),
        "HIP",
    ]


def build_library(
    logic_paths: Sequence[Path],
    arch_label: str,
    library_dir: Path,
    tensile_cfg: Mapping[str, Any],
    prefix: str,
    jobs: int = 0,
    timeout_s: float = 6 * 3600,
    register: Sequence[str] = (),
) -> dict[str, Any]:
    """Run TensileCreateLibrary on ``logic_paths``; return the manifest (files, command, seconds).

    ``arch_label`` and ``prefix`` are the label's architecture and logic-file prefix
    (:func:`oto.tensile.labels.logic_label`): TensileCreateLibrary picks the files of an architecture by the
    prefix its architectureMap names (gfx900 → vega10; gfx90c is registered under its own name).

    Raises PackagingError naming the log when Tensile fails; a missing Tensile returns ``{}``."""
    library_dir = Path(library_dir)
    work = library_dir / ".tcl"
    if work.exists():
        shutil.rmtree(work)
    logic_dir, out_dir = work / "logic", work / "out"
    logic_dir.mkdir(parents=True)
    for p in logic_paths:
        p = Path(p)
        if not p.name.startswith(prefix):
            raise PackagingError(
                f"{p}: logic file name does not start with {prefix!r}, so TensileCreateLibrary "
                f"--architecture={arch_label} would skip it (label and logic stage disagree)"
            )
        shutil.copy(p, logic_dir / p.name)
    cmd = tcl_command(arch_label, logic_dir, out_dir, tensile_cfg, jobs or (os.cpu_count() or 1), register)
    if cmd is None:
        shutil.rmtree(work)
        return {}
    log_path = library_dir / "tensile_create_library.log"
    # TensileCreateLibrary leaves its scratch (build_tmp/, the assembler probe's a.out) in its working
    # folder: run it in the work folder removed below, not in the project (every path it gets is absolute).
    cmd = [_absolute(c) for c in cmd]
    t0 = time.monotonic()
    with open(log_path, "w") as fh:
        fh.write("$ " + shlex.join(cmd) + "\n")
        fh.flush()
        try:
            run = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s, cwd=work)
            rc = run.returncode
        except subprocess.TimeoutExpired:
            rc = None
    seconds = time.monotonic() - t0
    produced = sorted(p for p in (out_dir / "library").glob("*") if p.suffix in KEEP)
    if rc != 0 or not any(p.suffix == ".dat" for p in produced):
        tail = " | ".join(ln.strip() for ln in log_path.read_text(errors="replace").splitlines()[-4:])
        raise PackagingError(
            f"TensileCreateLibrary --architecture={arch_label} failed (rc {rc}); log {log_path}: {tail}"
        )
    for old in library_dir.glob("TensileLibrary*"):
        if old.suffix in KEEP:
            old.unlink()
    files = []
    for p in produced:
        shutil.move(str(p), library_dir / p.name)
        files.append(p.name)
    shutil.rmtree(work)
    return {"label": arch_label, "files": files, "command": shlex.join(cmd), "seconds": round(seconds, 1)}


def _absolute(arg: str) -> str:
    """A relative path to an existing file (a configured ``tensile.python`` such as ``.venv/bin/python``)
    made absolute, so the command still finds it from another working folder; any other argument as is."""
    relative = os.sep in arg and not os.path.isabs(arg) and Path(arg).exists()
    return str(Path(arg).resolve()) if relative else arg

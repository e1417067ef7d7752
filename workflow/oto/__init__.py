"""oto: tuned rocBLAS/Tensile GEMM libraries for AMD GPUs that ship without them."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

__version__ = "0.1.0"


@functools.cache
def source_commit() -> str | None:
    """The git commit of this oto checkout (``-dirty`` where it has uncommitted changes), None outside one
    (an installed copy) or without git: what a hand-off names so that its run can be made again."""
    root = Path(__file__).resolve().parents[2]  # the checkout: workflow/oto/ is two folders down
    if not (root / ".git").exists():
        return None  # not oto's own checkout (another repository may hold an installed copy)
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12", "--exclude", "*"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None

"""Make the oto package importable from this checkout, also in a conda env that does not install it.

Snakemake puts the scripts/ folder on sys.path, so every rule script starts with ``import _oto``.
"""

import sys
from pathlib import Path

_SRC = str(Path(__file__).resolve().parents[1] / "workflow")
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

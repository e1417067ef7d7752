"""Make the oto package importable from this checkout, also in a conda env that does not install it.

Snakemake puts the scripts/ folder on sys.path, so every rule script starts with ``import _oto``.
"""

import sys
from pathlib import Path

_SRC = str(Path(__file__).resolve().parents[1] / "workflow")
# First, even when it is on the path already: Snakemake appends the parent process's path to a script's, so
# an installed oto (an editable install of another checkout) would otherwise win over this checkout's.
if _SRC in sys.path:
    sys.path.remove(_SRC)
sys.path.insert(0, _SRC)

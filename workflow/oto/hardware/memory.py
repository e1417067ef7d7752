"""Memory guard: sizes whose buffers exceed the device memory the arch profile says is usable.

A gfx90c APU could not allocate 2 GB in the field; a benchmark that asks for more hangs or kills the GPU
context. The benchmark stage asks this module before any backend runs, and records the skipped launches as
``too_large`` samples with the reason, so every backend (sim, tensile) behaves the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oto.gemm import Family, Library


def footprint_bytes(library: Library | str, m: int, n: int, batch: int, k: int) -> int:
    """Device memory of one problem: A (m×k), B (k×n), C and D (m×n), per batch."""
    lib = Library.parse(library) if isinstance(library, str) else library
    f = lib.family if isinstance(lib.family, Family) else Family.parse(lib.family)
    return int(batch) * ((int(m) * int(k) + int(k) * int(n)) * f.a.bytes + 2 * int(m) * int(n) * f.dest.bytes)


PROFILE_FIELDS = ("memory.usable_device_memory_bytes",)  # what the guard reads (oto.run.profile_views)


def usable_bytes(profile: Mapping[str, Any]) -> int:
    return int(profile["memory"]["usable_device_memory_bytes"])


def oversize(library: Library | str, sizes: Sequence, profile: Mapping[str, Any]) -> dict[int, str]:
    """{size index: reason} for every size (``[m, n, batch, k]`` or an object with ``as_list``) that does not
    fit in the profile's usable device memory."""
    limit = usable_bytes(profile)
    out = {}
    for i, s in enumerate(sizes):
        m, n, b, k = (s.as_list() if hasattr(s, "as_list") else list(s))[:4]
        need = footprint_bytes(library, m, n, b, k)
        if need > limit:
            out[i] = (
                f"A+B+C+D need {need / 2**30:.2f} GiB > usable device memory {limit / 2**30:.2f} GiB "
                "(arch profile memory.usable_device_memory_bytes); skipped"
            )
    return out

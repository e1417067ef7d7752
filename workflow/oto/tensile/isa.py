"""What Tensile 4.44 knows of an ISA, as far as its solution rules read it, and which ISAs oto's legality
rules model.

Tensile decides whether a solution is valid from two tables (ROCm/Tensile:Tensile/Common.py at a164ed70):

- **AsmCaps**, its assembler probe (``GetAsmCaps``), compared at start-up with the cache in
  ``Tensile/AsmCaps.py`` (``getCapabilitiesCache``, the ROCm <= 6.3 table): which instructions the assembler
  takes for the ISA (MFMA, WMMA, dot, atomic add...). An ISA Tensile lacks gets a copy of its donor's entry
  when oto registers it at run time (``tensile.caps_from`` of the arch profile, ``oto.tensile.runtime``).
- **ArchCaps**, hard-coded per ISA (``GetArchCaps``): wave32 support (GFX10+), the ECC-half rules
  (gfx906/908/90a/942). These come from the ISA itself, registered or not.

Only the flags ``oto.tensile.legality`` reads are kept here. A kernel in HIP source gets ISA (0, 0, 0) in
Tensile, whose caps are all false (:data:`SOURCE_CAPS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Isa = tuple[int, int, int]


class UnknownIsa(ValueError):
    """An ISA oto's legality rules do not model, or a donor Tensile has no capabilities for. ``field`` is the
    arch-profile field that names it (``isa`` or ``tensile.caps_from``)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class IsaCaps:
    """The capabilities Tensile's ``Solution()`` reads for a kernel assembled for ``isa``."""

    isa: Isa  # the kernel's ISA (ArchCaps are its own)
    caps_from: Isa  # whose AsmCaps it takes: itself, or the donor it is registered with
    family: str  # the rule family of oto.tensile.legality (RULE_FAMILIES)
    # AsmCaps
    has_mfma: bool = False
    has_wmma: bool = False
    has_atomic_add: bool = False
    v_dot2_f32_f16: bool = False
    v_dot4_i32_i8: bool = False  # any of v_dot4_i32_i8, v_dot4c_i32_i8, VOP3 v_dot4_i32_i8
    # ArchCaps
    has_wave32: bool = False
    has_ecc_half: bool = False

    @property
    def wavefront_sizes(self) -> tuple[int, ...]:
        return (32, 64) if self.has_wave32 else (64,)


# Tensile's AsmCaps cache (Tensile/AsmCaps.py, ROCm <= 6.3) for the ISAs whose rules oto models, reduced to
# the flags above. The v_dot4 flag joins v_dot4_i32_i8, v_dot4c_i32_i8 and VOP3v_dot4_i32_i8.
_ASM_CAPS: dict[Isa, dict[str, bool]] = {
    (9, 0, 0): {},
    (9, 0, 6): {"v_dot2_f32_f16": True, "v_dot4_i32_i8": True},
    (10, 3, 0): {"v_dot2_f32_f16": True, "v_dot4_i32_i8": True},
    (10, 3, 1): {"v_dot2_f32_f16": True, "v_dot4_i32_i8": True},
    (11, 0, 0): {"has_wmma": True, "has_atomic_add": True, "v_dot2_f32_f16": True},
    (11, 0, 1): {"has_wmma": True, "has_atomic_add": True, "v_dot2_f32_f16": True},
    (11, 0, 2): {"has_wmma": True, "has_atomic_add": True, "v_dot2_f32_f16": True},
    (11, 5, 1): {"has_wmma": True, "has_atomic_add": True, "v_dot2_f32_f16": True},
}

# The ISA families whose solution rules oto.tensile.legality models (and checks against Tensile's own
# Solution(): bench/RESULTS.md). MFMA ISAs (gfx908, gfx90a, gfx94x), RDNA1 (gfx101x) and gfx12 are not.
RULE_FAMILIES: tuple[tuple[str, Callable[[Isa], bool]], ...] = (
    ("gfx9 (GCN5, no matrix instructions)", lambda isa: isa[:2] == (9, 0) and isa[2] not in (8, 10)),
    ("gfx10.3 (RDNA2)", lambda isa: isa[:2] == (10, 3)),
    ("gfx11 (RDNA3, RDNA3.5)", lambda isa: isa[0] == 11),
)


def isa_name(isa: Isa) -> str:
    """``(11, 0, 3)`` -> ``gfx1103`` (Tensile's gfxName: the last two digits are hex)."""
    return f"gfx{isa[0]}{isa[1]:x}{isa[2]:x}"


def rule_family(isa: Isa) -> str | None:
    return next((name for name, member in RULE_FAMILIES if member(tuple(isa))), None)


def _arch_caps(isa: Isa) -> dict[str, bool]:
    """Tensile's GetArchCaps, the flags legality reads."""
    return {
        "has_wave32": isa[0] in (10, 11, 12),
        "has_ecc_half": isa in ((9, 0, 6), (9, 0, 8), (9, 0, 10), (9, 4, 2)),
    }


def isa_caps(isa: Isa, caps_from: Isa | None = None) -> IsaCaps:
    """The caps of a kernel for ``isa`` whose assembler caps come from ``caps_from`` (default: itself).

    Raises :class:`UnknownIsa` when the legality rules do not model the ISA's family, or when Tensile has no
    cache entry for the donor or the donor belongs to another family (its caps would be the wrong ISA's)."""
    isa = tuple(int(x) for x in isa)
    donor = tuple(int(x) for x in caps_from) if caps_from is not None else isa
    family = rule_family(isa)
    known = ", ".join(name for name, _ in RULE_FAMILIES)
    if family is None:
        raise UnknownIsa(
            "isa",
            f"{list(isa)} ({isa_name(isa)}): oto.tensile.legality has no rules for this ISA "
            f"(it models {known})",
        )
    if donor not in _ASM_CAPS or rule_family(donor) != family:
        same = sorted(isa_name(i) for i in _ASM_CAPS if rule_family(i) == family)
        raise UnknownIsa(
            "tensile.caps_from",
            f"{isa_name(donor)}: Tensile's assembler capabilities for {isa_name(isa)} must come from an "
            f"ISA of the same family that Tensile knows ({family}: {', '.join(same)})",
        )
    return IsaCaps(isa=isa, caps_from=donor, family=family, **_ASM_CAPS[donor], **_arch_caps(isa))


def caps_donor(isa: Isa) -> Isa:
    """The ISA whose AsmCaps a kernel for ``isa`` takes when nothing says which: itself where Tensile has
    them, else the nearest lower ISA of its family that Tensile knows (gfx1103 -> gfx1102), else the nearest
    higher one. Reading a logic file needs this; a run's donor is the profile's ``tensile.caps_from``."""
    isa = tuple(int(x) for x in isa)
    if isa in _ASM_CAPS:
        return isa
    family = rule_family(isa)
    same = sorted(i for i in _ASM_CAPS if family is not None and rule_family(i) == family)
    if not same:
        isa_caps(isa)  # raises, naming the ISA
    lower = [i for i in same if i < isa]
    return lower[-1] if lower else same[0]


# HIP-source kernels: Tensile sets their ISA to (0, 0, 0), whose AsmCaps and ArchCaps are all false.
SOURCE_CAPS = IsaCaps(isa=(0, 0, 0), caps_from=(0, 0, 0), family="source")

"""Tensile data types, family codes and problem-type names.

A *library* is one shipped logic file: a problem type such as ``Cijk_Ailk_Bljk_HHS_BH``. Its *family* is the
datatype code after the index string (``HHS_BH``) and its *pattern* is the transpose pair (``NN``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


# Tensile's DataType enum (ROCm/Tensile:Tensile/DataType.py) and the properties oto needs of each.
#   rate_class: which entry of an arch profile's per-datatype rates the MAC runs at.
@dataclass(frozen=True)
class DataType:
    char: str
    enum: int
    name: str  # Tensile's C++ spelling in .dat predicates
    bytes: int
    complex: bool = False
    packing: int = 1  # elements of the base type one element packs (Int8x4: 4 int8 values per 32 bits)

    @property
    def registers(self) -> float:
        """32-bit registers per element (DataType.py ``properties[...]['reg']``): 0.25 for Int8."""
        return self.bytes / 4


DATATYPES = {
    "S": DataType("S", 0, "Float", 4),
    "D": DataType("D", 1, "Double", 8),
    "C": DataType("C", 2, "ComplexFloat", 8, complex=True),
    "Z": DataType("Z", 3, "ComplexDouble", 16, complex=True),
    "H": DataType("H", 4, "Half", 2),
    "4xi8": DataType("4xi8", 5, "Int8x4", 4, packing=4),
    "I": DataType("I", 6, "Int32", 4),
    "B": DataType("B", 7, "BFloat16", 2),
    "I8": DataType("I8", 8, "Int8", 1),
}
BY_ENUM = {d.enum: d for d in DATATYPES.values()}
_BY_SPELLING = {
    **{k.lower(): d for k, d in DATATYPES.items()},
    **{d.name.lower(): d for d in DATATYPES.values()},
}

# (A/B, C/D, compute) triples whose problem-type name spells out the dest and compute types
# (Common.py ``HPATypes``, the 8-bit float ones left out).
HPA_TYPES = frozenset(
    {
        ("H", "S", "S"),
        ("H", "H", "S"),
        ("B", "B", "S"),
        ("B", "S", "S"),
        ("I8", "I", "I"),
        ("4xi8", "I", "I"),
    }
)


def datatype(value: Any, *, bool_is_int: bool = False) -> DataType:
    """A Tensile DataType given as enum int, or as char or C++ name in any case (``s``, ``Half``, ``4xi8``).

    Logic files and ``.dat`` files use all three spellings. Anything else raises ``KeyError(value)``, a bool
    too unless ``bool_is_int``: Tensile's own ``DataType(value)`` takes a bool as the int it is (shipped files
    say ``F32XdlMathOp: false``), while oto's readers reject ``DataType: true`` in the fields they check.
    """
    if isinstance(value, DataType):
        return value
    if isinstance(value, bool) and not bool_is_int:
        raise KeyError(value)
    if isinstance(value, int):
        return BY_ENUM[value]
    if isinstance(value, str) and value.lower() in _BY_SPELLING:
        return _BY_SPELLING[value.lower()]
    raise KeyError(value)


PATTERNS = {"NN": ("Ailk", "Bljk"), "NT": ("Ailk", "Bjlk"), "TN": ("Alik", "Bljk"), "TT": ("Alik", "Bjlk")}
_PATTERN_OF = {v: k for k, v in PATTERNS.items()}

_FAMILY_RE = re.compile(
    r"^(?P<a>4xi8|I8|[SDCZHB])(?:(?P<dest>I8|[SDCZHBI])(?P<compute>[SDCZHBI])_)?B(?P<hpa>H)?"
    r"(?P<isab>I)?(?P<iscd>Ic)?(?P<gb>_GB)?$"
)
_LIBRARY_RE = re.compile(r"^Cijk_(?P<a>A(?:ilk|lik)C?)_(?P<b>B(?:ljk|jlk)C?)_(?P<family>.+)$")


class FamilyCodeError(ValueError):
    pass


@dataclass(frozen=True)
class Family:
    """A datatype family code such as ``SB``, ``HHS_BH`` or ``DB_GB``."""

    code: str
    a: DataType
    dest: DataType
    compute: DataType
    hpa: bool
    strided_batched: bool
    initial_strides_ab: bool
    initial_strides_cd: bool

    @classmethod
    def parse(cls, code: str) -> Family:
        m = _FAMILY_RE.match(code)
        if not m:
            raise FamilyCodeError(f"not a Tensile family code: {code!r}")
        a = DATATYPES[m["a"]]
        dest = DATATYPES[m["dest"]] if m["dest"] else a
        compute = DATATYPES[m["compute"]] if m["compute"] else dest
        return cls(code, a, dest, compute, bool(m["hpa"]), not m["gb"], bool(m["isab"]), bool(m["iscd"]))

    @property
    def rate_class(self) -> str:
        """Key of the arch profile's ``rates`` table the inner product runs at."""
        if self.a.char == "H":
            # HPA half (HHS/HSS) runs v_mad_mix_f32 at the FP32 rate; pure half uses packed v_pk_fma_f16.
            return "fp16_hpa" if self.hpa else "fp16_packed"
        return {
            "S": "fp32",
            "D": "fp64",
            "C": "fp32",
            "Z": "fp64",
            "B": "bf16",
            "I8": "int8",
            "4xi8": "int8",
            "I": "int32",
        }[self.a.char]

    @property
    def flops_per_mac(self) -> int:
        # A complex multiply-add is 4 real multiplies and 4 real adds; one Int8x4 multiply-add is 4 int8 ones
        # (Tensile's client counts 2 x packing, ContractionProblem::flopsPerMac), so the int8 rate applies.
        return 8 if self.a.complex else 2 * self.a.packing

    @property
    def workload(self) -> str:
        """Human name of the workload class used in ceilings and reports."""
        names = {
            "fp32": "FP32",
            "fp64": "FP64",
            "bf16": "BF16",
            "int8": "INT8",
            "int32": "INT32",
            "fp16_packed": "FP16 (packed)",
            "fp16_hpa": "FP16 HPA (FP32 accumulate)",
        }
        base = names[self.rate_class]
        return f"complex {base}" if self.a.complex else base


@dataclass(frozen=True)
class Library:
    """One tunable library: a family times a contraction pattern, named like Tensile's problem type."""

    name: str
    family: Family
    pattern: str
    conjugate_a: bool = False
    conjugate_b: bool = False

    @classmethod
    def parse(cls, name: str) -> Library:
        m = _LIBRARY_RE.match(name)
        if not m:
            raise FamilyCodeError(f"not a Tensile GEMM problem-type name: {name!r}")
        a, b = m["a"], m["b"]
        pattern = _PATTERN_OF[(a.rstrip("C"), b.rstrip("C"))]
        return cls(name, Family.parse(m["family"]), pattern, a.endswith("C"), b.endswith("C"))

    @classmethod
    def build(cls, family: str, pattern: str) -> Library:
        a, b = PATTERNS[pattern]
        return cls.parse(f"Cijk_{a}_{b}_{family}")

    @property
    def transpose_a(self) -> bool:
        return self.pattern[0] == "T"

    @property
    def transpose_b(self) -> bool:
        return self.pattern[1] == "T"

    @property
    def operation_identifier(self) -> str:
        """Tensile's ContractionProblem operation identifier, e.g. ``Contraction_l_Ailk_Bljk_Cijk_Dijk``."""
        a, b = PATTERNS[self.pattern]
        a += "C" if self.conjugate_a else ""
        b += "C" if self.conjugate_b else ""
        return f"Contraction_l_{a}_{b}_Cijk_Dijk"


def gemm_flops(family: Family, m: int, n: int, batch: int, k: int) -> float:
    return float(family.flops_per_mac) * m * n * batch * k

"""Tensile 4.44's default solution parameters: the one copy oto keeps of them.

``defaultBenchmarkCommonParameters`` (ROCm/Tensile:Tensile/Common.py at a164ed70, ``__version__`` 4.44.0) is
what every parameter a solution leaves out takes, both in a benchmark config and when TensileCreateLibrary
loads a logic file. Modules that need only some of the parameters take a :func:`subset` of this table, so a
value is stated once.

``oto.tensile.params.PARAMS`` defaults deliberately differ for four knobs (KernelLanguage Assembly, DepthU 16,
VectorWidth 4, LdsPadA/B 0): they are the concrete kernel a new candidate starts from, where Tensile's
Source and -1 ("derive it") say what a logic file that omits the key means. Never use them to fill a file.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

# In Tensile's order: the order of a solution's state, which fixes the order of the problem predicates TCL
# writes.
# fmt: off
_PARAMETERS: dict[str, Any] = {
    'LoopDoWhile': False, 'LoopTail': True, 'EdgeType': 'Branch', 'InnerUnroll': 1, 'LocalDotLayout': 1,
    'AggressivePerfMode': 1, 'PreloadKernelArguments': 0, 'KernelLanguage': 'Source', 'LdsPadA': -1,
    'LdsPadB': -1, 'LdsBlockSizePerPadA': -1, 'LdsBlockSizePerPadB': -1, 'TransposeLDS': 0,
    'UnrollMajorLDSA': False, 'UnrollMajorLDSB': False, 'ExtraMiLatencyLeft': 0, 'ExtraLatencyForLR': 0,
    'VgprForLocalReadPacking': False, 'ClusterLocalRead': False, 'MaxOccupancy': 40, 'VectorWidth': -1,
    'VectorWidthB': -1, 'VectorStore': -1, 'StoreVectorWidth': -1, 'GlobalLoadVectorWidthA': -1,
    'GlobalLoadVectorWidthB': -1, 'GlobalReadVectorWidth': -1, 'LocalReadVectorWidth': -1,
    'GlobalReadCoalesceVectorA': True, 'GlobalReadCoalesceVectorB': True, 'WaveSeparateGlobalReadA': 0,
    'WaveSeparateGlobalReadB': 0, 'GlobalReadCoalesceGroupA': True, 'GlobalReadCoalesceGroupB': True,
    'PrefetchGlobalRead': 1, 'PrefetchLocalRead': 1, 'UnrollMemFence': False, 'GlobalRead2A': True,
    'GlobalRead2B': True, 'LocalWrite2A': True, 'LocalWrite2B': True, 'LocalRead2A': True,
    'LocalRead2B': True, 'SuppressNoLoadLoop': False, 'ExpandPointerSwap': True, 'ScheduleGlobalRead': 1,
    'ScheduleLocalWrite': 1, 'ScheduleIterAlg': 1, 'OptPreLoopVmcnt': True, 'LdcEqualsLdd': False,
    'GlobalReadPerMfma': 1, 'LocalWritePerMfma': -1, 'InterleaveAlpha': 0, 'OptNoLoadLoop': 1,
    'PrefetchAcrossPersistent': 0, 'PrefetchAcrossPersistentMode': 0, 'BufferLoad': True,
    'BufferStore': True, 'DirectToVgprA': False, 'DirectToVgprB': False, 'DirectToLdsA': False,
    'DirectToLdsB': False, 'UseSgprForGRO': -1, 'UseInstOffsetForGRO': 0,
    'AssertSummationElementMultiple': 1, 'AssertFree0ElementMultiple': 1, 'AssertFree1ElementMultiple': 1,
    'AssertMinApproxSize': -1, 'AssertStrideAEqual': {}, 'AssertStrideBEqual': {},
    'AssertStrideCEqual': {}, 'AssertStrideDEqual': {}, 'AssertSizeEqual': {}, 'AssertSizeGreaterThan': {},
    'AssertSizeMultiple': {}, 'AssertSizeLessThan': {}, 'AssertAIGreaterThanEqual': -1,
    'AssertAILessThanEqual': -1, 'AssertAlphaValue': False, 'AssertBetaValue': False,
    'AssertCEqualsD': False, 'CheckTensorDimAsserts': False, 'CheckDimOverflow': 0, 'StaggerU': 32,
    'StaggerUStride': 256, 'StaggerUMapping': 0, 'MagicDivAlg': 2, 'GlobalSplitU': 1,
    'GlobalSplitUAlgorithm': 'SingleBuffer', 'GlobalSplitUSummationAssignmentRoundRobin': True,
    'GlobalSplitUWorkGroupMappingRoundRobin': False, 'GlobalSplitUAtomicAdd': False,
    'MacroTileShapeMin': 1, 'MacroTileShapeMax': 64, 'StreamK': 0, 'StreamKAtomic': 0,
    'StreamKXCCMapping': 0, 'DebugStreamK': 0, 'PersistentKernel': 0, 'PersistentKernelAlongBatch': False,
    'PackBatchDims': 0, 'PackFreeDims': 1, 'PackSummationDims': 0, 'UnrollIncIsDepthU': 0,
    'PackGranularity': 2, 'FractionalLoad': 0, 'Use64bShadowLimit': 1, 'VectorAtomicWidth': -1,
    'NumLoadsCoalescedA': 1, 'NumLoadsCoalescedB': 1, 'WorkGroup': [16, 16, 1],
    'WorkGroupMappingType': 'B', 'WorkGroupMapping': 8, 'ThreadTile': [4, 4], 'MACInstruction': 'FMA',
    'WavefrontSize': 64, 'MemoryModifierFormat': '', 'MatrixInstruction': [],
    'DisableVgprOverlapping': False, '1LDSBuffer': 0, 'DisableAtomicFail': 0, 'DisableKernelPieces': 0,
    'DepthU': -1, 'DepthULdsDivisor': 1, 'PerformanceSyncLocation': -1, 'PerformanceWaitLocation': -1,
    'PerformanceWaitCount': -1, 'NonTemporalD': 0, 'NonTemporalC': 0, 'NonTemporalA': 0, 'NonTemporalB': 0,
    'ForceStoreSC1': 'Auto', 'ReplacementKernel': False, 'CustomKernelName': '', 'NoReject': False,
    'MinVgprNumber': 0, 'MaxVgprNumber': 256, 'StoreRemapVectorWidth': 0, 'SourceSwap': False,
    'AtomicAddC': False, 'StorePriorityOpt': False, 'NumElementsPerBatchStore': 0, 'StoreSyncOpt': 0,
    'GroupLoadStore': False, 'MIArchVgpr': False, 'StoreCInUnroll': False, 'StoreCInUnrollInterval': 1,
    'StoreCInUnrollExact': False, 'StoreCInUnrollPostLoop': False, 'Fp16AltImpl': False,
    'Fp16AltImplRound': False, 'ThreadSeparateGlobalReadA': 0, 'ThreadSeparateGlobalReadB': 0,
    'MinKForGSU': 256,
}
# fmt: on

TENSILE_DEFAULTS: Mapping[str, Any] = MappingProxyType(_PARAMETERS)


def subset(names: Iterable[str], *, frozen: bool = False) -> dict[str, Any]:
    """Fresh copies of the defaults of ``names``, in that order; ``frozen`` turns lists into tuples."""
    out = {}
    for name in names:
        value = copy.deepcopy(TENSILE_DEFAULTS[name])
        out[name] = tuple(value) if frozen and isinstance(value, list) else value
    return out


# The Tensile version emitted benchmark configs require (the one verified here: research/tensile.md).
TENSILE_MIN_VERSION = "4.44.0"

# ProblemType keys a Tensile benchmark config takes; Tensile derives the rest. A TensorContraction (the
# initial-stride families SBIc/SBIIc) also needs CONTRACTION_PROBLEM_KEYS: its indices are not derived.
BENCHMARK_PROBLEM_KEYS = (
    "OperationType",
    "DataType",
    "DestDataType",
    "ComputeDataType",
    "HighPrecisionAccumulate",
    "TransposeA",
    "TransposeB",
    "ComplexConjugateA",
    "ComplexConjugateB",
    "UseBeta",
    "Batched",
    "StridedBatched",
    "UseInitialStridesAB",
    "UseInitialStridesCD",
)
CONTRACTION_PROBLEM_KEYS = ("NumIndicesC", "IndexAssignmentsA", "IndexAssignmentsB")


def benchmark_problem_type(problem_type: Mapping[str, Any]) -> dict[str, Any]:
    """The ProblemType of a benchmark config for a logic file's problem type: the keys Tensile takes (a
    TensorContraction's index assignments included), GEMM when the file does not say."""
    out = {k: _plain(problem_type[k]) for k in BENCHMARK_PROBLEM_KEYS if k in problem_type}
    out.setdefault("OperationType", "GEMM")
    if out["OperationType"] == "TensorContraction":
        missing = [k for k in CONTRACTION_PROBLEM_KEYS if k not in problem_type]
        if missing:
            raise ValueError(f"TensorContraction problem type lacks {', '.join(missing)}")
        out.update({k: _plain(problem_type[k]) for k in CONTRACTION_PROBLEM_KEYS})
    return out


def _plain(value: Any) -> Any:
    return [int(v) for v in value] if isinstance(value, list | tuple) else value

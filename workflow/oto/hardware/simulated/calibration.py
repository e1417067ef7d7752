"""Calibration of the simulated GPU against recorded real GFLOPS, and the fidelity figures that judge it.

Every exact-logic row ``[[M, N, batch, K, ...], [solution, GFLOPS]]`` of a shipped Tensile logic file is a
real measurement: the GFLOPS the file's winning solution reached at that size on the architecture the file
was tuned for. :func:`load_recorded` reads such a folder; :func:`fit` fits the simulator's physics
constants (:class:`~oto.hardware.simulated.performance.Physics`) and the chip's ``timing`` constants to the
rows of the *fit split* (:func:`held_back`); :func:`fidelity` computes the agreement figures that
``bench/sim_fidelity.py`` prints, on any rows. ``oto calibrate`` runs the fit and writes the physics file and
the profile's fitted chip constants.

A folder may mix measurement campaigns (:data:`CAMPAIGNS`, told apart by each row's winning solution): the
fit simulates a later campaign's rows at that campaign's operating point of the chip (the profile's
``timing.operating_points.<campaign>``, :func:`campaign_gpu`), fitted alongside the physics and written to
the profile, where the chip's constants live.

Flop counts: Tensile's client, and so every recorded GFLOPS, counts 2 flops per multiply-add, complex ones
included; oto counts 8 per complex MAC (``Family.flops_per_mac``). Rows are compared as *times*
(:func:`recorded_time_us` converts with Tensile's count), and every GFLOPS figure here uses oto's count.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import math
import re
import sys
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from oto.gemm import PATTERNS, Family, Library
from oto.hardware.simulated.performance import (
    DATATYPE_TABLES,
    ISA_KNOBS,
    MODEL_VERSION,
    PHYSICS_BOUNDS,
    PHYSICS_FILE,
    PHYSICS_RDNA_FILE,
    TIMING_BOUNDS,
    Chip,
    Physics,
    SimGPU,
    chip_bounds,
    chip_constants,
    datatype_key,
    physics_file,
    store_key,
)
from oto.numbers import spearman as rank_correlation
from oto.tensile.logic_reader import TENSILE_KNOB_DEFAULTS, read_logic_dir
from oto.tensile.params import PARAMS

# The shipped vega10 files hold rows of two measurement campaigns, told apart by the Tensile generation of
# each row's winning solution (never by its GFLOPS): "legacy" solutions predate StaggerU (no such field;
# 4-number rows, GFLOPS with decimals); "staggeru" solutions carry it (most also have 8-number rows with
# strides and integer GFLOPS). The second campaign measured about half the throughput of the first on every
# kernel shape, compute- and memory-bound alike (docs/simulator.md, "Two measurement campaigns"), so the
# calibration fits that board as an operating point of the chip (the profile's
# timing.operating_points.<campaign name>) instead of bending the physics to it. The first campaign's board
# is the one the profile's own timing figures describe (the default operating point).
#
# A third entry splits the second generation's rows by the client that timed them: "staggeru_old_client"
# rows are second-generation winners of a file written before Tensile's new benchmark client (its
# MinimumRequiredVersion below OLD_CLIENT_BEFORE). The old client timed each sample with host timers
# (Tensile's Common.py: ``KernelTime: False  # T=use device timers, F=use host timers``) and one enqueue per
# synchronisation (EnqueuesPerSync 1), so its times carry the host's launch and wake-up overhead; the new
# client (``NewClient`` 2) can spread a synchronisation over many enqueues. The board is the second
# campaign's (CAMPAIGN_BOARD): a chip fit frees only its launch (_campaign_knobs), and a profile that declares
# no point of its own for it simulates those rows at the second campaign's point (campaign_gpu), as before
# the split (vega10's gfx900).
CAMPAIGNS = ("legacy", "staggeru", "staggeru_old_client")
CAMPAIGN_BOARD = (0, 1, 1)  # the campaign whose board each campaign's rows ran on
# vega10's and vega20's files are Tensile 4.6-4.11 (old client) or 4.24-4.26 (new client only): any bound in
# (4.11, 4.24] splits them alike
OLD_CLIENT_BEFORE = (4, 20, 0)


def campaign_operating_point(campaign: int, declared: Container[str] | None = None) -> str:
    """Name of the profile operating point a campaign's rows were measured at, where the profile declares
    one under it (``declared``: the profile's operating points; a client variant falls back to its board's
    point, CAMPAIGN_BOARD); a campaign the profile declares none for ran at the profile's own figures
    (vega10's first campaign; vega20's second, whose board the gfx906 profile describes: chip_knobs)."""
    if declared is not None and CAMPAIGNS[campaign] not in declared:
        return CAMPAIGNS[CAMPAIGN_BOARD[campaign]]
    return CAMPAIGNS[campaign]


def solution_campaign(solution: Mapping[str, Any]) -> int:
    """Index into CAMPAIGNS of the Tensile generation a shipped solution comes from (0 or 1)."""
    return int("StaggerU" in solution)


def old_client(minimum_required_version: str) -> bool:
    """Whether a logic file of this MinimumRequiredVersion was timed by Tensile's old benchmark client."""
    parts = [int(x) for x in re.findall(r"\d+", str(minimum_required_version))[:3]]
    return tuple(parts + [0] * (3 - len(parts))) < OLD_CLIENT_BEFORE


def knobs_as_measured(solution: Mapping[str, Any]) -> dict[str, Any]:
    """The knobs a shipped solution ran with when its file's rows were measured.

    A first-generation solution (no ``StaggerU`` field) was written by a Tensile that had no StaggerU: its
    kernel started every workgroup's summation loop at the same address, i.e. StaggerU 0. Today's Tensile
    would build the same file with its default, 32, and that is what a spoof library runs
    (``oto.tensile.logic_reader.TENSILE_KNOB_DEFAULTS``); the recorded GFLOPS are of the kernel as it was."""
    knobs = {k: solution[k] for k in PARAMS if k in solution}
    # beyond the tunable knobs, what the model reads of a kernel: its dot layout (the MAC instruction,
    # mac_rate), wave size, matrix instruction and LDS layout (performance.ISA_KNOBS)
    knobs.update((k, solution[k]) for k in ISA_KNOBS if k in solution)
    if solution_campaign(solution) == 0:
        knobs["StaggerU"] = 0
    return knobs


TENSILE_FLOPS_PER_MAC = 2  # Tensile's client counts a complex MAC as 2 flops, like a real one


def client_flops_per_mac(family: Family, client: str = "new") -> int:
    """Flops per MAC behind a recorded GFLOPS figure. Tensile's C++ client ("new", what the vega10 files were
    measured with) counts 2 x the type's packing (``ContractionProblem::flopsPerMac``: a complex MAC is 2,
    an Int8x4 one 8); the Python-written client before it ("old") used ``DataType.flopsPerMac``: 2 for a
    real type, 8 for a complex one."""
    if client == "old":
        return 8 if family.a.complex else 2
    return TENSILE_FLOPS_PER_MAC * family.a.packing


# A recorded row above the chip's peak by more than this was not counted the way it is being read.
PEAK_SLACK = 1.05
WITHIN = 0.25  # a row agrees when sim/real GFLOPS is within 1 +- WITHIN
MIN_EFFICIENCY_GFLOP = 1.0  # efficiency ranks are taken on rows of at least this much work (oto's count)


# ---------------------------------------------------------------------------------------------- the rows
@dataclass
class RecordedFile:
    """The real measurements of one shipped logic file."""

    name: str  # file name
    library: Library
    solutions: list[dict[str, Any]]  # tunable knobs of each solution (file order = row index)
    asserts: np.ndarray  # (solutions, 3): AssertFree0/Free1/SummationElementMultiple
    sizes: np.ndarray  # (rows, 4): M, N, batch, K
    winner: np.ndarray  # (rows,): solution position of the row
    gflops_recorded: np.ndarray  # (rows,): as the file records them (Tensile's flop count)
    # (rows,): measurement campaign of each row (index into CAMPAIGNS), from its winner's Tensile generation
    campaign: np.ndarray | None = None
    # (solutions,): Tensile generation of each solution (index into CAMPAIGNS), told before knobs_as_measured
    generation: np.ndarray | None = None
    # flops per MAC of the client that recorded the GFLOPS (client_flops_per_mac; read_flop_counts)
    tensile_flops_per_mac: int | None = None
    # the file records each row's % of the device's peak, read as GFLOPS at the profile's (read_efficiency)
    efficiency_percent: bool = False

    def __post_init__(self) -> None:
        if self.tensile_flops_per_mac is None:
            self.tensile_flops_per_mac = client_flops_per_mac(self.library.family)
        if self.campaign is None:
            self.campaign = np.zeros(len(self.winner), dtype=np.int64)
        if self.generation is None:
            self.generation = np.array([solution_campaign(s) for s in self.solutions], dtype=np.int64)

    @property
    def family(self) -> str:
        return self.library.family.code

    @property
    def board(self) -> np.ndarray:
        """(rows,): the board each row ran on (index into CAMPAIGNS: its campaign's CAMPAIGN_BOARD)."""
        return np.asarray(CAMPAIGN_BOARD)[self.campaign]

    @property
    def real_time_us(self) -> np.ndarray:
        return recorded_time_us(self.sizes, self.gflops_recorded, self.tensile_flops_per_mac)

    def solutions_as_built(self) -> list[dict[str, Any]]:
        """Each solution's knobs as today's Tensile builds the file (what a spoof library runs): a
        first-generation solution gets Tensile's default StaggerU, not the 0 it was measured with."""
        stagger = TENSILE_KNOB_DEFAULTS["StaggerU"]
        pairs = zip(self.solutions, self.generation, strict=True)
        return [s if gen else {**s, "StaggerU": stagger} for s, gen in pairs]

    def valid(self) -> np.ndarray:
        """(solutions, rows): which solutions can run each size (their AssertElementMultiple hold)."""
        m, n, _, k = self.sizes.T
        a = self.asserts
        return (m[None] % a[:, :1] == 0) & (n[None] % a[:, 1:2] == 0) & (k[None] % a[:, 2:3] == 0)

    def won_at_same_k(self) -> np.ndarray:
        """(solutions, rows): which solutions won at least one row of the file with the row's K. A logic
        file merges benchmark groups, and Tensile keeps only solutions that won somewhere, so a solution that
        never won at a K may never have run at it (e.g. the vega10 SGEMM files' K = 128 rows were all won by
        HIP-source kernels, K = 256 ones all by assembly kernels). A diagnostic of the rival set only."""
        k = self.sizes[:, 3]
        out = np.zeros((len(self.solutions), len(k)), dtype=bool)
        for kv in np.unique(k):
            at = k == kv
            out[np.ix_(np.unique(self.winner[at]), np.nonzero(at)[0])] = True
        return out


def recorded_time_us(
    sizes: np.ndarray, gflops_recorded: np.ndarray, flops_per_mac: float = TENSILE_FLOPS_PER_MAC
) -> np.ndarray:
    """Launch time behind a recorded GFLOPS figure (default: Tensile's count, 2 per MAC, complex too)."""
    m, n, b, k = np.asarray(sizes, dtype=np.float64).T
    return flops_per_mac * m * n * b * k / (np.asarray(gflops_recorded, dtype=np.float64) * 1e3)


# A file of DeviceEfficiency figures: no row above 100 (%), and its rows of at least 1 GFLOP, read as GFLOPS,
# at a median below this share of the chip's peak (GFLOPS files of navi21 put them at 30-90%). It tells the
# two apart on chips of more than 10 TFLOPS (100% read as 100 GFLOPS is below 1% of their peak): the boards
# AMD tunes its logic on.
EFFICIENCY_FILE_PEAK_SHARE = 0.01


def read_efficiency(files: Sequence[RecordedFile], profile: Mapping[str, Any]) -> list[str]:
    """Read the files that record each row's efficiency, % of the device's peak, in place of its GFLOPS
    (rocBLAS's navi21 and navi31 folders hold both kinds; a Tensile run with PerformanceMetric
    DeviceEfficiency), as GFLOPS at the profile's datasheet peak of the file's type; returns their names.

    A file is one when no row exceeds 100 and its rows of at least 1 GFLOP, read as GFLOPS, run at a median
    below EFFICIENCY_FILE_PEAK_SHARE of that peak (they would take seconds): a rule on the file's own
    numbers and the datasheet, never a fit. The client's peak was taken at the clock it measured, which the
    files do not record: a board below its peak clock shows up in the fitted sustained clocks."""
    gpu = SimGPU(profile)
    out = []
    for f in files:
        if f.efficiency_percent or not len(f.winner) or f.gflops_recorded.max() > 100:
            continue
        fam = f.library.family
        m, n, b, k = f.sizes.T
        work = fam.flops_per_mac * m * n * b * k / 1e9
        big = work >= MIN_EFFICIENCY_GFLOP
        if not big.any():
            continue
        share = f.gflops_recorded[big] / gpu.peak_gflops(fam) * fam.flops_per_mac / f.tensile_flops_per_mac
        if np.median(share) < EFFICIENCY_FILE_PEAK_SHARE:
            # oto's peak in the client's flop count (they differ for complex types only)
            peak = gpu.peak_gflops(fam) * f.tensile_flops_per_mac / fam.flops_per_mac
            f.gflops_recorded = f.gflops_recorded / 100.0 * peak
            f.efficiency_percent = True
            out.append(f.name)
    return out


def read_flop_counts(files: Sequence[RecordedFile], profile: Mapping[str, Any]) -> list[str]:
    """Set each file's client flop count; returns the names of the files read with the old client's.
    Files of efficiency figures are read as GFLOPS first (:func:`read_efficiency`).

    A complex file's rows read with Tensile's C++ client's count (2 per MAC) that put any row above the
    profile's peak (by more than PEAK_SLACK) cannot be: its GFLOPS were counted by the older client (8 per
    complex MAC). That is a fact of each file's own numbers and the chip's datasheet peak, never of a fit."""
    read_efficiency(files, profile)
    gpu = SimGPU(profile)
    switched = []
    for f in files:
        fam = f.library.family
        new, old = client_flops_per_mac(fam, "new"), client_flops_per_mac(fam, "old")
        f.tensile_flops_per_mac = new
        if new == old or not len(f.winner):
            continue
        m, n, b, k = f.sizes.T
        eff = fam.flops_per_mac * m * n * b * k / f.real_time_us / 1e3 / gpu.peak_gflops(fam)
        if eff.max() > PEAK_SLACK:
            f.tensile_flops_per_mac = old
            switched.append(f.name)
    return switched


def load_recorded(logic_dir: str | Path) -> list[RecordedFile]:
    """Every exact row of every logic file in a folder (errors name the file: oto.tensile.logic_reader)."""
    out = []
    for lf in read_logic_dir(logic_dir):
        lib = Library.parse(lf.library_name)
        sols = [knobs_as_measured(s) for s in lf.solutions]
        asserts = np.array(
            [
                [int(s.get(f"Assert{name}ElementMultiple", 1)) for name in ("Free0", "Free1", "Summation")]
                for s in lf.solutions
            ],
            dtype=np.int64,
        ).reshape(-1, 3)
        rows = lf.exact_rows
        sizes = np.array([r[0][:4] for r in rows], dtype=np.float64).reshape(-1, 4)
        winner = np.array([r[1] for r in rows], dtype=np.int64)
        gflops = np.array([r[2] for r in rows], dtype=np.float64)
        generation = np.array([solution_campaign(s) for s in lf.solutions], dtype=np.int64)
        campaign = generation[winner]
        if old_client(lf.minimum_required_version):  # the second generation's rows, timed by the old client
            campaign = np.where(campaign == 1, 2, campaign)
        keep = gflops > 0  # a zero-GFLOPS row records no measurement
        out.append(
            RecordedFile(
                lf.path.name, lib, sols, asserts, sizes[keep], winner[keep], gflops[keep], campaign[keep],
                generation,
            )
        )  # fmt: skip
    return out


# --------------------------------------------------------------------------------------------- the split
def held_back(files: Sequence[RecordedFile]) -> set[str]:
    """The fixed split: names of the files reported on and never fitted.

    Families are numbered in the sorted order of their codes; family i holds back the files of patterns
    ``P[i % 4]`` and ``P[(i + 2) % 4]`` with P = NN, NT, TN, TT. So half of every four-pattern family is held
    back, the held-back patterns rotate between families, and a family's fit and held-back files share
    datatype physics but no solution list.
    """
    order = list(PATTERNS)
    families = sorted({f.family for f in files})
    out = set()
    for f in files:
        i = families.index(f.family)
        if f.library.pattern in (order[i % 4], order[(i + 2) % 4]):
            out.add(f.name)
    return out


def split(files: Sequence[RecordedFile]) -> tuple[list[RecordedFile], list[RecordedFile]]:
    """(fit, held back)."""
    back = held_back(files)
    return [f for f in files if f.name not in back], [f for f in files if f.name in back]


def chip_held_back(names: Sequence[str], family_of: Callable[[str], str]) -> set[str]:
    """The fixed split of a chip-constant fit (docs/simulator.md, "Judging a chip fit"): the files of each
    family, ordered by the SHA-256 (hex) of their file name, alternate fit, held back, fit, ...; returns the
    held-back names. A family of one file is fit only."""
    by_family: dict[str, list[str]] = {}
    for name in names:
        by_family.setdefault(family_of(name), []).append(name)
    back = set()
    for members in by_family.values():
        ordered = sorted(members, key=lambda n: hashlib.sha256(n.encode()).hexdigest())
        back.update(ordered[1::2])
    return back


def chip_split(files: Sequence[RecordedFile]) -> tuple[list[RecordedFile], list[RecordedFile]]:
    """(fit, held back) of a chip's own logic files (:func:`chip_held_back`)."""
    family = {f.name: f.family for f in files}
    back = chip_held_back([f.name for f in files], family.__getitem__)
    return [f for f in files if f.name not in back], [f for f in files if f.name in back]


# ------------------------------------------------------------------------------------------- simulation
def winner_times(
    gpu: SimGPU, f: RecordedFile, rows: np.ndarray | None = None, at_campaign_points: bool = True
) -> np.ndarray:
    """Simulated time of each row's winner (µs), one vectorised call per solution. With
    ``at_campaign_points``, the rows of a later measurement campaign are simulated at that campaign's
    operating point where the profile declares one (:func:`campaign_gpu`)."""
    idx = np.arange(len(f.winner)) if rows is None else rows
    return solution_times(gpu, f, idx, f.winner[idx], at_campaign_points)


def solution_times(
    gpu: SimGPU, f: RecordedFile, rows: np.ndarray, solutions: np.ndarray, at_campaign_points: bool = True
) -> np.ndarray:
    """Simulated time (µs) of solution ``solutions[j]`` at the size of row ``rows[j]``, each row at its
    campaign's operating point with ``at_campaign_points`` (:func:`campaign_gpu`); one vectorised call per
    (campaign, solution)."""
    out = np.empty(len(rows))
    fam, pat = f.library.family, f.library.pattern
    camp = f.campaign[rows]
    for c in np.unique(camp):
        g = campaign_gpu(gpu, int(c)) if at_campaign_points else gpu
        for s in np.unique(solutions[camp == c]):
            sel = (solutions == s) & (camp == c)
            m, n, b, k = f.sizes[rows[sel]].T
            out[sel] = g.true_time_us(fam, f.solutions[s], m, n, b, k, pat)
    return out


def campaign_gpu(gpu: SimGPU, campaign: int) -> SimGPU:
    """The simulated GPU at the operating point a measurement campaign's board ran at: the profile's
    ``timing.operating_points.<campaign name>`` (its clock per rate class, bandwidth, DRAM latency and launch
    relative to the profile's own figures). A campaign the profile declares no operating point for runs at
    the profile's own figures."""
    name = campaign_operating_point(campaign, gpu.operating_points)
    return gpu.at(name) if name in gpu.operating_points else gpu


def all_times(gpu: SimGPU, f: RecordedFile, at_campaign_points: bool = False) -> np.ndarray:
    """(solutions, rows): simulated time of every solution of the file at every row's size (with
    ``at_campaign_points``: each row at its campaign's operating point, :func:`campaign_gpu`)."""
    fam, pat = f.library.family, f.library.pattern
    out = np.empty((len(f.solutions), len(f.winner)))
    groups = np.unique(f.campaign) if at_campaign_points else [0]
    for c in groups:
        g = campaign_gpu(gpu, int(c)) if at_campaign_points else gpu
        sel = (f.campaign == c) if at_campaign_points else np.ones(len(f.winner), dtype=bool)
        m, n, b, k = f.sizes[sel].T
        for i, s in enumerate(f.solutions):
            out[i, sel] = g.true_time_us(fam, s, m, n, b, k, pat)
    return out


# ---------------------------------------------------------------------------------------------- figures
DEFAULT_POINT = "_default"  # column suffix of rows_frame's figures at the profile's own operating point


def rows_frame(gpu: SimGPU, files: Sequence[RecordedFile], ranks: bool = True) -> pd.DataFrame:
    """One row per recorded row: real and simulated GFLOPS (oto's count), efficiencies, winner's rank.

    ``sim_gflops``, ``sim_eff``, ``ratio``, ``faster`` and ``rank_pct`` simulate each row, its winner and its
    rivals, at the operating point of the row's measurement campaign (:func:`campaign_gpu`); the same columns
    suffixed ``_default`` (:data:`DEFAULT_POINT`) simulate every row at the profile's own figures. They are
    equal where the profile declares no operating point for a row's campaign."""
    parts = []
    for f in files:
        fam = f.library.family
        m, n, b, k = f.sizes.T
        flops = fam.flops_per_mac * m * n * b * k
        real = f.real_time_us
        peak = gpu.peak_gflops(fam)
        part = pd.DataFrame(
            {
                "file": f.name,
                "family": f.family,
                "campaign": [CAMPAIGNS[c] for c in f.campaign],
                "m": m,
                "n": n,
                "batch": b,
                "k": k,
                "solution": f.winner,
                "gflop": flops / 1e9,
                "real_gflops": flops / real / 1e3,
                "real_eff": flops / real / 1e3 / peak,
            }
        )  # fmt: skip
        shifted = any(campaign_gpu(gpu, int(c)) is not gpu for c in np.unique(f.campaign))
        for suffix, at_points in (("", True), (DEFAULT_POINT, False)):
            if suffix == DEFAULT_POINT and not shifted:
                for col in ("sim_gflops", "sim_eff", "faster", "rank_pct", "rank_pct_same_k", "gap"):
                    part[col + suffix] = part[col]
                continue
            if ranks:
                t = all_times(gpu, f, at_points)
                sim = t[f.winner, np.arange(len(m))]
                valid = f.valid()
                faster = ((t < sim[None]) & valid).sum(axis=0)
                pct = faster / np.maximum(valid.sum(axis=0) - 1, 1)
                sweep = valid & f.won_at_same_k()
                pct_sweep = ((t < sim[None]) & sweep).sum(axis=0) / np.maximum(sweep.sum(axis=0) - 1, 1)
                gap = sim / np.where(valid, t, np.inf).min(axis=0)  # the winner is valid: gap >= 1
            else:
                sim = winner_times(gpu, f, at_campaign_points=at_points)
                faster = pct = pct_sweep = gap = np.full(len(m), np.nan)
            part["sim_gflops" + suffix] = flops / sim / 1e3
            part["sim_eff" + suffix] = flops / sim / 1e3 / peak
            part["faster" + suffix] = faster
            part["rank_pct" + suffix] = pct
            part["rank_pct_same_k" + suffix] = pct_sweep
            part["gap" + suffix] = gap
        parts.append(part)
    df = pd.concat(parts, ignore_index=True)
    for suffix in ("", DEFAULT_POINT):
        df["ratio" + suffix] = df["sim_gflops" + suffix] / df["real_gflops"]
    return df


def spearman(a, b) -> float:
    """:func:`oto.numbers.spearman`, NaN below three rows."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float("nan") if len(a) < 3 else rank_correlation(a, b)


def figures(df: pd.DataFrame, suffix: str = "") -> dict[str, float]:
    """The agreement figures of a set of rows (see bench/sim_fidelity.py for their meaning): each row at its
    campaign's operating point, or with ``suffix=DEFAULT_POINT`` at the profile's own figures."""
    r = df["ratio" + suffix].to_numpy()
    big = df["gflop"] >= MIN_EFFICIENCY_GFLOP
    q25, q50, q75 = np.percentile(r, [25, 50, 75]) if len(r) else (math.nan,) * 3
    out = {
        "rows": len(df),
        "within_25pct": float(np.mean((r >= 1 - WITHIN) & (r <= 1 + WITHIN))) if len(r) else math.nan,
        "median_ratio": float(q50),
        "ratio_q25": float(q25),
        "ratio_q75": float(q75),
        "efficiency_rows": int(big.sum()),
        "efficiency_spearman": spearman(df.loc[big, "real_eff"], df.loc[big, "sim_eff" + suffix]),
    }
    pct = df["rank_pct" + suffix].dropna()
    if len(pct):
        out["winner_rank_percentile_median"] = float(np.median(pct) * 100)
        out["winner_first_share"] = float(np.mean(df["faster" + suffix].dropna() == 0))
        out["winner_top10pct_share"] = float(np.mean(pct <= 0.10))
        # diagnostic: the rank among rivals that won at the row's K somewhere in the file (won_at_same_k)
        same_k = df["rank_pct_same_k" + suffix].dropna()
        out["winner_rank_percentile_same_k_median"] = float(np.median(same_k) * 100)
        # diagnostic: how far behind the simulator's fastest runnable solution it puts the winner (1 = first)
        gap = df["gap" + suffix].dropna()
        out["winner_gap_median"] = float(np.median(gap))
        out["winner_within_5pct_share"] = float(np.mean(gap <= 1.05))
    return out


def fidelity(df: pd.DataFrame, suffix: str = "") -> dict[str, Any]:
    """Overall and per-family figures."""
    return {
        "overall": figures(df, suffix),
        "families": {
            fam: figures(part, suffix) for fam, part in sorted(df.groupby("family"), key=lambda x: x[0])
        },
    }


# -------------------------------------------------------------------------------------------------- fit
@dataclass(frozen=True)
class Knob:
    """One fitted constant: where it lives and the bounds the fit keeps it in."""

    # physics field, physics field.key, chip:<timing key>, chip:sustained_clock_mhz.<class>, or
    # operating_point:<name>.clock.<rate class>|bandwidth|memory_latency|launch (the profile's
    # timing.operating_points.<name>: the board a later measurement campaign ran on, see CAMPAIGNS)
    name: str
    lo: float
    hi: float


# Reference datatypes of each rate class keep mac_cost 1: their cost is the chip's sustained clock.
REFERENCE_DATATYPES = {"SS", "DD", "HH", "HS"}
REFERENCE_STORES = {"SSS", "DDD", "HHH", "HHS"}  # their store cost is the chip's bandwidth
RATE_CLASSES_FITTED = ("fp32", "fp64", "fp16_packed", "fp16_hpa")


def chip_knobs(
    files: Sequence[RecordedFile], profile: Mapping[str, Any], campaigns: bool = False
) -> list[Knob]:
    """The chip constants the rows can pin down (``oto calibrate --chip``; the physics is held): the sustained
    clock of each rate class with rows, launch, DRAM latency and sustained bandwidth. With ``campaigns``
    (files mixing measurement campaigns, :data:`CAMPAIGNS`), the profile's own figures describe the board of
    the campaign with the most rows, and every other campaign present gets an operating point under its name;
    the profile's own clocks are fitted only for the rate classes that campaign has rows of."""
    main = main_campaign(files) if campaigns else None
    classes = sorted({f.library.family.rate_class for f in files if main is None or np.any(f.board == main)})
    out = [
        Knob(f"chip:sustained_clock_mhz.{rc}", *chip_bounds(profile, f"sustained_clock_mhz.{rc}"))
        for rc in classes
    ]
    out += [Knob(f"chip:{name}", *chip_bounds(profile, name))
            for name in ("launch_us", "memory_latency_ns", "sustained_bandwidth_gbs")]  # fmt: skip
    if profile["memory"].get("last_level_cache"):  # RDNA's Infinity Cache: its bandwidth and hit latency
        out += [Knob(f"chip:{name}", *chip_bounds(profile, name))
                for name in ("llc_bandwidth_gbs", "llc_latency_ns")]  # fmt: skip
    if campaigns:
        out += _campaign_knobs(files, profile, main)
    return out


def main_campaign(files: Sequence[RecordedFile]) -> int:
    """The board (index into CAMPAIGNS of a campaign, CAMPAIGN_BOARD) with the most rows in ``files``."""
    boards = np.concatenate([f.board for f in files])
    counts = np.bincount(boards, minlength=len(CAMPAIGNS))
    return int(np.argmax(counts))


def _campaign_knobs(files: Sequence[RecordedFile], profile: Mapping[str, Any], main: int) -> list[Knob]:
    """A later campaign's operating point, every figure absolute (:data:`ABSOLUTE`) within the chip
    constants' bounds: no board runs above the datasheet peak, whatever the profile's own figures are. A
    client variant of the main campaign's board (CAMPAIGN_BOARD) gets its launch alone: the same board, timed
    another way; a variant of another board is simulated at that board's point."""
    out = []
    present = sorted({CAMPAIGNS[c] for f in files for c in np.unique(f.campaign)} - {CAMPAIGNS[main]})
    for c in present:
        board = CAMPAIGN_BOARD[CAMPAIGNS.index(c)]
        if board != CAMPAIGNS.index(c):
            if board == main:
                out.append(Knob(f"operating_point:{c}.launch_us", *chip_bounds(profile, "launch_us")))
            continue
        mine = [f for f in files if np.any(CAMPAIGNS.index(c) == f.campaign)]
        rcs = sorted({f.library.family.rate_class for f in mine})
        out += [
            Knob(f"operating_point:{c}.clock_mhz.{rc}", *chip_bounds(profile, f"sustained_clock_mhz.{rc}"))
            for rc in rcs
        ]
        out += [
            Knob(f"operating_point:{c}.{name}", *chip_bounds(profile, name))
            for name in ("launch_us", "memory_latency_ns", "sustained_bandwidth_gbs")
        ]
    return out


def knobs_for(files: Sequence[RecordedFile], profile: Mapping[str, Any]) -> list[Knob]:
    """The constants the rows can pin down: a datatype's cost only when its rows are there."""
    keys = sorted({datatype_key(f.library.family) for f in files} - REFERENCE_DATATYPES)
    classes = sorted({f.library.family.rate_class for f in files} & set(RATE_CLASSES_FITTED))
    lo, hi = PHYSICS_BOUNDS["mac_cost"]
    out = [Knob(f"mac_cost.{k}", lo, hi) for k in keys]
    stores = sorted({store_key(f.library.family) for f in files} - REFERENCE_STORES)
    out += [Knob(f"store_cost.{k}", *PHYSICS_BOUNDS["store_cost"]) for k in stores]
    out += [Knob(name, *b) for name, b in PHYSICS_BOUNDS.items() if name not in DATATYPE_TABLES]
    peak = float(profile["clock_mhz"])
    out += [Knob(f"chip:sustained_clock_mhz.{rc}", 0.3 * peak, peak) for rc in classes]
    # boards only: a client variant's rows are simulated at its board's point (campaign_gpu)
    boards = {int(b) for f in files for b in np.unique(f.board)}
    present = sorted({CAMPAIGNS[b] for b in boards} - {CAMPAIGNS[0]})
    for c in present:
        mine = [f for f in files if np.any(f.board == CAMPAIGN_BOARD[CAMPAIGNS.index(c)])]
        rcs = sorted({f.library.family.rate_class for f in mine} & set(RATE_CLASSES_FITTED))
        out += [Knob(f"operating_point:{c}.clock.{rc}", *OPERATING_POINT_BOUNDS["clock"]) for rc in rcs]
        out += [
            Knob(f"operating_point:{c}.{what}", *OPERATING_POINT_BOUNDS[what])
            for what in ("bandwidth", "memory_latency", "launch")
        ]
    out += [
        Knob("chip:launch_us", *TIMING_BOUNDS["launch_us"]),
        Knob("chip:memory_latency_ns", *TIMING_BOUNDS["memory_latency_ns"]),
        Knob(
            "chip:sustained_bandwidth_gbs",
            0.3 * profile["memory"]["peak_bandwidth_gbs"],
            profile["memory"]["peak_bandwidth_gbs"],
        ),
    ]
    return out


# A later campaign's operating point relative to the profile's own figures (the first campaign's board): the
# arch profile schema's bounds of timing.operating_points.*; the board's bandwidth (multiplier x sustained)
# is bounded by the chip's peak on its own (ABSOLUTE below), so its multiplier may exceed 1.
OPERATING_POINT_BOUNDS = {
    "clock": (0.2, 1.5), "bandwidth": (0.2, 4.0), "memory_latency": (0.2, 5.0), "launch": (0.2, 10.0)
}  # fmt: skip
OPERATING_POINT = "operating_point:"  # knob name prefix


# Operating-point figures a chip fit takes as absolute values (with the chip constants' own bounds, so no
# board runs above its datasheet peak): name -> the multiplier it is stored as.
ABSOLUTE = {
    "clock_mhz": "clock",
    "launch_us": "launch",
    "memory_latency_ns": "memory_latency",
    "sustained_bandwidth_gbs": "bandwidth",
}


def _absolute(path: Sequence[str], profile: Mapping[str, Any]) -> tuple[str, float]:
    """(the multiplier's path, the profile's own figure) of an absolute operating-point knob's path."""
    chip = Chip.from_profile(profile)
    if path[0] == "clock_mhz":
        return f"clock.{path[1]}", chip.sustained_clock_mhz[path[1]]
    if path[0] == "sustained_bandwidth_gbs":
        return "bandwidth", float(profile["memory"]["sustained_bandwidth_gbs"])
    return ABSOLUTE[path[0]], float(getattr(chip, path[0]))


def _operating_point_key(name: str) -> tuple[str, list[str]]:
    """``operating_point:staggeru.clock.fp32`` -> ("staggeru", ["clock", "fp32"])."""
    point, *path = name[len(OPERATING_POINT) :].split(".")
    return point, path


def get_value(name: str, physics: Physics, profile: Mapping[str, Any]) -> float:
    if name.startswith(OPERATING_POINT):
        point, path = _operating_point_key(name)
        if path[0] in ABSOLUTE:  # absolute: the profile's own figure times the point's multiplier
            relative, own = _absolute(path, profile)
            return own * get_value(f"{OPERATING_POINT}{point}.{relative}", physics, profile)
        node: Any = ((profile.get("timing") or {}).get("operating_points") or {}).get(point, {})
        for part in path:
            node = node.get(part, {}) if isinstance(node, Mapping) else {}
        return float(node) if isinstance(node, int | float) else 1.0
    if name.startswith("chip:"):
        key = name[5:]
        if key == "sustained_bandwidth_gbs":
            return float(profile["memory"]["sustained_bandwidth_gbs"])
        if key == "llc_bandwidth_gbs":
            return float(profile["memory"]["last_level_cache"]["sustained_bandwidth_gbs"])
        chip = Chip.from_profile(profile)
        if key.startswith("sustained_clock_mhz."):
            return chip.sustained_clock_mhz[key.split(".", 1)[1]]
        return float(getattr(chip, key))
    if "." in name:
        head, key = name.split(".", 1)
        return float(getattr(physics, head).get(key, 1.0))
    return float(getattr(physics, name))


def with_values(
    names: Sequence[str], values: Sequence[float], physics: Physics, profile: Mapping[str, Any]
) -> tuple[Physics, dict[str, Any]]:
    """A copy of (physics, profile) with the named constants set. A fitted operating point is marked
    ``source: fit``."""
    ph = physics.to_dict()
    prof = copy.deepcopy(dict(profile))
    timing = prof.setdefault("timing", {})
    # operating points last: an absolute clock (clock_mhz) is stored relative to the profile's fitted one
    pairs = sorted(zip(names, values, strict=True), key=lambda nv: nv[0].startswith(OPERATING_POINT))
    for name, v in pairs:
        v = float(v)
        if name.startswith(OPERATING_POINT):
            point, path = _operating_point_key(name)
            node = timing.setdefault("operating_points", {}).setdefault(point, {})
            node["source"] = "fit"
            node.setdefault("note", FITTED_NOTE.format(campaign=point))
            if path[0] in ABSOLUTE:
                relative, own = _absolute(path, prof)
                path, v = relative.split("."), v / own
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = v
        elif name.startswith("chip:"):
            key = name[5:]
            if key == "sustained_bandwidth_gbs":
                prof["memory"]["sustained_bandwidth_gbs"] = v
            elif key == "llc_bandwidth_gbs":
                prof["memory"]["last_level_cache"]["sustained_bandwidth_gbs"] = v
            elif key.startswith("sustained_clock_mhz."):
                timing.setdefault("sustained_clock_mhz", {})[key.split(".", 1)[1]] = v
            else:
                timing[key] = v
        elif "." in name:
            head, key = name.split(".", 1)
            ph[head] = {**ph[head], key: v}
        else:
            ph[name] = v
    return Physics.from_dict(ph), prof


FITTED_NOTE = (
    "the board the reference rows of measurement campaign {campaign!r} ran on "
    "(oto.hardware.simulated.calibration.CAMPAIGNS), fitted by oto calibrate with the physics"
)


def _to_unit(v: float, k: Knob) -> float:
    x = min(max((v - k.lo) / (k.hi - k.lo), 0.02), 0.98)  # inside: the transform is flat at a bound
    return math.log(x / (1 - x))


def _from_unit(u: np.ndarray, knobs: Sequence[Knob]) -> np.ndarray:
    x = 1 / (1 + np.exp(-np.clip(u, -30, 30)))
    return np.array([k.lo + (k.hi - k.lo) * xi for k, xi in zip(knobs, x, strict=True)])


@dataclass
class FitResult:
    physics: Physics
    profile: dict[str, Any]  # the input profile with the fitted chip constants
    values: dict[str, float]
    loss_history: list[float] = field(default_factory=list)
    rows: int = 0
    rank_pairs: int = 0  # (winner, rival) pairs of the ranking term (0: the term was off)
    converged: bool = True  # False: the iteration cap ended the fit while the loss was still falling

    @property
    def operating_points(self) -> dict[str, Any]:
        """The profile's operating points after the fit (the fitted ones marked ``source: fit``)."""
        return dict((self.profile.get("timing") or {}).get("operating_points") or {})


def fit_rows(files: Sequence[RecordedFile], per_file: int, seed: int = 0) -> list[np.ndarray]:
    """Rows of each file the fit uses: all of them, or an even-in-size random subsample of ``per_file``."""
    rng = np.random.default_rng(seed)
    out = []
    for f in files:
        n = len(f.winner)
        out.append(np.arange(n) if n <= per_file else np.sort(rng.choice(n, per_file, replace=False)))
    return out


@dataclass(frozen=True)
class RankPairs:
    """The (winner, rival) pairs of one file that the fit's ranking term compares: ``rows`` indexes the
    file's fitted rows (``fit_rows``' array for the file), ``rivals`` the rival solution at that row, and
    ``share`` is 1 / (the row's number of pairs), so every row's pairs together weigh as one row."""

    rows: np.ndarray
    rivals: np.ndarray
    share: np.ndarray


def rank_pairs(
    files: Sequence[RecordedFile], idx: Sequence[np.ndarray], rivals_per_row: int, seed: int = 0
) -> list[RankPairs]:
    """For each fitted row, the rivals that plausibly competed with its winner: solutions that can run the
    size (``RecordedFile.valid``) and won at least one row of the file with the row's K
    (``RecordedFile.won_at_same_k``; a logic file keeps only solutions that won somewhere, and one that never
    won at a K may never have run at it). At most ``rivals_per_row`` of them, drawn at random with a fixed
    seed, so the cost is bounded and the pairs are the same on every run."""
    rng = np.random.default_rng(seed)
    out = []
    for f, i in zip(files, idx, strict=True):
        competed = f.valid() & f.won_at_same_k()
        rows, rivals, share = [], [], []
        for pos, r in enumerate(i):
            cand = np.flatnonzero(competed[:, r])
            cand = cand[cand != f.winner[r]]
            if len(cand) > rivals_per_row:
                cand = np.sort(rng.choice(cand, rivals_per_row, replace=False))
            rows += [pos] * len(cand)
            rivals += cand.tolist()
            share += [1 / max(len(cand), 1)] * len(cand)
        out.append(
            RankPairs(np.array(rows, dtype=np.int64), np.array(rivals, dtype=np.int64), np.array(share))
        )
    return out


def _levenberg_marquardt(
    residuals: Callable[[np.ndarray], np.ndarray],
    u: np.ndarray,
    w: np.ndarray,
    huber: float,
    iterations: int,
    progress: Callable[[str], None] | None,
) -> tuple[np.ndarray, list[float], bool]:
    """Levenberg-Marquardt with Huber weights (IRLS) on the residuals of the unbounded constants ``u``:
    (the result, the loss of each iteration, whether it converged before the iteration cap)."""
    r = residuals(u)
    lam, history = 1e-2, []

    def cost(res: np.ndarray) -> tuple[float, np.ndarray]:
        a = np.abs(res)
        hw = np.where(a <= huber, 1.0, huber / np.maximum(a, 1e-12))  # Huber as IRLS weights
        return float(np.sum(w * np.where(a <= huber, a**2 / 2, huber * (a - huber / 2)))), w * hw

    c, wt = cost(r)
    history.append(c)
    converged = False
    for it in range(iterations):
        jac = np.empty((len(r), len(u)))
        for j in range(len(u)):
            du = np.zeros_like(u)
            du[j] = 1e-3
            jac[:, j] = (residuals(u + du) - r) / 1e-3
        sw = np.sqrt(wt)
        jw, rw = jac * sw[:, None], r * sw
        g, h = jw.T @ rw, jw.T @ jw
        improved = False
        for _ in range(8):
            d = np.diag(h)
            step = np.linalg.solve(h + lam * np.diag(d + 1e-3 * d.max() + 1e-12), -g)
            r_new = residuals(u + step)
            c_new, wt_new = cost(r_new)
            if c_new < c:
                u, r, c, wt, improved = u + step, r_new, c_new, wt_new, True
                lam = max(lam / 3, 1e-6)
                break
            lam *= 4
        history.append(c)
        if progress:
            progress(f"iteration {it + 1}: loss {c:.4f} (lambda {lam:.2g})")
        if not improved or (len(history) > 2 and history[-2] - c < 1e-5 * history[-2]):
            converged = True
            break
    return u, history, converged


def fit(
    files: Sequence[RecordedFile],
    profile: Mapping[str, Any],
    start: Physics,
    *,
    knobs: Sequence[Knob] | None = None,
    iterations: int = 25,
    per_file: int = 400,
    huber: float = 0.2,
    rank_weight: float = 0.0,
    rank_margin: float = 0.01,
    rivals_per_row: int = 8,
    progress: Callable[[str], None] | None = None,
    chip_seed: int = 0,
) -> FitResult:
    """Fit the constants to the rows of ``files`` (pass the fit split only), simulated on the virtual chip
    ``chip_seed`` (SimGPU's seed: the one simulated rows ran on; 0 for measured rows, which have none).

    Least squares on log(sim time / real time) by Levenberg-Marquardt over bounded constants (logistic
    transform), with Huber weights (``huber`` in log units) so a few rows the model cannot explain do not pull
    the rest, and each family weighted as if it had the same number of rows (sqrt-balanced), so the small
    families count. Rows of a later measurement campaign (CAMPAIGNS) are simulated at that campaign's
    operating point of the profile (:func:`campaign_gpu`), fitted alongside (``operating_point:<name>.*``
    knobs, starting from the profile's figures). Deterministic: same rows, same start, same result.

    With ``rank_weight`` > 0 (default 0: off), the fit also uses what a logic file states about the rivals:
    the row's winner beat the solutions that competed at its size. For up to ``rivals_per_row`` rivals of
    each fitted row (:func:`rank_pairs`: those that won somewhere at the row's K) it adds the hinge residual
    max(0, log t_winner - log t_rival + ``rank_margin``), weighted so that a row's pairs together count
    ``rank_weight`` times the row's time residual (Huber-weighted alike). The rivals are simulated at the
    row's campaign operating point, as the winner is.
    """
    knobs = list(knobs if knobs is not None else knobs_for(files, profile))
    names = [k.name for k in knobs]
    idx = fit_rows(files, per_file)
    real = [np.log(f.real_time_us[i]) for f, i in zip(files, idx, strict=True)]
    fam_rows: dict[str, int] = {}
    for f, i in zip(files, idx, strict=True):
        fam_rows[f.family] = fam_rows.get(f.family, 0) + len(i)
    row_w = [np.full(len(i), 1 / math.sqrt(fam_rows[f.family])) for f, i in zip(files, idx, strict=True)]
    mean_w = np.concatenate(row_w).mean()
    row_w = [rw / mean_w for rw in row_w]
    w = np.concatenate(row_w)
    pairs = rank_pairs(files, idx, rivals_per_row) if rank_weight > 0 else []
    if pairs:
        w = np.concatenate(
            [w, *(rank_weight * rw[p.rows] * p.share for rw, p in zip(row_w, pairs, strict=True))]
        )

    def residuals(u: np.ndarray) -> np.ndarray:
        values = _from_unit(u, knobs)
        ph, prof = with_values(names, values, start, profile)
        gpu = SimGPU(prof, chip_seed, physics=ph)
        sim = [np.log(winner_times(gpu, f, i)) for f, i in zip(files, idx, strict=True)]
        out = [np.concatenate(sim) - np.concatenate(real)]
        for f, i, p, t_win in zip(files, idx, pairs, sim, strict=False):
            t_rival = np.log(solution_times(gpu, f, i[p.rows], p.rivals))
            out.append(np.maximum(0.0, t_win[p.rows] - t_rival + rank_margin))
        return np.concatenate(out)

    u = np.array([_to_unit(get_value(k.name, start, profile), k) for k in knobs])
    u, history, converged = _levenberg_marquardt(residuals, u, w, huber, iterations, progress)
    values = dict(zip(names, (float(v) for v in _from_unit(u, knobs)), strict=True))
    ph, prof = with_values(names, list(values.values()), start, profile)
    n_pairs = int(sum(len(p.rows) for p in pairs))
    return FitResult(ph, prof, values, history, int(sum(len(i) for i in idx)), n_pairs, converged)


def fit_joint(
    devices: Sequence[tuple[str, Sequence[RecordedFile], Mapping[str, Any]]],
    start: Physics,
    *,
    iterations: int = 25,
    per_file: int = 250,
    huber: float = 0.2,
    hold: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
) -> tuple[Physics, dict[str, FitResult], list[Knob]]:
    """One physics for several devices (``(tag, fit-half files, profile)`` each): the physics constants
    shared, each device's chip constants (:func:`chip_knobs`) its own (knob ``<tag>/chip:...``), fitted
    together as :func:`fit` fits one device (log(sim/real), Huber, families sqrt-balanced per device).
    Returns the physics, each device's result (its profile with its chip constants) and the knobs."""
    all_files = [f for _, files, _ in devices for f in files]
    phys = [k for k in knobs_for(all_files, devices[0][2])
            if not k.name.startswith(("chip:", OPERATING_POINT)) and k.name not in hold]  # fmt: skip
    own = {tag: [k for k in chip_knobs(files, prof) if f"{tag}/{k.name}" not in hold]
           for tag, files, prof in devices}  # fmt: skip
    knobs = phys + [Knob(f"{tag}/{k.name}", k.lo, k.hi) for tag, _, _ in devices for k in own[tag]]
    pnames = [k.name for k in phys]
    idx = {tag: fit_rows(files, per_file) for tag, files, _ in devices}
    real, row_w = [], []
    for tag, files, _ in devices:
        fam_rows: dict[str, int] = {}
        for f, i in zip(files, idx[tag], strict=True):
            fam_rows[f.family] = fam_rows.get(f.family, 0) + len(i)
        for f, i in zip(files, idx[tag], strict=True):
            real.append(np.log(f.real_time_us[i]))
            row_w.append(np.full(len(i), 1 / math.sqrt(fam_rows[f.family])))
    real_all, w = np.concatenate(real), np.concatenate(row_w)
    w = w / w.mean()

    def device_values(values: np.ndarray) -> dict[str, tuple[Physics, dict, list[str], list[float]]]:
        out, off = {}, len(phys)
        for tag, _, prof in devices:
            names = [k.name for k in own[tag]]
            mine = list(values[off : off + len(names)])
            off += len(names)
            ph, pr = with_values(pnames + names, list(values[: len(phys)]) + mine, start, prof)
            out[tag] = (ph, pr, names, mine)
        return out

    def residuals(u: np.ndarray) -> np.ndarray:
        per = device_values(_from_unit(u, knobs))
        sim = []
        for tag, files, _ in devices:
            gpu = SimGPU(per[tag][1], physics=per[tag][0])
            sim += [np.log(winner_times(gpu, f, i)) for f, i in zip(files, idx[tag], strict=True)]
        return np.concatenate(sim) - real_all

    u = np.array(
        [_to_unit(get_value(k.name, start, devices[0][2]), k) for k in phys]
        + [_to_unit(get_value(k.name, start, prof), k) for tag, _, prof in devices for k in own[tag]]
    )
    u, history, converged = _levenberg_marquardt(residuals, u, w, huber, iterations, progress)
    values = _from_unit(u, knobs)
    per = device_values(values)
    shared = dict(zip(pnames, (float(v) for v in values[: len(phys)]), strict=True))
    results = {}
    for tag, _, _ in devices:
        ph, pr, names, mine = per[tag]
        results[tag] = FitResult(
            ph, pr, {**shared, **dict(zip(names, map(float, mine), strict=True))}, history,
            int(sum(len(i) for i in idx[tag])), 0, converged,
        )  # fmt: skip
    return per[devices[0][0]][0], results, knobs


def joint_main(argv: list[str]) -> int:
    """``oto calibrate --joint --device DIR=PROFILE ... --physics-out F``: one physics for an ISA family's
    devices (RDNA: physics-rdna.json), fitted with each device's chip constants on the fit half
    :func:`chip_split` gives of each device's own logic files."""
    from oto.hardware.profile import ProfileError, load_profile, profile_argument

    ap = argparse.ArgumentParser(prog="oto calibrate --joint", description=joint_main.__doc__)
    ap.add_argument("--joint", action="store_true", required=True)
    ap.add_argument("--device", action="append", required=True, help="LOGIC_DIR=PROFILE, once per device")
    ap.add_argument("--start", default=None, help="physics to start from (default: the profiles' family's)")
    ap.add_argument("--physics-out", default=None, help="write the fitted physics here")
    ap.add_argument("--json", default=None, help="write every fitted value here")
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--per-file", type=int, default=250)
    ap.add_argument("--hold", default="", help="comma-separated knobs to keep at their start values")
    args = ap.parse_args(argv)
    devices, splits = [], {}
    specs = []
    for spec in args.device:
        logic, sep, prof_path = spec.partition("=")
        if not sep:
            ap.error(f"--device wants LOGIC_DIR=PROFILE, got {spec!r}")
        specs.append((logic, prof_path))
    try:
        profiles = [load_profile(profile_argument(prof, "--device")) for _, prof in specs]
        families = {physics_file(p) for p in profiles}
        if len(families) != 1:
            ap.error("--device: profiles of different physics: " + ", ".join(map(str, families)))
        for (logic, prof_path), profile in zip(specs, profiles, strict=True):
            files = load_recorded(logic)
            read_flop_counts(files, profile)
            fit_files, back = chip_split(files)
            tag = str(profile["arch"])
            devices.append((tag, fit_files, profile))
            splits[tag] = {"logic": logic, "profile": prof_path,
                           "fit_files": sorted(f.name for f in fit_files),
                           "held_back_files": sorted(f.name for f in back)}  # fmt: skip
        start_path = args.start or str(families.pop())
        start = Physics.load(start_path)
    except (ProfileError, ValueError, OSError) as exc:
        print(f"oto calibrate: {exc}", file=sys.stderr)
        return 2
    hold = [h.strip() for h in args.hold.split(",") if h.strip()]
    for tag, files, _ in devices:
        print(f"{tag}: fit half {len(files)} files ({sum(len(f.winner) for f in files)} rows)", flush=True)
    physics, results, knobs = fit_joint(
        devices, start, iterations=args.iterations, per_file=args.per_file, hold=hold,
        progress=lambda s: print(s, flush=True),
    )  # fmt: skip
    first = next(iter(results.values()))
    for k in knobs:
        tag, _, name = k.name.rpartition("/")
        v = (results[tag] if tag else first).values[name]
        print(f"  {k.name:56s} {v:12.4f}  [{k.lo:.4g}, {k.hi:.4g}]")
    doc = {
        "model_version": MODEL_VERSION,
        "fitted_on": {
            "command": "oto calibrate " + " ".join(argv),
            "start": start_path,
            "devices": splits,
            "rows_used": {tag: r.rows for tag, r in results.items()},
            "loss": first.loss_history[-1] if first.loss_history else None,
            "converged": first.converged,
        },
        "physics": physics.to_dict(),
    }
    if args.physics_out:
        Path(args.physics_out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print(f"wrote {args.physics_out}")
    if args.json:
        chips = {t: {k: v for k, v in r.values.items() if k.startswith("chip:")} for t, r in results.items()}
        Path(args.json).write_text(json.dumps({**doc, "chips": chips}, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


BOUND_SHARE = 0.005  # a fitted constant this close to a bound (share of its range) sits at the bound
# Fewest measurements a chip-constant fit is given (bench/chip_learning_curve.py, bench/RESULTS.md: the fewest
# vega20 rows whose fit reached 90% of the full fit's gain on the held-back files).
MIN_CHIP_ROWS = 300


def at_bounds(values: Mapping[str, float], knobs: Sequence[Knob]) -> dict[str, str]:
    """The fitted constants that ended at a bound: name -> "lower" or "upper". A constant there says the rows
    want it beyond what is physical, i.e. a term the model lacks, not a property of the chip."""
    out = {}
    for k in knobs:
        v, span = values[k.name], (k.hi - k.lo) * BOUND_SHARE
        if v <= k.lo + span:
            out[k.name] = "lower"
        elif v >= k.hi - span:
            out[k.name] = "upper"
    return out


def relative_errors(
    files: Sequence[RecordedFile],
    profile: Mapping[str, Any],
    physics: Physics,
    names: Sequence[str],
    chip_seed: int = 0,
) -> dict[str, float]:
    """Relative standard error of each named constant at the profile's values: the linearised least-squares
    covariance sigma^2 (J^T J)^-1 of log(constant), J = d log(simulated time) / d log(constant) over the rows,
    sigma the residuals' spread. Correlated constants (DRAM latency against launch, say) show up here even
    when each moves the times on its own. ``chip_seed``: as :func:`fit`'s."""
    real = np.concatenate([np.log(f.real_time_us) for f in files])

    def log_times(prof: Mapping[str, Any]) -> np.ndarray:
        gpu = SimGPU(prof, chip_seed, physics=physics)
        return np.concatenate([np.log(winner_times(gpu, f)) for f in files])

    base = log_times(profile)
    jac = np.empty((len(base), len(names)))
    for j, name in enumerate(names):
        _, prof = with_values([name], [get_value(name, physics, profile) * 1.02], physics, profile)
        jac[:, j] = (log_times(prof) - base) / math.log(1.02)
    dof = max(len(base) - len(names), 1)
    sigma2 = float(np.sum((base - real) ** 2)) / dof
    cov = sigma2 * np.linalg.pinv(jac.T @ jac)
    return {name: float(math.sqrt(max(cov[j, j], 0.0))) for j, name in enumerate(names)}


def sample_rows(files: Sequence[RecordedFile], n: int, seed: int) -> list[RecordedFile]:
    """``n`` rows drawn uniformly without replacement from all rows of ``files`` (numpy
    ``default_rng(seed)``), as files holding only their drawn rows (files with none left out): the learning
    curve's samples."""
    total = sum(len(f.winner) for f in files)
    if n >= total:
        return list(files)
    pick = np.sort(np.random.default_rng(seed).choice(total, n, replace=False))
    out, start = [], 0
    for f in files:
        mine = pick[(pick >= start) & (pick < start + len(f.winner))] - start
        start += len(f.winner)
        if len(mine):
            out.append(
                dataclasses.replace(
                    f, sizes=f.sizes[mine], winner=f.winner[mine], gflops_recorded=f.gflops_recorded[mine],
                    campaign=f.campaign[mine],
                )
            )  # fmt: skip
    return out


# ----------------------------------------------------------------------------------------------- output
def physics_document(
    result: FitResult, logic_dir: str, fit_files: Sequence[str], back: Sequence[str], command: str = ""
) -> dict:
    return {
        "model_version": MODEL_VERSION,
        "fitted_on": {
            "command": command,
            "logic": Path(logic_dir).name,
            "profile": result.profile["arch"],
            "fit_files": sorted(fit_files),
            "held_back_files": sorted(back),
            "rows_used": result.rows,
            "rank_pairs_used": result.rank_pairs,
            "loss": result.loss_history[-1] if result.loss_history else None,
        },
        "physics": result.physics.to_dict(),
    }


def timing_block(result: FitResult) -> dict[str, Any]:
    """The profile's fitted chip constants, rounded as they are written to the YAML: the ``timing`` block
    with its operating points, and ``sustained_bandwidth_gbs`` (``memory.sustained_bandwidth_gbs``)."""
    t = result.profile.get("timing", {})
    chip = Chip.from_profile(result.profile)  # absent figures: the schema's defaults
    out: dict[str, Any] = {
        "launch_us": round(chip.launch_us, 2),
        "memory_latency_ns": round(chip.memory_latency_ns, 1),
        "sustained_clock_mhz": {k: round(float(v), 1) for k, v in t.get("sustained_clock_mhz", {}).items()},
    }
    points = {}
    for name, op in sorted(result.operating_points.items()):
        points[name] = {
            k: ({rc: round(float(x), 3) for rc, x in sorted(v.items())} if isinstance(v, Mapping)
                else round(float(v), 3) if isinstance(v, int | float) else v)
            for k, v in op.items()
        }  # fmt: skip
    if points:
        out["operating_points"] = points
    out["sustained_bandwidth_gbs"] = round(float(result.profile["memory"]["sustained_bandwidth_gbs"]), 1)
    return out


def calibrated_profile(
    result: FitResult,
    knobs: Sequence[Knob],
    *,
    source: str,
    inputs: Sequence[Mapping[str, Any]],
    command: str,
    check: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The profile with its fitted chip constants (rounded as written) and a ``calibration`` block saying what
    they were fitted on: ``source`` (``logic`` or ``bundles``), the ``inputs`` (name and sha256 of each file
    or bundle), the rows, the fitted and held constants, the model version, and ``check`` (how well the fit
    did on data it did not fit, when that was measured). Its ``id`` enters the simulated GPU's identity
    (``performance.chip_version``), so records simulated on two calibrations stay apart."""
    prof = copy.deepcopy(result.profile)
    timing = prof.setdefault("timing", {})
    for key in ("launch_us", "memory_latency_ns", "llc_latency_ns"):
        if key in timing:
            timing[key] = round(float(timing[key]), 3)
    clocks = timing.get("sustained_clock_mhz") or {}
    timing["sustained_clock_mhz"] = {rc: round(float(v), 1) for rc, v in sorted(clocks.items())}
    for op in (timing.get("operating_points") or {}).values():
        for key, v in list(op.items()):
            if isinstance(v, Mapping):
                op[key] = {rc: round(float(x), 4) for rc, x in sorted(v.items())}
            elif isinstance(v, int | float):
                op[key] = round(float(v), 4)
    prof["memory"]["sustained_bandwidth_gbs"] = round(float(prof["memory"]["sustained_bandwidth_gbs"]), 2)
    if llc := prof["memory"].get("last_level_cache"):
        llc["sustained_bandwidth_gbs"] = round(float(llc["sustained_bandwidth_gbs"]), 2)
    fitted = {k.name: round(result.values[k.name], 4) for k in knobs}
    block = {
        "source": source,
        "model_version": MODEL_VERSION,
        "inputs": [dict(i) for i in inputs],
        "rows": int(result.rows),
        "fitted": fitted,
        "held": sorted(set(chip_constants(prof)) - {k.name.removeprefix("chip:") for k in knobs}),
        "converged": bool(result.converged),
        "loss": round(float(result.loss_history[-1]), 4) if result.loss_history else None,
        "command": command,
    }
    if check:
        block["check"] = dict(check)
    block.update(extra or {})  # the device of a tester's bundles, the constants left at a bound
    block["id"] = hashlib.sha256(json.dumps(block, sort_keys=True, default=str).encode()).hexdigest()[:12]
    prof["calibration"] = block
    return prof


def fit_problems(result: FitResult, knobs: Sequence[Knob]) -> list[str]:
    """Why a chip fit must not be written as a profile: it did not converge, or a constant ended at a
    bound."""
    out = []
    if not result.converged:
        out.append(
            f"the fit did not converge ({len(result.loss_history) - 1} iterations, loss still falling)"
        )
    for name, side in sorted(at_bounds(result.values, knobs).items()):
        k = next(k for k in knobs if k.name == name)
        bound = k.lo if side == "lower" else k.hi
        out.append(
            f"{name} = {result.values[name]:.4g} is at its {side} bound {bound:.4g}: the measurements want "
            "it beyond what is physical (a term the model lacks, or measurements of another device)"
        )
    return out


def file_inputs(paths: Sequence[Path]) -> list[dict[str, str]]:
    """Name and sha256 of each input file (a calibration names what it was fitted on)."""
    return [{"name": Path(p).name, "sha256": hashlib.sha256(Path(p).read_bytes()).hexdigest()} for p in paths]


def main(argv: list[str] | None = None) -> int:
    from oto.hardware.profile import ProfileError, load_profile, profile_argument

    argv_list = list(argv if argv is not None else sys.argv[1:])
    if "--joint" in argv_list:
        return joint_main(argv_list)
    ap = argparse.ArgumentParser(
        prog="oto calibrate",
        description=(
            "Fit the simulated GPU's physics and the chip's timing constants to the recorded GFLOPS "
            "of a folder of shipped logic files (the fit split only; the held-back files are for "
            "bench/sim_fidelity.py)."
        ),
        epilog=(
            "Two other modes: `oto calibrate --bundles BUNDLE... --arch ARCH [--numbers simulated]` fits "
            "each tester device's chip constants to the races in its bundles (see `oto calibrate --bundles "
            "x --help`, docs/fleet.md); `oto calibrate --joint --device LOGIC_DIR=PROFILE ...` fits one "
            "physics to several devices' logic files."
        ),
    )
    ap.add_argument("--logic", required=True, help="folder of shipped logic files of the profile's arch")
    ap.add_argument(
        "--profile",
        required=True,
        help="arch profile (a file or an arch name) of the GPU that measured the files",
    )
    ap.add_argument(
        "--physics-out", default=None, help=f"write the fitted physics here (e.g. {PHYSICS_FILE})"
    )
    ap.add_argument("--json", default=None, help="write every fitted value and the split here")
    ap.add_argument("--iterations", type=int, default=25, help="Levenberg-Marquardt iterations at most")
    ap.add_argument("--per-file", type=int, default=400, help="rows per file the fit uses (subsampled)")
    ap.add_argument(
        "--start",
        default=None,
        help=f"physics file to start from (default: the profile's ISA family's: {PHYSICS_FILE.name}, or "
        f"{PHYSICS_RDNA_FILE.name} for RDNA)",
    )
    ap.add_argument(
        "--rank-weight",
        type=float,
        default=0.0,
        help="weight of the ranking term: each row's winner ahead of the rivals that won at its K, relative "
        "to the row's time residual (default 0: off)",
    )
    ap.add_argument(
        "--rank-margin",
        type=float,
        default=0.01,
        help="log-time margin the winner should lead by (default 0.01)",
    )
    ap.add_argument(
        "--rivals-per-row", type=int, default=8, help="rivals per row the ranking term compares (default 8)"
    )
    ap.add_argument(
        "--hold",
        default="",
        help="comma-separated knobs to keep at their --start / profile values (e.g. "
        "lds_broadcast,lds_overlap), so a new term cannot trade them away",
    )
    chip = ap.add_argument_group(
        "chip constants only (--chip): the physics (--start) is held; the files are split by "
        "calibration.chip_split and only the fit half is fitted (docs/simulator.md, A chip's own constants)"
    )
    chip.add_argument("--chip", action="store_true", help="fit only the profile's chip constants")
    chip.add_argument(
        "--campaigns",
        action="store_true",
        help="with --chip: also fit the operating point of each later measurement campaign in the files",
    )
    chip.add_argument(
        "--rows", type=int, default=None, help="with --chip: fit on this many rows, drawn at random"
    )
    chip.add_argument("--seed", type=int, default=0, help="with --rows: the draw's seed (default 0)")
    chip.add_argument("--profile-out", default=None, help="with --chip: write the calibrated profile here")
    chip.add_argument(
        "--allow-bounds",
        action="store_true",
        help="with --profile-out: write the profile even when a constant ended at a bound (named in it)",
    )
    args = ap.parse_args(argv)
    if args.chip:
        return chip_main(args, argv)
    for flag, value in (("--rank-weight", args.rank_weight), ("--rank-margin", args.rank_margin)):
        if value < 0:
            ap.error(f"{flag} must not be negative, got {value}")
    for flag, value in (("--rivals-per-row", args.rivals_per_row), ("--per-file", args.per_file)):
        if value < 1:
            ap.error(f"{flag} must be at least 1, got {value}")
    try:
        profile = load_profile(profile_argument(args.profile))
        files = load_recorded(args.logic)
        start = Physics.load(args.start or physics_file(profile))
    except (ProfileError, ValueError, OSError) as exc:
        print(f"oto calibrate: {exc}", file=sys.stderr)
        return 2
    fit_files, back = split(files)
    knobs = knobs_for(fit_files, profile)
    hold = {h.strip() for h in args.hold.split(",") if h.strip()}
    unknown = sorted(hold - {k.name for k in knobs})
    if unknown:  # the fitted knobs depend on the files' datatypes, so this is checked after loading them
        names = ", ".join(k.name for k in knobs)
        ap.error(f"--hold: unknown knob(s) {', '.join(unknown)}; this fit's knobs: {names}")
    knobs = [k for k in knobs if k.name not in hold]
    if not knobs:
        ap.error("--hold: every knob is held, nothing left to fit")
    print(f"fit on {len(fit_files)} files ({sum(len(f.winner) for f in fit_files)} rows), "
          f"{len(back)} held back", flush=True)  # fmt: skip
    result = fit(
        fit_files, profile, start, knobs=knobs, iterations=args.iterations,
        per_file=args.per_file, rank_weight=args.rank_weight, rank_margin=args.rank_margin,
        rivals_per_row=args.rivals_per_row,
        progress=lambda s: print(s, flush=True),
    )  # fmt: skip
    command = "oto calibrate " + " ".join(argv if argv is not None else sys.argv[1:])
    doc = physics_document(result, args.logic, [f.name for f in fit_files], [f.name for f in back], command)
    timing = timing_block(result)
    for name, v in result.values.items():
        print(f"  {name:40s} {v:12.4f}")
    print(f"arch profile timing block (fitted, with its operating points; for {args.profile}):")
    block = {k: v for k, v in timing.items() if k != "sustained_bandwidth_gbs"}
    print(yaml.safe_dump({"timing": block}, sort_keys=False, default_flow_style=None, width=110), end="")
    print(f"memory.sustained_bandwidth_gbs: {timing['sustained_bandwidth_gbs']}")
    if args.physics_out:
        Path(args.physics_out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print(f"wrote {args.physics_out}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({**doc, "timing": timing, "values": result.values}, indent=2) + "\n"
        )
        print(f"wrote {args.json}")
    return 0


def chip_main(args: argparse.Namespace, argv: list[str] | None) -> int:
    """``oto calibrate --chip --logic DIR --profile P``: the chip constants alone, fitted on the fit half of
    the chip's own logic files (:func:`chip_split`), physics held."""
    from oto.hardware.profile import ProfileError, load_profile, profile_argument

    try:
        profile = load_profile(profile_argument(args.profile))
        files = load_recorded(args.logic)
        args.start = str(args.start or physics_file(profile))
        physics = Physics.load(args.start)
    except (ProfileError, ValueError, OSError) as exc:
        print(f"oto calibrate: {exc}", file=sys.stderr)
        return 2
    old_client = read_flop_counts(files, profile)
    fit_files, back = chip_split(files)
    if args.rows is not None:
        fit_files = sample_rows(fit_files, args.rows, args.seed)
    knobs = chip_knobs(fit_files, profile, campaigns=args.campaigns)
    hold = {h.strip() for h in args.hold.split(",") if h.strip()}
    if unknown := sorted(hold - {k.name for k in knobs}):
        print(f"oto calibrate: --hold: unknown knob(s) {', '.join(unknown)}; this fit's knobs: "
              f"{', '.join(k.name for k in knobs)}", file=sys.stderr)  # fmt: skip
        return 2
    knobs = [k for k in knobs if k.name not in hold]
    rows = sum(len(f.winner) for f in fit_files)
    efficiency = ", ".join(f.name for f in files if f.efficiency_percent) or "none"
    print(f"chip fit on {len(fit_files)} files ({rows} rows), {len(back)} held back; physics held "
          f"({args.start}); files read with the older client's flop count: {', '.join(old_client) or 'none'};"
          f" files of efficiency figures (% of peak): {efficiency}", flush=True)  # fmt: skip
    result = fit(
        fit_files, profile, physics, knobs=knobs, iterations=args.iterations, per_file=args.per_file,
        progress=lambda s: print(s, flush=True),
    )  # fmt: skip
    for k in knobs:
        print(f"  {k.name:48s} {result.values[k.name]:12.4f}  [{k.lo:.4g}, {k.hi:.4g}]")
    problems = fit_problems(result, knobs)
    for p in problems:
        print(f"oto calibrate: {p}", file=sys.stderr)
    if not args.profile_out:
        return 0
    if problems and not (args.allow_bounds and result.converged):
        print(f"oto calibrate: profile not written ({args.profile_out})", file=sys.stderr)
        return 1
    command = "oto calibrate " + " ".join(argv if argv is not None else sys.argv[1:])
    names = [Path(args.logic) / f.name for f in fit_files]
    bounds = {"at_bound": sorted(at_bounds(result.values, knobs))} if problems else {}
    prof = calibrated_profile(
        result, knobs, source="logic", inputs=file_inputs(names), command=command, extra=bounds
    )
    if refused := write_fitted_profile(prof, args.profile_out):
        print(f"oto calibrate: {refused}", file=sys.stderr)
        return 1
    print(f"wrote {args.profile_out}")
    return 0


def write_fitted_profile(profile: Mapping[str, Any], path: str | Path) -> str | None:
    """Write a fitted profile only if it loads: each knob has its own bounds, but the schema also bounds
    their ratios (a board's launch at most 5x the chip's), which a fit can leave (a chip launch at its floor,
    a board's at 9x it). The reason it was refused, or None once written."""
    from oto.files import atomic_write_text, dump_yaml
    from oto.hardware.profile import ProfileError, validate_profile

    try:
        validate_profile(copy.deepcopy(dict(profile)), str(path))
    except ProfileError as exc:
        return (
            f"the fitted profile would not load, so it was not written: {exc} (hold the knob that went out)"
        )
    atomic_write_text(path, dump_yaml(profile))
    return None

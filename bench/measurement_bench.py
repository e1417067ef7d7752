"""Measurement benchmark: can oto rank kernels on a drifting APU, and how many launches does it need?

Two pipelines measure the same candidate sets and are graded against the truth:

* **naive** — what a plain tuner does: each kernel timed ``--naive-reps`` times back to back, ranked by the
  raw median GFLOPS (score = reference median time / kernel median time);
* **oto** — interleaved with the spoof-floor reference, drift-normalised scores
  (:mod:`oto.measurement.scoring`), adaptive repetition (:mod:`oto.measurement.racing`).

Scenarios: the simulated gfx90c (±25% drift + 3% jitter + outliers, default ``sim`` settings) on several
libraries, in two launch orders and with or without clock telemetry:

* plan order (the simulator runs the plan as listed): with a clock reading per launch, and without
  (``no clock``: the drift from the interleaved reference alone);
* **Tensile's order** (``sim.launch_order: sweeps``, :mod:`oto.backends.sweeps`): each repetition is one
  sweep of the client, problem after problem, every kernel of a problem back to back with its reference,
  orders permuted per sweep; with one clock reading per sweep (``per-sweep telemetry``, what the tensile
  backend's sampler gives on an APU) and without (``no telemetry``). This is the real GPU's path.

Each is graded with ``SimBackend.ground_truth`` in the batch's median clock state (the state scores refer to,
see oto.measurement.scoring: a memory-bound kernel's ratio to an ALU-bound reference depends on the state, so
the truth is taken where each pipeline's batch ran); and real repetition noise replayed from the 32
recorded times per configuration of the Kernel Tuner caches in ../shared/reference/replay
(:mod:`oto.measurement.recorded_noise`), alone and multiplied by the simulator's drift, graded against each
configuration's recorded mean.

Figures per scenario: score error vs truth (median and p90 of |score/true - 1| over every valid kernel×size,
eliminated kernels included), Kendall tau of each size's ranking (mean), regret of the chosen winner (mean
and max of t_winner/t_best - 1), the error of the winner's score (what selection and reports carry), the
error of the reported times against the truth at the nominal clock (``time err``, median over valid
kernel×size: what GFLOPS and % of ceiling carry; sim only), and candidate launches per (kernel, size)
(mean, and the most any (kernel, size) got, as a mean over seeds).
Targets (issues #3, #14): error ≤ 2%, regret ≤ 1%, ≤ 40 paired samples per contender, in every simulated
order.

    python bench/measurement_bench.py [--sizes 8] [--candidates 12] [--naive-reps 10] [--seeds 3]
        [--only TEXT]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from oto.backends.base import Kernel, Launch, MeasurePlan, Problem, Size
from oto.backends.sim import SimBackend
from oto.deck.sources import load_deck
from oto.deck.tuning_sizes import tuning_indices
from oto.gemm import Library, gemm_flops
from oto.hardware.profile import load_profile
from oto.hardware.simulated.noise import NoiseModel
from oto.measurement.benchmarking import interleave_sizes, measure_frame
from oto.measurement.racing import RaceSettings, race
from oto.measurement.recorded_noise import ReplayNoise, load_times
from oto.measurement.scoring import SCORE_COLUMNS, score_library, score_samples
from oto.tensile import legality
from oto.tensile.params import PARAMS, candidate_id, canonical

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO.parent / "shared" / "reference" / "replay"
LIBRARIES = ("Cijk_Ailk_Bljk_DB", "Cijk_Ailk_Bljk_SB", "Cijk_Ailk_Bljk_HHS_BH", "Cijk_Ailk_Bljk_CB_GB")
# A tuning session's timeline: host-side work between launches (sync, bookkeeping, other jobs' compiles)
# and a faster DVFS period than the default, so one scenario sees drift swing as a night-long run does.
SIM = {"cooldown_us": 20_000.0, "drift_period_s": 120.0}
CONFIG = {"seed": 1, "benchmark": {"bootstrap": 200, "tie_tolerance": 0.02, "racing": {}}}


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    n, s = len(a), 0.0
    for i, j in itertools.combinations(range(n), 2):
        s += np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])
    return float(s / (n * (n - 1) / 2)) if n > 1 else 1.0


def grade(
    scores: pd.DataFrame,
    truth: dict[tuple[str, int], float],
    reference: dict[int, str],
    samples,
    nominal: dict[tuple[str, int], float] | None = None,
):
    """Error, tau, regret, launches per (candidate, size) of one pipeline's scores against true times;
    ``nominal`` (true times at the nominal clock) grades the reported times too (GFLOPS, % of ceiling)."""
    errs, win_errs, taus, regrets, time_errs = [], [], [], [], []
    valid = scores[(scores["status"] == "ok") & scores["score"].notna()]
    for size, g in valid.groupby("size_index"):
        true_t = np.array([truth[(k, size)] for k in g["kernel_id"]])
        true_score = truth[(reference[size], size)] / true_t
        errs.extend(np.abs(g["score"].to_numpy() / true_score - 1))
        taus.append(kendall_tau(g["score"].to_numpy(), true_score))
        w = int(np.lexsort((g["kernel_id"].to_numpy(), -g["score"].to_numpy()))[0])
        winner = g["kernel_id"].iloc[w]
        win_errs.append(abs(g["score"].iloc[w] / true_score[w] - 1))
        regrets.append(truth[(winner, size)] / true_t.min() - 1)
        if nominal is not None:
            time_errs.extend(
                abs(t / nominal[(k, size)] - 1) for k, t in zip(g["kernel_id"], g["time_us"], strict=True)
            )
    cand = samples[samples["role"] == "candidate"]
    per = cand.groupby(["kernel_id", "size_index"]).size()
    return {
        "error": float(np.median(errs)),
        "error_p90": float(np.percentile(errs, 90)),
        "win_error": float(np.mean(win_errs)),
        "tau": float(np.mean(taus)),
        "regret": float(np.mean(regrets)),
        "regret_max": float(np.max(regrets)),
        "per_contender": float(per.mean()),
        "per_contender_max": float(per.max()),
        "launches": len(samples),
        "time_error": float(np.median(time_errs)) if time_errs else float("nan"),
    }


def naive_plan(per_size: dict[int, list[str]], reference: dict[int, str], reps: int) -> list[Launch]:
    """Back to back: each kernel's repetitions in one block, sizes in order (no interleaving)."""
    out = []
    for size in sorted(per_size):
        for kid in [reference[size], *per_size[size]]:
            role = "reference" if kid == reference[size] else "candidate"
            out.extend(Launch(kid, role, size, r) for r in range(reps))
    return out


def naive_scores(samples: pd.DataFrame, flops: dict[int, float]) -> pd.DataFrame:
    """Raw medians, no drift model: score = reference median time / kernel median time."""
    ok = samples[samples["status"] == "ok"]
    med = ok.groupby(["kernel_id", "size_index"])["time_us"].median()
    ref = ok[ok["role"] == "reference"].groupby("size_index")["time_us"].median()
    bad = samples[samples["status"] != "ok"]
    failed = set(zip(bad["kernel_id"], bad["size_index"], strict=True))
    rows = []
    for (k, s), t in med.items():
        status = "failed" if (k, s) in failed else "ok"
        rows.append((k, s, 0, ref[s] / t, np.nan, np.nan, t, flops[s] / (t * 1e3), status, "", 0, "none"))
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


def candidate_space(lib: Library, backend: SimBackend, profile: dict) -> list[dict]:
    """A grid over the knobs that matter, legal and buildable (as tests/test_simgpu.py searches)."""
    tts = [t for t in PARAMS["ThreadTile"].values if set(t) <= {2, 4, 8}]
    wgs = [w for w in PARAMS["WorkGroup"].values if w[0] in (8, 16, 32) and w[1] in (8, 16, 32) and w[2] <= 2]
    vws = (1,) if lib.family.a.bytes >= 16 else (1, 2, 4)
    limits = legality.Limits.from_profile(profile)
    out = []
    for tt, wg, du, pgr, vw in itertools.product(tts, wgs, (8, 16, 32), (1, 2), vws):
        if vw * lib.family.a.bytes > 16 or (lib.family.a.bytes > 4 and vw > 2):
            continue
        p = {"ThreadTile": tt, "WorkGroup": wg, "DepthU": du, "PrefetchGlobalRead": pgr, "VectorWidth": vw}
        p.update(LdsPadA=-1, LdsPadB=-1)
        if (
            legality.check(lib, p, limits).valid
            and backend.gpu.build_outcome(lib.family, p, lib.pattern)[0] == "ok"
        ):
            out.append(canonical(p))
    return out


def sim_scenario(
    name: str,
    n_sizes: int,
    n_cands: int,
    naive_reps: int,
    seed: int,
    profile: dict,
    deck,
    clock: bool = True,
    order: str = "plan",
):
    """One simulated scenario: ``order`` plan or sweeps (Tensile's), ``clock`` whether the scorer sees the
    backend's clock readings (per launch in plan order, per sweep in Tensile's)."""
    lib_deck = deck.libraries[name]
    lib = Library.parse(name)
    problem = Problem.of(lib_deck, profile)
    idx = tuning_indices(lib_deck.sizes, n_sizes)
    sizes = [Size(*map(int, lib_deck.sizes[i][:4])) for i in idx]
    size_lists = [s.as_list() for s in sizes]
    sim = {**SIM, "launch_order": order}
    backend = SimBackend(profile, sim, seed, f"bench:{name}:oto")
    space = candidate_space(lib, backend, profile)
    rng = np.random.default_rng(seed)
    # A late generation: half close competitors (the best of the space on these sizes), half random.
    true_space = np.array([backend.ground_truth(problem, p, sizes) for p in space])
    geo = np.exp(np.log(true_space).mean(axis=1))
    top = list(np.argsort(geo)[: n_cands // 2])
    rest = [i for i in rng.permutation(len(space)) if i not in top][: n_cands - len(top)]
    kernels = {candidate_id(space[i]): space[i] for i in [*top, *rest]}
    reference = {}
    for j, i in enumerate(idx):
        params = canonical(lib_deck.reference_params(i))
        reference[j] = candidate_id(params)
        kernels.setdefault(reference[j], params)
    kmap = {k: Kernel(k, p) for k, p in kernels.items()}
    cands = {j: [k for k in kernels if k != reference[j]] for j in range(len(sizes))}
    flops = {j: gemm_flops(lib.family, *s) for j, s in enumerate(size_lists)}

    def measure_with(be):
        def measure(launches):
            return measure_frame(be, problem, MeasurePlan(kmap, sizes, launches), Path("."))

        return measure

    def score(df, only):  # without telemetry the scorer sees no clock (the bench still grades with it)
        if not clock:
            df = df.assign(clock_mhz=np.nan, clock_telemetry="none")
        return score_library(df, lib, size_lists, profile, CONFIG, only)

    def truth_at(samples: pd.DataFrame) -> dict[tuple[str, int], float]:
        """True times in the batch's median clock state, the state scores refer to (measurement.scoring)."""
        ok = samples[samples["status"] == "ok"]
        clock_mhz = float(np.median(ok["clock_mhz"])) if len(ok) else None
        out = {}
        for k, p in kernels.items():
            t = backend.ground_truth(problem, p, sizes, clock_mhz)
            out.update({(k, j): float(t[j]) for j in range(len(sizes))})
        return out

    t0 = time.perf_counter()
    res = race(
        measure_with(backend),
        score,
        lambda per, reps, off, rnd: interleave_sizes(per, reference, reps, f"{seed}:{rnd}", off),
        cands,
        reference,
        RaceSettings.from_config(CONFIG["benchmark"]),
    )
    oto_s = time.perf_counter() - t0
    naive_backend = SimBackend(profile, SIM, seed, f"bench:{name}:naive")
    naive = measure_with(naive_backend)(naive_plan(cands, reference, naive_reps))
    stops = pd.Series([d.stop for d in res.decisions.values()]).value_counts().to_dict()
    drift = res.scores["drift"].iloc[0] if len(res.scores) else ""
    nominal = {
        (k, j): float(t)
        for k, p in kernels.items()
        for j, t in enumerate(backend.ground_truth(problem, p, sizes))
    }
    return (
        grade(naive_scores(naive, flops), truth_at(naive), reference, naive, nominal),
        grade(res.scores, truth_at(res.samples), reference, res.samples, nominal),
        {"stops": stops, "rounds": res.rounds, "seconds": oto_s, "drift": drift},
    )


def replay_scenario(path: Path, n_sizes: int, n_cands: int, naive_reps: int, seed: int, drift: bool):
    """Each 'size' is a group of near-optimal configurations (the hard case: late generations), one of them
    the reference; launch times are recorded repetitions, optionally times the simulator's drift."""
    times = load_times(path)
    keys = sorted(times, key=lambda k: np.mean(times[k]))
    rng = np.random.default_rng(seed)
    pool = keys[: max(200, 4 * n_cands)]
    kernels, reference = {}, {}
    for j in range(n_sizes):
        chosen = [pool[i] for i in rng.choice(len(pool), n_cands + 1, replace=False)]
        kernels[j] = {f"c{i}": key for i, key in enumerate(chosen)}
        reference[j] = f"c{rng.integers(n_cands + 1)}"
    cands = {j: [k for k in kernels[j] if k != reference[j]] for j in range(n_sizes)}
    truth = {(k, j): float(np.mean(times[key])) for j in kernels for k, key in kernels[j].items()}

    def drift_fn(stream: str):
        if not drift:
            return None
        nm = NoiseModel(seed, stream, drift_period_s=SIM["drift_period_s"])
        step_us = float(np.mean(list(truth.values()))) + SIM["cooldown_us"]
        return lambda i: nm.drift_factor(i * step_us)

    flops = dict.fromkeys(range(n_sizes), 1.0)

    def score(df, only):
        return score_samples(df, flops, bootstrap=CONFIG["benchmark"]["bootstrap"], seed=seed, sizes=only)

    oto_noise = ReplayNoise(times, kernels, seed, drift_fn("oto"))
    res = race(
        oto_noise.measure,
        score,
        lambda per, reps, off, rnd: interleave_sizes(per, reference, reps, f"{seed}:{rnd}", off),
        cands,
        reference,
        RaceSettings.from_config(CONFIG["benchmark"]),
    )
    naive_noise = ReplayNoise(times, kernels, seed + 1, drift_fn("naive"))
    naive = naive_noise.measure(naive_plan(cands, reference, naive_reps))
    stops = pd.Series([d.stop for d in res.decisions.values()]).value_counts().to_dict()
    return (
        grade(naive_scores(naive, flops), truth, reference, naive),
        grade(res.scores, truth, reference, res.samples),
        {"stops": stops, "rounds": res.rounds, "seconds": 0.0, "drift": res.scores["drift"].iloc[0]},
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, default=8)
    ap.add_argument("--candidates", type=int, default=12)
    ap.add_argument("--naive-reps", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--only", default="", help="run only the scenarios whose label contains this text")
    args = ap.parse_args()
    profile = load_profile(REPO / "arch_profiles" / "gfx90c.yaml")
    deck = load_deck("manifest")
    scenarios = []
    for order, clock, suffix in (
        ("plan", True, ""),
        ("plan", False, " no clock"),
        ("sweeps", True, " Tensile's order, per-sweep telemetry"),
        ("sweeps", False, " Tensile's order, no telemetry"),
    ):
        scenarios += [(f"sim {n.removeprefix('Cijk_')}{suffix}", "sim", (n, clock, order)) for n in LIBRARIES]
    for f in sorted(REPLAY.glob("*.json.gz")):
        stem = f.name.removesuffix(".json.gz")
        scenarios += [
            (f"replay {stem}", "replay", (f, False)),
            (f"replay {stem} +drift", "replay", (f, True)),
        ]
    scenarios = [sc for sc in scenarios if args.only in sc[0]]
    header = (f"{'scenario':60} {'pipeline':8} {'error':>7} {'err p90':>8} {'tau':>6} {'regret':>7} "
              f"{'reg max':>8} {'win err':>8} {'time err':>8} {'samples/c':>9} {'max/c':>5} {'launches':>9}  "
              "drift; racing stops")  # fmt: skip
    print(header)
    print("-" * len(header))
    totals: dict[str, list[dict]] = {"naive": [], "oto": []}
    for label, kind, arg in scenarios:
        runs = []
        for seed in range(1, args.seeds + 1):
            if kind == "sim":
                runs.append(
                    sim_scenario(
                        arg[0], args.sizes, args.candidates, args.naive_reps, seed, profile, deck, *arg[1:]
                    )
                )
            else:
                if not arg[0].exists():
                    continue
                runs.append(
                    replay_scenario(arg[0], args.sizes, args.candidates, args.naive_reps, seed, arg[1])
                )
        if not runs:
            continue
        stops: dict[str, int] = {}
        for r in runs:
            for k, v in r[2]["stops"].items():
                stops[k] = stops.get(k, 0) + v
        for pi, pipe in enumerate(("naive", "oto")):
            m = {k: float(np.mean([r[pi][k] for r in runs])) for k in runs[0][pi]}
            kind_of = "tensile" if "Tensile" in label else kind
            totals[pipe].append({**m, "kind": kind_of})
            extra = ", ".join(f"{k} {v}" for k, v in sorted(stops.items())) if pipe == "oto" else ""
            extra = f"{runs[0][2]['drift']}; {extra}" if pipe == "oto" else ""
            print(
                f"{label:60} {pipe:8} {m['error']:7.2%} {m['error_p90']:8.2%} {m['tau']:6.3f} "
                f"{m['regret']:7.2%} {m['regret_max']:8.2%} {m['win_error']:8.2%} {m['time_error']:8.2%} "
                f"{m['per_contender']:9.1f} {m['per_contender_max']:5.0f} {m['launches']:9.0f}  {extra}"
            )
    print("-" * len(header))
    groups = (
        ("simulated, plan order", {"sim"}),
        ("simulated, Tensile's order", {"tensile"}),
        ("replayed", {"replay"}),
        ("scenarios", {"sim", "tensile", "replay"}),
    )
    for label, kinds in groups:
        for pipe, ms in totals.items():
            ms = [m for m in ms if m["kind"] in kinds]
            if not ms:
                continue
            keys = ("error", "tau", "regret", "win_error", "per_contender")
            mean = {k: float(np.mean([m[k] for m in ms])) for k in keys}
            print(f"{'mean over ' + label:60} {pipe:8} {mean['error']:7.2%} {'':8} {mean['tau']:6.3f} "
                  f"{mean['regret']:7.2%} {'':8} {mean['win_error']:8.2%} {'':8} "
                  f"{mean['per_contender']:9.1f}")  # fmt: skip
    print("targets (oto, simulated): error <= 2%, regret <= 1%, <= 40 samples per contender")


if __name__ == "__main__":
    sys.exit(main())

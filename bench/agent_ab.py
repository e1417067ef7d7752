"""A/B of the hypothesis engine: agent + symbolic against symbolic alone, at equal benchmark budget.

Both arms benchmark the same number of candidates per generation (``--per-generation``) for the same
number of generations; in the agent arm Claude fills ``--agent-slots`` of them through oto.agent (validated
exactly as in the workflow) and the symbolic strategy the rest. Spaces:

* sim: libraries of the deck on the simulated gfx90c, noise-free (``SimGPU.true_time_us``) so the arms differ
  only by what they proposed. Metric: geomean over the tuning sizes of the best score so far (score = shipped
  solution time / kernel time; 1 = spoof floor).
* replay: recorded Kernel Tuner spaces in ../shared/reference/replay (real GPUs). Metric: best-so-far fraction
  of the optimum (optimum time / best time found). The symbolic arm is a seeded local search on that space.

Needs ANTHROPIC_API_KEY (it calls Claude; cost is capped by --max-usd). Without a key it says so and stops,
or, with ``--symbolic-only``, runs the symbolic arm alone so the harness itself can be checked.

    python bench/agent_ab.py [--seeds 3] [--generations 4] [--per-generation 12] [--agent-slots 4]
                             [--spaces sim,replay] [--model ID] [--json OUT]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import statistics
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from oto.agent.digest import hardware, tensile_digest  # noqa: E402
from oto.agent.engine import propose  # noqa: E402
from oto.agent.settings import (  # noqa: E402
    KEY_ENV,  # noqa: E402
    AgentSettings,
    api_key,
)
from oto.deck.sources import SHIPPED_MANIFEST, read_manifest  # noqa: E402
from oto.deck.tuning_sizes import shipped_seeds  # noqa: E402
from oto.gemm import Library  # noqa: E402
from oto.hardware.profile import load_profile  # noqa: E402
from oto.hardware.simulated.performance import SimGPU  # noqa: E402
from oto.search.space import Parameter, Space  # noqa: E402
from oto.search.strategies.base import Evidence, Observation  # noqa: E402
from oto.search.strategies.symbolic import SymbolicStrategy  # noqa: E402
from oto.search.tensile_space import tensile_space  # noqa: E402
from oto.tensile import legality  # noqa: E402
from oto.tensile.params import canonical  # noqa: E402

REPLAY_DIR = REPO.parent / "shared" / "reference" / "replay"
SIM_LIBRARIES = ("Cijk_Ailk_Bljk_SB", "Cijk_Ailk_Bljk_DB", "Cijk_Alik_Bljk_HB")
REPLAY_FILES = ("gemm_RTX_2080_Ti.json.gz", "convolution_A4000.json.gz")
NO_KEY = (
    f"agent_ab: cannot run here: {KEY_ENV} is not set. This benchmark asks Claude for proposals; set the key "
    "(cost is capped by --max-usd) to compare agent + symbolic with symbolic alone."
)
# What the recorded parameters mean (the agent reads these; the README of the replay data names the mapping).
REPLAY_DOCS = {
    "MWG": "tile size in M per workgroup (~ Tensile MacroTile0)",
    "NWG": "tile size in N per workgroup (~ MacroTile1)",
    "KWG": "tile size in K (~ DepthU)",
    "MDIMC": "threads per workgroup in M (~ WorkGroup[0])",
    "NDIMC": "threads per workgroup in N (~ WorkGroup[1])",
    "MDIMA": "re-shaped thread layout for loading A",
    "NDIMB": "re-shaped thread layout for loading B",
    "KWI": "unroll factor of the K loop",
    "VWM": "vector width of loads/stores in M (~ VectorWidth)",
    "VWN": "vector width of loads/stores in N",
    "STRM": "strided (1) or contiguous (0) access of A per thread",
    "STRN": "strided (1) or contiguous (0) access of B per thread",
    "SA": "stage A through local memory (1) or not (0)",
    "SB": "stage B through local memory (1) or not (0)",
    "PRECISION": "floating-point precision in bits",
    "block_size_x": "threads per block in x",
    "block_size_y": "threads per block in y",
    "tile_size_x": "outputs per thread in x",
    "tile_size_y": "outputs per thread in y",
    "read_only": "read the input through the read-only cache",
    "use_padding": "pad shared memory to avoid bank conflicts",
    "use_shmem": "stage the input in shared memory",
    "use_cmem": "filter in constant memory",
    "filter_height": "convolution filter height",
    "filter_width": "convolution filter width",
}


@dataclass
class Arm:
    """Everything one arm measured on one space and seed."""

    results: dict[str, tuple[Any, str]] = field(default_factory=dict)  # id -> (value, failure)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    curve: list[float] = field(default_factory=list)  # metric after each generation
    agent_accepted: int = 0
    agent_rejected: int = 0
    agent_failed: int = 0
    tokens: int = 0
    usd: float = 0.0


# ---- the simulated GPU ----------------------------------------------------------------------------------


class SimProblem:
    """One library on the simulated GPU, noise-free; a kernel's value is its score at each tuning size."""

    def __init__(self, name: str, profile: Mapping[str, Any], seed: int, sizes: int):
        from oto.deck.tuning_sizes import tuning_indices

        self.deck = read_manifest(SHIPPED_MANIFEST).libraries[name]
        self.library = Library.parse(name)
        self.profile = profile
        self.gpu = SimGPU(profile, seed)
        self.n_sizes = sizes
        idx = tuning_indices(self.deck.sizes, sizes)
        self.sizes = [list(self.deck.sizes[i][:4]) for i in idx]
        self.size_arrays = [np.asarray([s[j] for s in self.sizes], dtype=float) for j in range(4)]
        ref = [canonical(self.deck.solutions[int(self.deck.shipped[i][0])]["params"]) for i in idx]
        self.ref_us = np.asarray(
            [float(self._times(p)[j]) for j, p in enumerate(ref)], dtype=float
        )  # the spoof floor at each size
        self.limits = legality.Limits.from_profile(profile)
        self.space = tensile_space(self.library, self.limits)
        self.name = f"sim:{name}"

    def _times(self, params: Mapping[str, Any]) -> np.ndarray:
        m, n, b, k = self.size_arrays
        return self.gpu.true_time_us(self.library.family, params, m, n, b, k, self.library.pattern)

    def evaluate(self, params: Mapping[str, Any]) -> tuple[Any, str]:
        status, reason, _ = self.gpu.build_outcome(self.library.family, params, self.library.pattern)
        if status != "ok":
            return None, status
        return self.ref_us / self._times(params), ""

    def metric(self, arm: Arm) -> float:
        best = np.ones(len(self.sizes))  # the shipped kernel is measured every generation, as in the workflow
        for value, _ in arm.results.values():
            if value is not None:
                best = np.maximum(best, value)
        return float(np.exp(np.mean(np.log(best))))

    def symbolic(self, arm: Arm, generation: int, n: int, seed: int, seen: frozenset[str]) -> list[dict]:
        evidence = Evidence(
            space=self.space,
            generation=generation,
            observations=self._observations(arm),
            seeds=shipped_seeds(self.deck, self.n_sizes),
            seen=seen,
        )
        return [dict(p.params) for p in SymbolicStrategy(seed).ask(evidence, n)]

    def _observations(self, arm: Arm) -> list[Observation]:
        obs = []
        for kid, (value, failure) in arm.results.items():
            score = float(np.exp(np.mean(np.log(value)))) if value is not None else None
            obs.append(Observation(kid, arm.params[kid], score, 0, failure))
        return sorted(obs, key=lambda o: (o.score is None, -(o.score or 0)))

    def agent_inputs(self, arm: Arm, generation: int) -> tuple[Space, dict, dict]:
        obs = self._observations(arm)
        best: dict[int, tuple[str, float]] = {}
        for kid, (value, _) in arm.results.items():
            for i, s in enumerate(value if value is not None else []):
                if i not in best or s > best[i][1]:
                    best[i] = (kid, float(s))
        selection = {
            "sizes": self.sizes,
            "per_size": [
                {"size_index": i, "winner": w, "score": round(s, 4), "verdict": "win" if s > 1.02 else "tie"}
                for i, (w, s) in sorted(best.items())
            ],
            "kernels": {w: arm.params[w] for w, _ in best.values()},
            "summary": {"geomean_score": round(self.metric(arm), 4)},
            "observations": [
                {"id": o.kernel_id, "params": o.params, "score": o.score, "failure": o.failure} for o in obs
            ],
            "measured": list(arm.results),
        }
        digest = tensile_digest(
            self.library,
            generation,
            selection if arm.results else None,
            shipped_seeds(self.deck, self.n_sizes),
            self.profile,
        )
        return self.space, digest, hardware(self.profile)


# ---- recorded Kernel Tuner spaces -------------------------------------------------------------------------


class ReplayProblem:
    """A Kernel Tuner cache as an oracle: value = recorded mean time in ms; absent configs are illegal."""

    def __init__(self, path: Path):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        self.keys = list(doc["tune_params_keys"])
        self.cache: dict[str, Any] = doc["cache"]
        self.device, self.kernel = doc.get("device_name", "?"), doc.get("kernel_name", "?")
        self.problem_size = doc.get("problem_size")
        params = tuple(
            Parameter(k, tuple(doc["tune_params"][k]), None, REPLAY_DOCS.get(k, "")) for k in self.keys
        )
        self.space = Space(f"replay:{path.name}", params, identify=self.key, explain=self._violations)
        times = [v["time"] for v in self.cache.values() if isinstance(v.get("time"), int | float)]
        self.optimum = min(times)
        self.valid_keys = sorted(self.cache)
        self.name = f"replay:{path.name.split('.')[0]}"

    def key(self, cfg: Mapping[str, Any]) -> str:
        return ",".join(str(cfg[k]) for k in self.keys)

    def _violations(self, cfg: Mapping[str, Any]) -> tuple[str, ...]:
        return () if self.key(cfg) in self.cache else ("violates the space's restrictions (never compiles)",)

    def evaluate(self, cfg: Mapping[str, Any]) -> tuple[Any, str]:
        t = self.cache[self.key(cfg)]["time"]
        return (float(t), "") if isinstance(t, int | float) else (None, str(t))

    def metric(self, arm: Arm) -> float:
        times = [v for v, _ in arm.results.values() if v is not None]
        return self.optimum / min(times) if times else 0.0

    def _config(self, key: str) -> dict[str, Any]:
        rec = self.cache[key]
        return {k: rec[k] for k in self.keys}

    def symbolic(self, arm: Arm, generation: int, n: int, seed: int, seen: frozenset[str]) -> list[dict]:
        """The symbolic strategy in the recorded space (score = 1 / recorded time)."""
        obs = [
            Observation(k, arm.params[k], None if v is None else 1.0 / v, 0, f)
            for k, (v, f) in arm.results.items()
        ]
        evidence = Evidence(
            space=self.space,
            generation=generation,
            observations=sorted(obs, key=lambda o: (o.score is None, -(o.score or 0))),
            seen=seen,
        )
        return [dict(p.params) for p in SymbolicStrategy(seed).ask(evidence, n)]

    def agent_inputs(self, arm: Arm, generation: int) -> tuple[Space, dict, dict]:
        tried = sorted(
            arm.results.items(), key=lambda kv: (kv[1][0] is None, kv[1][0] if kv[1][0] is not None else 0)
        )
        digest = {
            "generation": generation,
            "objective": "kernel time in ms, lower is better",
            "best_time_ms": min((v for _, (v, _) in tried if v is not None), default=None),
            "tried": [{"params": arm.params[k], "time_ms": v, "failure": f} for k, (v, f) in tried[:48]],
            "measured_count": len(arm.results),
        }
        hw = {"device": self.device, "kernel": self.kernel, "problem_size": self.problem_size}
        return self.space, digest, hw


# ---- the loop ---------------------------------------------------------------------------------------------


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "little")


def run_arm(
    problem: Any,
    seed: int,
    generations: int,
    per_gen: int,
    agent: Callable[[Any, Arm, int, int, frozenset[str]], list[dict]] | None,
    slots: int,
) -> Arm:
    arm = Arm()
    for gen in range(generations):
        seen = frozenset(arm.results)
        proposed = agent(problem, arm, gen, slots, seen) if agent else []
        key_of = problem.space.id_of
        taken = seen | {key_of(p) for p in proposed}
        proposed += problem.symbolic(arm, gen, per_gen - len(proposed), seed, taken)
        for cfg in proposed[:per_gen]:  # equal budget: never more than per_gen benchmarks a generation
            kid = key_of(cfg)
            arm.params[kid] = cfg
            arm.results[kid] = problem.evaluate(cfg)
        arm.curve.append(problem.metric(arm))
    return arm


def make_agent(settings: AgentSettings, key: str, workdir: Path) -> Callable:
    def ask(problem: Any, arm: Arm, gen: int, slots: int, seen: frozenset[str]) -> list[dict]:
        space, digest, hw = problem.agent_inputs(arm, gen)
        out = propose(
            space, digest, hw, slots, seen, settings, key,
            workdir / "ledger.json", workdir / f"{problem.name.replace(':', '_')}_gen{gen}.jsonl",
            job=f"{problem.name}/gen{gen}",
        )  # fmt: skip
        arm.agent_accepted += len(out.proposals)
        arm.agent_rejected += len(out.rejected)
        arm.agent_failed += out.status != "used"
        arm.tokens += sum(out.usage.values())
        arm.usd += out.usd
        if out.status != "used":
            print(f"  agent {problem.name} gen{gen}: {out.status}: {out.reason}", file=sys.stderr)
        return [p["params"] for p in out.proposals]

    return ask


def _mean_sd(xs: list[float]) -> str:
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return "n/a"
    return f"{statistics.mean(xs):.4f} ± {statistics.stdev(xs) if len(xs) > 1 else 0.0:.4f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--per-generation", type=int, default=12)
    ap.add_argument("--agent-slots", type=int, default=4)
    ap.add_argument("--sizes", type=int, default=16, help="tuning sizes per sim library")
    ap.add_argument("--spaces", default="sim,replay")
    ap.add_argument("--libraries", default=",".join(SIM_LIBRARIES))
    ap.add_argument("--model", default=None)
    ap.add_argument("--max-usd", type=float, default=5.0)
    ap.add_argument("--base-url", default=None, help="API endpoint override (gateway or test server)")
    ap.add_argument("--symbolic-only", action="store_true", help="run the symbolic arm alone (no key needed)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    key = api_key()
    if key is None:
        print(NO_KEY)
        if not args.symbolic_only:
            return 0
        print("agent_ab: --symbolic-only: running the symbolic arm alone to check the harness.")
    with_agent = key is not None and not args.symbolic_only
    settings = AgentSettings(
        model=args.model or AgentSettings().model,
        max_usd_per_run=args.max_usd,
        max_tokens_per_run=10**9,
        base_url=args.base_url,
    )

    profile = load_profile(REPO / "arch_profiles" / "gfx90c.yaml")
    spaces = set(args.spaces.split(","))
    problems: list[Callable[[int], Any]] = []
    if "sim" in spaces:
        for name in args.libraries.split(","):
            problems.append(lambda s, name=name: SimProblem(name, profile, s, args.sizes))
    if "replay" in spaces:
        for fname in REPLAY_FILES:
            path = REPLAY_DIR / fname
            if path.exists():
                cached = ReplayProblem(path)
                problems.append(lambda s, p=cached: p)
            else:
                print(f"agent_ab: {path} not found; replay space skipped", file=sys.stderr)

    rows, report = [], []
    with tempfile.TemporaryDirectory() as tmp:
        agent = make_agent(settings, key, Path(tmp)) if with_agent else None
        for make in problems:
            per_arm: dict[str, list[Arm]] = {"symbolic": [], "agent+symbolic": []}
            name = ""
            for seed in range(args.seeds):
                problem = make(seed)
                name = problem.name
                per_arm["symbolic"].append(
                    run_arm(problem, seed, args.generations, args.per_generation, None, 0)
                )
                if agent:
                    per_arm["agent+symbolic"].append(
                        run_arm(problem, seed, args.generations, args.per_generation, agent, args.agent_slots)
                    )
            for arm_name, arms in per_arm.items():
                if not arms:
                    rows.append((name, arm_name, "n/a (no key)", "", "", ""))
                    continue
                curves = [[round(x, 4) for x in a.curve] for a in arms]
                mid = [statistics.mean(c[g] for c in curves) for g in range(args.generations)]
                agent_cols = (
                    f"{sum(a.agent_accepted for a in arms)}/{sum(a.agent_rejected for a in arms)}"
                    f"/{sum(a.agent_failed for a in arms)}"
                    if arm_name != "symbolic"
                    else ""
                )
                cost = (
                    f"{sum(a.tokens for a in arms)} tok ${sum(a.usd for a in arms):.3f}" if agent_cols else ""
                )
                rows.append((name, arm_name, _mean_sd([c[-1] for c in curves]),
                             " ".join(f"{x:.3f}" for x in mid), agent_cols, cost))  # fmt: skip
                report.append({"space": name, "arm": arm_name, "curves": curves})

    budget = args.generations * args.per_generation
    print(
        f"\nagent A/B: {args.seeds} seeds, {args.generations} generations x {args.per_generation} benchmarks "
        f"= {budget} per arm, agent slots {args.agent_slots}, model {settings.model}"
    )
    print("metric: sim = geomean best score vs spoof floor (noise-free); replay = best fraction of optimum\n")
    head = ("space", "arm", f"final (mean ± sd, {args.seeds} seeds)", "mean per generation", "acc/rej/fail",
            "cost")  # fmt: skip
    print(f"{head[0]:34s} {head[1]:15s} {head[2]:28s} {head[3]:30s} {head[4]:13s} {head[5]}")
    for r in rows:
        print(f"{r[0]:34s} {r[1]:15s} {r[2]:28s} {r[3]:30s} {r[4]:13s} {r[5]}")
    if args.json:
        args.json.write_text(json.dumps({"settings": vars(args) | {"json": str(args.json)}, "arms": report}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

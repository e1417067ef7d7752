# Config and arch-profile validation (the dry-run fails here, naming the file and field), the run plan,
# wildcard constraints and the input functions that unroll generations.

import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))  # the oto package of this checkout

from oto.run.estimate import record_run_estimate
from oto.run.lock import RunLockError, acquire_run_lock
from oto.run.plan import PlanError, plan_run
from snakemake.exceptions import WorkflowError

try:
    PLAN = plan_run(config, workflow.configfiles)
except PlanError as exc:
    raise WorkflowError(str(exc)) from None

config.update(PLAN.config)  # scripts see the validated config, defaults included
ARCH = PLAN.arch
MAXGEN = PLAN.max_generations
LIBRARIES = PLAN.libraries
PROFILE = f"arch_profiles/{ARCH}.yaml"


wildcard_constraints:
    arch=ARCH,
    library=r"Cijk_[A-Za-z0-9_]+",
    gen=r"\d+",
    family=r"[A-Za-z0-9_]+",
    prefix=r"[a-z0-9]+",


def take_run_lock():
    """One run per folder; called from the Snakefile's onstart (a real run, never -n or --lint)."""
    try:
        acquire_run_lock()
    except RunLockError as exc:
        raise WorkflowError(str(exc)) from None


def library_dir(wc):
    if why := PLAN.not_selected(library=wc.library):
        raise WorkflowError(why)
    return f"results/{wc.arch}/{wc.library}"


def generation_inputs(wc, **files):
    """Files of this generation plus, after gen0, the previous generation's selection."""
    gen = int(wc.gen)
    out = {k: f"{library_dir(wc)}/gen{gen}/{v}" for k, v in files.items()}
    if gen > 0:
        out["previous"] = f"{library_dir(wc)}/gen{gen - 1}/selection.yaml"
    return out


def mutate_inputs(wc):
    out = {"deck": f"{library_dir(wc)}/deck.yaml", "profile": PROFILE, **generation_inputs(wc)}
    if int(wc.gen) > 0:  # the agent's digest: failure reasons and kernel resources of the last generation
        prev = f"{library_dir(wc)}/gen{int(wc.gen) - 1}"
        out.update(prev_build=f"{prev}/build.yaml", prev_candidates=f"{prev}/candidates.yaml")
    return out


def emit_inputs(wc):
    return {
        "deck": f"{library_dir(wc)}/deck.yaml",
        "profile": PROFILE,
        **generation_inputs(wc, proposals="proposals.yaml"),
    }


def select_inputs(wc):
    return {
        "profile": PROFILE,
        **generation_inputs(wc, scores="scores.csv", candidates="candidates.yaml",
                            build="build.yaml"),
    }


def last_selection(wc):
    return f"{library_dir(wc)}/gen{MAXGEN - 1}/selection.yaml"


def logic_path(library):
    return f"results/{ARCH}/logic/{PLAN.logic_prefix}_{library}.yaml"


def family_inputs(wc):
    if why := PLAN.not_selected(family=wc.family):
        raise WorkflowError(why)
    libs = PLAN.families[wc.family]
    return {
        "finals": [f"results/{wc.arch}/{lib}/final.yaml" for lib in libs],
        "logic": [logic_path(lib) for lib in libs],
    }

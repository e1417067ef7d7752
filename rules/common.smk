# Config and arch-profile validation (the dry-run fails here, naming the file and field), the run plan,
# wildcard constraints and the input functions that unroll generations.

import functools
import sys
from pathlib import Path

# The oto package of this checkout is on sys.path: the Snakefile puts it there before reading the config.
from oto.agent.breaker import reset as reset_agent_breaker
from oto.run import dry_run
from oto.run.estimate import record_run_estimate
from oto.run.lock import RunLockError, acquire_run_lock
from oto.run.plan import PlanError, plan_run
from oto.run.profile_views import change_note, record_profile, stage_view
from oto.stages import stages
from snakemake.exceptions import WorkflowError

try:
    PLAN = plan_run(config, workflow.configfiles, workflow.config_settings.config)
except PlanError as exc:
    raise WorkflowError(str(exc)) from None

config.update(PLAN.config)  # scripts see the validated config, defaults included
ARCH = PLAN.arch
MAXGEN = PLAN.max_generations
LIBRARIES = PLAN.libraries
PROFILE = PLAN.profile_file  # the arch profile, or the device profile refining it (config device_profile)
RESULTS = Path("results") / ARCH

# A profile edit that changes figures some stages read: say which before any job is redone.
PROFILE_NOTE = change_note(PLAN.profile, PROFILE, RESULTS, PLAN.config, LIBRARIES)
if PROFILE_NOTE:
    print(PROFILE_NOTE, file=sys.stderr)


wildcard_constraints:
    arch=ARCH,
    library=PLAN.library_pattern,  # never a library an earlier run finished and this one leaves alone
    gen=r"\d+",
    family=r"[A-Za-z0-9_]+",
    prefix=r"[a-z0-9]+",


def jobs_already_done():
    """(jobs of the requested targets already done in this folder, jobs of the targets): the stage jobs of the
    DAG that need no run, for the first line of a resumed run (asked once the DAG is built)."""
    names = {s.name for s in stages()}
    jobs = [job for job in workflow.dag.jobs if job.rule.name in names]
    return sum(1 for job in jobs if not workflow.dag.needrun(job)), len(jobs)


# oto's logger prints a dry-run's plan from these (in memory, nothing is written).
dry_run.remember(PLAN, jobs_already_done)


def start_run():
    """The Snakefile's onstart (a real run, never -n or --lint): one run per folder, the profile this run
    starts with recorded for the next run's change note, and the agent's circuit breaker closed (a new run
    tries the endpoint again)."""
    try:
        acquire_run_lock()
    except RunLockError as exc:
        raise WorkflowError(str(exc)) from None
    record_profile(PLAN.profile, PROFILE, RESULTS)
    reset_agent_breaker(RESULTS / "agent")


@functools.cache
def _stage_view(stage, library):
    return stage_view(PLAN.profile, stage, PLAN.config, library)


def profile_view(stage):
    """The arch-profile figures a stage reads (oto.run.profile_views), as a param: a job re-runs exactly when
    one of them changes, never for a comment or a reordered key (the profile file itself is ancient)."""
    return lambda wc: _stage_view(stage, getattr(wc, "library", None))


def library_dir(wc):
    if why := PLAN.not_selected(library=wc.library):
        raise WorkflowError(why)
    return f"results/{wc.arch}/{wc.library}"


def deck_inputs(wc):
    """The files one library's deck job reads (a library not selected: why, and how to add it)."""
    library_dir(wc)
    return {"source": PLAN.deck_inputs[wc.library], "profile": ancient(PROFILE)}


def generation_inputs(wc, **files):
    """Files of this generation plus, after gen0, the previous generation's selection."""
    gen = int(wc.gen)
    out = {k: f"{library_dir(wc)}/gen{gen}/{v}" for k, v in files.items()}
    if gen > 0:
        out["previous"] = f"{library_dir(wc)}/gen{gen - 1}/selection.yaml"
    return out


def mutate_inputs(wc):
    out = {"deck": f"{library_dir(wc)}/deck.yaml", "profile": ancient(PROFILE), **generation_inputs(wc)}
    if int(wc.gen) > 0:  # the agent's digest: failure reasons and kernel resources of the last generation
        prev = f"{library_dir(wc)}/gen{int(wc.gen) - 1}"
        out.update(prev_build=f"{prev}/build.yaml", prev_candidates=f"{prev}/candidates.yaml")
        if config["budget"]:  # the generation's shares, decided once for every library (rule budget)
            out["budget"] = f"results/{wc.arch}/budget/gen{wc.gen}.yaml"
    return out


def budget_inputs(wc):
    """What the budget job of a generation after gen0 shares the GPU time by (oto.measurement.budget): every
    library's deck and previous selection, and the samples.csv of every generation done; a barrier, as
    every library's next generation waits for it."""
    gen = int(wc.gen)
    if not config["budget"]:
        raise WorkflowError(f"results/{wc.arch}/budget/gen{gen}.yaml: the config sets no budget")
    if not 0 < gen < MAXGEN:
        raise WorkflowError(
            f"results/{wc.arch}/budget/gen{gen}.yaml: the budget decides generations 1 to "
            f"{MAXGEN - 1} (max_generations {MAXGEN})"
        )
    previous = {"previous": f"results/{wc.arch}/budget/gen{gen - 1}.yaml"} if gen > 1 else {}
    return {
        "decks": [f"{RESULTS}/{lib}/deck.yaml" for lib in LIBRARIES],
        "selections": [f"{RESULTS}/{lib}/gen{gen - 1}/selection.yaml" for lib in LIBRARIES],
        "samples": [f"{RESULTS}/{lib}/gen{g}/samples.csv" for lib in LIBRARIES for g in range(gen)],
        **previous,  # its own decision before: which libraries have swept (config budget.sweep)
    }


def budget_libraries(wc):
    """The library set a budget file must name, as mutate's param: gen0 reads no budget, so setting one
    re-plans no gen0."""
    return LIBRARIES if config["budget"] and int(wc.gen) > 0 else []


def emit_inputs(wc):
    return {
        "deck": f"{library_dir(wc)}/deck.yaml",
        "profile": ancient(PROFILE),
        **generation_inputs(wc, proposals="proposals.yaml"),
    }


def select_inputs(wc):
    return {
        "profile": ancient(PROFILE),
        **generation_inputs(wc, scores="scores.csv", candidates="candidates.yaml", build="build.yaml"),
    }


def last_selection(wc):
    return f"{library_dir(wc)}/gen{MAXGEN - 1}/selection.yaml"


def logic_path(library):
    return f"results/{ARCH}/logic/{PLAN.logic_prefix}_{library}.yaml"


def logic_provenance_path(library):
    return f"results/{ARCH}/logic/{PLAN.logic_prefix}_{library}.provenance.json"


def family_inputs(wc):
    if why := PLAN.not_selected(family=wc.family):
        raise WorkflowError(why)
    libs = PLAN.families[wc.family]
    return {
        "finals": [f"results/{wc.arch}/{lib}/final.yaml" for lib in libs],
        "logic": [logic_path(lib) for lib in libs],
    }

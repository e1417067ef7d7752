"""Each stage is declared once, beside its code (``STAGE = Stage(...)`` in oto/stages/<stage>.py), and the
declarations agree with the workflow Snakemake runs: its rules, each job's outputs and GPU resource, which
rules read which (the workflow order), the jobs per rule of a run (oto plan, the progress line), the rules
that take a profile view, the cluster profile, and docs/architecture.md's stage table."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections import Counter

import oto.stages
import pytest
import yaml
from oto.run.estimate import run_jobs
from oto.run.profile_views import stage_fields
from oto.run.progress import GPU_RULES
from oto.stages import BACKEND_FIELDS, PROVENANCE_FIELDS, Stage, declaration, gpu_stages, stages
from workflow_helpers import FAST_CONFIG, REPO, make_workdir, snakemake

ARCH = FAST_CONFIG["arch"]
LIBRARIES, GENERATIONS, FAMILIES = 2, FAST_CONFIG["max_generations"], 1  # DB × {NN, NT}
TARGETS = (f"results/{ARCH}/TensileLibrary.dat", f"results/{ARCH}/family/DB.yaml")  # family: on request
BUDGETED = {**FAST_CONFIG, "budget": {"hours": 1.0}, "max_generations": 3}  # gen2's budget reads gen1's


def _jobs(stdout: str) -> list[dict[str, str]]:
    """The jobs of a dry-run's listing: rule, input, output, wildcards, resources…"""
    jobs: list[dict[str, str]] = []
    for line in stdout.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):$", line):
            jobs.append({"rule": m.group(1)})
        elif jobs and (m := re.match(r"^    (\w+): (.*)$", line)):
            jobs[-1][m.group(1)] = m.group(2)
    return [j for j in jobs if j["rule"] != "all"]


def _pairs(text: str | None) -> dict[str, str]:
    return dict(p.split("=", 1) for p in (text or "").split(", ") if "=" in p)


def _files(text: str | None) -> list[str]:
    return [f for f in (text or "").split(", ") if f]


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    """(the rules Snakemake lists, per config (FAST_CONFIG, BUDGETED) the jobs of a dry-run of a small run and
    one family summary)."""
    work = make_workdir(tmp_path_factory.mktemp("stages"), FAST_CONFIG)
    listed = snakemake(work, "--list-rules")
    assert listed.returncode == 0, listed.stderr[-3000:]
    (work / "budget.yaml").write_text(yaml.safe_dump({k: BUDGETED[k] for k in ("budget", "max_generations")}))
    runs = {}
    for name, extra in (("plain", ()), ("budgeted", ("--configfile", "config/config.yaml", "budget.yaml"))):
        proc = snakemake(work, "-n", "--logger-oto-full", *TARGETS, *extra)  # Snakemake's own listing
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[name] = _jobs(proc.stdout)
    return set(listed.stdout.split()) - {"all"}, runs


def test_every_rule_is_one_stage_declared_in_its_own_module(workflow):
    rules, _ = workflow
    assert [s.name for s in stages()] and {s.name for s in stages()} == rules
    for module in pkgutil.iter_modules(oto.stages.__path__):
        declared = importlib.import_module(f"oto.stages.{module.name}").STAGE
        assert isinstance(declared, Stage) and declared.name == module.name


def test_the_gpu_stages_are_the_jobs_that_take_the_gpu(workflow):
    _, runs = workflow
    for job in runs["plain"] + runs["budgeted"]:
        assert (_pairs(job.get("resources")).get("gpu") == "1") == declaration(job["rule"]).gpu, job
    assert GPU_RULES == gpu_stages() == ("benchmark", "finalize", "verify", "compare")


def test_every_output_is_in_its_stage_home(workflow):
    _, runs = workflow
    for job in runs["plain"] + runs["budgeted"]:
        home = declaration(job["rule"]).home.format(**_pairs(job.get("wildcards")))
        folder = f"results/{ARCH}/{home}/" if home else f"results/{ARCH}/"
        assert _files(job["output"]) and all(f.startswith(folder) for f in _files(job["output"])), (
            folder,
            job,
        )


def test_the_jobs_of_a_run_are_those_the_scopes_declare(workflow):
    _, runs = workflow
    for name, config in (("plain", FAST_CONFIG), ("budgeted", BUDGETED)):
        expected = {**run_jobs(LIBRARIES, config["max_generations"], config), "family": FAMILIES}
        assert Counter(j["rule"] for j in runs[name]) == expected, name
    assert "budget" not in run_jobs(LIBRARIES, GENERATIONS, FAST_CONFIG)
    assert run_jobs(LIBRARIES, 4, BUDGETED)["budget"] == 3  # one per generation after gen0
    assert list(run_jobs(1, 1, FAST_CONFIG))[:6] == [
        "mutate",
        "emit",
        "compile",
        "benchmark",
        "normalise",
        "select",
    ]


def test_each_stage_reads_the_stages_it_declares(workflow):
    """An edge of the DAG from an earlier stage is declared in ``reads``; one from a later stage (or the same)
    is a generation (or the budget's round after it) reading the previous generation's files, or the
    budget's round reading its previous decision (who has swept). The workflow order follows from
    ``reads``."""
    _, runs = workflow
    jobs = runs["budgeted"]  # every stage has jobs
    producer = {f: j["rule"] for j in jobs for f in _files(j["output"])}
    edges = {(producer[f], j["rule"]) for j in jobs for f in _files(j.get("input")) if f in producer}
    order = {s.name: i for i, s in enumerate(stages())}
    forward = {(a, b) for a, b in edges if order[a] < order[b]}
    assert forward == {(r, s.name) for s in stages() for r in s.reads}
    backward = edges - forward
    scopes = {(declaration(a).scope, declaration(b).scope) for a, b in backward}
    assert backward and scopes == {("generation", "generation"), ("generation", "round"), ("round", "round")}
    assert {(a, b) for a, b in backward if b == "budget"} == {
        ("benchmark", "budget"), ("select", "budget"), ("budget", "budget")
    }  # fmt: skip


def test_the_rules_that_take_the_profile_are_those_declaring_its_fields(workflow):
    _, runs = workflow
    jobs = runs["budgeted"]
    profile_file = f"arch_profiles/{ARCH}.yaml"
    with_profile = {s.name for s in stages() if s.profile is not None}
    assert {j["rule"] for j in jobs if profile_file in _files(j.get("input"))} == with_profile
    views = {}
    for path in (REPO / "rules").glob("*.smk"):
        for block in re.split(r"^(?=rule )", path.read_text(), flags=re.M)[1:]:
            name = re.match(r"rule (\w+):", block).group(1)
            views[name] = re.findall(r'profile=profile_view\("(\w+)"\)', block)
    assert {name for name, v in views.items() if v} == with_profile
    assert all(v == [name] for name, v in views.items() if v), views
    fields = stage_fields({"backend": "sim"})
    assert list(fields) == [s.name for s in stages() if s.profile is not None]
    assert all(BACKEND_FIELDS not in f and PROVENANCE_FIELDS not in f and f for f in fields.values())


def test_the_cluster_profile_sends_exactly_the_gpu_stages_to_the_gpu_partition():
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    cpu = profile["default-resources"]["slurm_partition"]
    overrides = profile.get("set-resources") or {}
    assert set(overrides) <= {s.name for s in stages()}, "set-resources for a rule that is no stage"
    partition = {s.name: (overrides.get(s.name) or {}).get("slurm_partition", cpu) for s in stages()}
    gpu = {partition[name] for name in gpu_stages()}
    assert len(gpu) == 1 and cpu not in gpu, partition
    assert all(partition[s.name] == cpu for s in stages() if not s.gpu), partition
    assert profile["resources"]["gpu"] >= 1


def test_the_architecture_doc_lists_every_stage():
    text = (REPO / "docs" / "architecture.md").read_text()
    table = text[text.index("| stage (rule) |") :].split("\n\n")[0]
    rows = [line.split("|")[1].strip() for line in table.splitlines()[2:]]
    named = {row.split()[0]: row for row in rows}
    assert set(named) == {s.name for s in stages()}
    assert {name for name, row in named.items() if "gpu=1" in row} == set(gpu_stages())


def test_a_declaration_names_a_known_scope():
    with pytest.raises(ValueError, match="scope 'per_size'"):
        Stage(name="verify", scope="per_size", home="")  # type: ignore[arg-type]

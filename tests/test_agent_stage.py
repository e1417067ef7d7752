"""The agent inside rule mutate: it takes its slots first, validation and the symbolic strategy fill the rest,
proposals.yaml carries provenance per candidate, and without a key the run is symbolic only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from oto.agent.settings import agent_status, no_key_message
from oto.config import validate_config
from oto.deck.model import write_library_yaml
from oto.deck.sources import SHIPPED_MANIFEST, read_manifest
from oto.files import read_yaml
from oto.gemm import Library
from oto.search.candidates import classify_proposals
from oto.stages import mutate
from oto.tensile import legality
from oto.tensile.params import candidate_id
from test_agent import GOOD, GOOD2, KEY, PROFILE, message, tool_use

LIB = "Cijk_Ailk_Bljk_SB"


@pytest.fixture(scope="module")
def deck_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("deck") / "deck.yaml"
    write_library_yaml(read_manifest(SHIPPED_MANIFEST).libraries[LIB], path, {"test": True})
    return path


def _config(api_url: str | None = None, **agent) -> dict:
    agent = {"backoff_s": 0, "max_retries": 1, "timeout_s": 5, **agent}
    if api_url:
        agent["base_url"] = api_url
    return validate_config(
        {"arch": "gfx90c", "families": ["SB"], "search": {"candidates_per_generation": 6}, "agent": agent}
    )


def _run(tmp_path: Path, deck_path: Path, config: dict, selection: Path | None = None, gen: int = 0, **kw):
    results = tmp_path / "results" / "gfx90c"
    out = results / LIB / f"gen{gen}" / "proposals.yaml"
    audit = results / "logs" / LIB / f"gen{gen}" / "agent.jsonl"
    mutate.run(gen, deck_path, selection, PROFILE, config, results, out, agent_audit=audit, **kw)
    return read_yaml(out), audit


def _files_text(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


def test_without_a_key_the_generation_is_symbolic_and_says_why(tmp_path, deck_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    doc, audit = _run(tmp_path, deck_path, _config())
    assert len(doc["proposals"]) == 6 and all(p["proposer"] != "agent" for p in doc["proposals"])
    assert doc["agent"]["status"] == "off" and "ANTHROPIC_API_KEY is not set" in doc["agent"]["reason"]
    assert not audit.exists() and not (tmp_path / "results" / "gfx90c" / "agent").exists()
    assert agent_status(_config(provider="none"), {"ANTHROPIC_API_KEY": KEY}) == (
        False,
        "agent.provider is none",
    )
    assert agent_status(_config(), {"ANTHROPIC_API_KEY": KEY}) == (True, "")
    assert "the random strategy only" in no_key_message("random")


def test_agent_takes_its_slots_and_symbolic_fills_the_rest(tmp_path, deck_path, monkeypatch, api):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    api.reply(
        [
            {"params": GOOD, "rationale": "wider TT0"},
            {"params": {**GOOD, "DepthU": 12}, "rationale": "illegal value"},
            {"params": GOOD2, "rationale": "bigger tile"},
        ]
    )
    config = _config(api.url, proposals_per_generation=4)
    doc, audit = _run(tmp_path, deck_path, config)
    props = doc["proposals"]
    assert len(props) == 6 and doc["proposer"] == f"agent+{config['search']['strategy']}"
    agent = [p for p in props if p["proposer"] == "agent"]
    assert [p["params"] for p in agent] == [GOOD, GOOD2]
    assert agent[0]["model"] == "claude-sonnet-5-5" and agent[0]["rationale"] == "wider TT0"
    assert agent[0]["tokens"]["output_tokens"] == 300 and agent[0]["tokens"]["shared_by"] == 2
    assert doc["agent"]["status"] == "used" and doc["agent"]["rejected"][0]["class"] == "invalid"
    ids = [candidate_id(p["params"]) for p in props]
    assert len(set(ids)) == 6  # the symbolic fill never repeats an agent proposal
    # Downstream, emit's classifier accepts every proposal as a new legal candidate.
    library = Library.parse(LIB)
    kernels, rejected = classify_proposals(props, library, legality.Limits.from_profile(PROFILE), set())
    assert len(kernels) == 6 and rejected == []
    assert audit.exists() and (tmp_path / "results" / "gfx90c" / "agent" / "ledger.json").exists()
    assert KEY not in _files_text(tmp_path)


def test_agent_failure_completes_the_generation_symbolically(tmp_path, deck_path, monkeypatch, api):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    for _ in range(2):
        api.push(503, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    config = _config(api.url)
    doc, _ = _run(tmp_path, deck_path, config)
    assert len(doc["proposals"]) == 6 and doc["proposer"] == config["search"]["strategy"]
    assert doc["agent"]["status"] == "failed" and "HTTP 503" in doc["agent"]["reason"]


def test_agent_dedupes_against_the_measured_ids_of_the_previous_selection(
    tmp_path, deck_path, monkeypatch, api
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    gen0, _ = _run(tmp_path, deck_path, _config(provider="none"))
    sel = tmp_path / "selection.yaml"
    measured = [candidate_id(p["params"]) for p in gen0["proposals"]] + [candidate_id(GOOD)]
    from oto.files import write_yaml

    write_yaml(
        sel,
        {
            "library": LIB,
            "generation": 0,
            "frozen": False,
            "sizes": [[64, 64, 1, 64]],
            "per_size": [{"size_index": 0, "winner": measured[0], "score": 1.1, "verdict": "win"}],
            "kernels": {measured[0]: gen0["proposals"][0]["params"]},
            "summary": {"geomean_score": 1.1, "failures": {}},
            "convergence": {"converged": False, "reason": "still improving", "history": [1.1]},
            "observations": [
                {"id": measured[0], "params": gen0["proposals"][0]["params"], "score": 1.1, "sizes_won": 1}
            ],
            "measured": measured,
        },
    )
    api.push(200, message([tool_use({"proposals": [{"params": GOOD, "rationale": "seen"},
                                                   {"params": GOOD2, "rationale": "new"}]})]))  # fmt: skip
    build, cands = tmp_path / "build.yaml", tmp_path / "candidates.yaml"
    res = {"vgpr": 83, "sgpr": 65, "lds_bytes": 8192}
    write_yaml(build, {"kernels": [
        {"id": measured[0], "status": "ok", "reason": "", "resources": res},
        {"id": measured[1], "status": "register_overflow", "reason": "errorCode=1, msg='too many vgprs'"},
    ]})  # fmt: skip
    kernels = [{"id": k, "params": p["params"]} for k, p in zip(measured, gen0["proposals"], strict=False)]
    write_yaml(cands, {
        "kernels": kernels,
        "rejected": [{"class": "illegal", "reason": "LDS overflow", "proposer": "symbolic", "params": GOOD}],
    })  # fmt: skip
    prev = {"previous_build": build, "previous_candidates": cands}
    doc, _ = _run(tmp_path, deck_path, _config(api.url), selection=sel, gen=1, **prev)
    agent = [p for p in doc["proposals"] if p["proposer"] == "agent"]
    assert [p["params"] for p in agent] == [GOOD2]
    assert doc["agent"]["rejected"][0]["class"] == "duplicate"
    assert not {candidate_id(p["params"]) for p in doc["proposals"]} & set(measured)
    # The evidence the agent saw carried the winners, what was tried and the failures.
    body = api.requests[0]["body"]["messages"][0]["content"][0]["text"]
    assert '"winners_per_size"' in body and '"tried"' in body and '"measured_count": 7' in body
    assert "too many vgprs" in body and "LDS overflow" in body and '"vgpr": 83' in body


@pytest.mark.slow
def test_workflow_runs_the_agent_through_snakemake_with_a_key(tmp_path, api, monkeypatch):
    """Real snakemake, real SDK, fake API: the mutate jobs call it (llm_api resource, envvars), write the
    audit log per job and the shared ledger, and the run completes; the key is in no file."""
    from workflow_helpers import FAST_CONFIG, make_workdir, snakemake

    db = {**GOOD, "VectorWidth": 2, "ThreadTile": [4, 4]}
    proposals = [
        {"params": db, "rationale": "half the vector for fp64"},
        {"params": {**db, "DepthU": 12}, "rationale": "illegal"},
    ]
    reply = message([tool_use({"proposals": proposals})])
    api.default = (200, reply, {}, 0.0)
    config = {**FAST_CONFIG, "agent": {"base_url": api.url, "proposals_per_generation": 2, "backoff_s": 0}}
    work = make_workdir(tmp_path, config)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    target = "results/gfx90c/Cijk_Ailk_Bljk_DB/gen1/selection.yaml"
    dry = snakemake(work, target, "-n")
    proc = snakemake(work, "--cores", "2", target)
    assert dry.returncode == 0 and "strategy only" not in dry.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = work / "results" / "gfx90c"
    gen0 = read_yaml(res / "Cijk_Ailk_Bljk_DB" / "gen0" / "proposals.yaml")
    assert gen0["agent"]["status"] == "used", gen0["agent"]
    assert [p["params"]["VectorWidth"] for p in gen0["proposals"] if p["proposer"] == "agent"] == [2]
    gen1 = read_yaml(res / "Cijk_Ailk_Bljk_DB" / "gen1" / "proposals.yaml")
    assert gen1["agent"]["rejected"][0]["class"] == "duplicate"  # measured in gen0
    cands = read_yaml(res / "Cijk_Ailk_Bljk_DB" / "gen0" / "candidates.yaml")
    assert any(k["proposer"] == "agent" for k in cands["kernels"])
    assert (res / "logs" / "Cijk_Ailk_Bljk_DB" / "gen0" / "agent.jsonl").stat().st_size > 0
    assert json.loads((res / "agent" / "ledger.json").read_text())["calls"] == len(api.requests) >= 2
    assert KEY not in _files_text(work / "results") and KEY not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_workflow_without_a_key_says_so_once(tmp_path, monkeypatch):
    from workflow_helpers import FAST_CONFIG, make_workdir, snakemake

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    work = make_workdir(tmp_path, FAST_CONFIG)
    proc = snakemake(work, "--cores", "2", "results/gfx90c/Cijk_Ailk_Bljk_DB/gen0/proposals.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (proc.stdout + proc.stderr).count("the surrogate strategy only") == 1


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda s: s.update(convergence="converged"), "convergence"),
        (lambda s: s["convergence"].update(converged="no"), "convergence.converged"),
        (lambda s: s.update(observations={"id": "k1"}), "observations"),
        (lambda s: s["observations"].append({"id": 3, "params": {}}), "observations[1].id"),
        (lambda s: s.update(measured="k1"), "measured"),
        (lambda s: s.pop("per_size"), "<document>"),
    ],
)
def test_a_selection_of_the_wrong_shape_fails_mutate_naming_file_and_field(tmp_path, deck_path, edit, field):
    from oto.files import StageFileError, write_yaml

    sel = {
        "library": LIB,
        "generation": 0,
        "frozen": False,
        "sizes": [[64, 64, 1, 64]],
        "per_size": [{"size_index": 0, "winner": "k1", "score": 1.1}],
        "kernels": {"k1": GOOD},
        "summary": {"geomean_score": 1.1, "failures": {}},
        "convergence": {"converged": False, "reason": "", "history": [1.1]},
        "observations": [{"id": "k1", "params": GOOD, "score": 1.1}],
        "measured": ["k1"],
    }
    edit(sel)
    path = tmp_path / "selection.yaml"
    write_yaml(path, sel)
    with pytest.raises(StageFileError, match=rf"{path}: field '{re.escape(field)}'"):
        _run(tmp_path, deck_path, _config(provider="none"), selection=path, gen=1)

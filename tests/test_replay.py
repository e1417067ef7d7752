from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from oto.backends import resolve
from oto.backends.base import Kernel, Launch, MeasurePlan, Size
from oto.cli import main as cli
from oto.search.replay_scorer import replay, run_seed
from oto.search.tuning_cache import CacheError, load_cache

REPLAY = Path(__file__).resolve().parents[2] / "shared" / "reference" / "replay"


def make_cache(path: Path, gz: bool = False, open_file: bool = False) -> Path:
    """A 4 x 4 x 2 space: (3, 3, *) absent (restriction), (0, 0, 1) failed, optimum at (2, 1, 0)."""
    xs, ys, zs = [1, 2, 4, 8], [16, 32, 64, 128], [0, 1]
    cache = {}
    for x in xs:
        for y in ys:
            for z in zs:
                if (x, y) == (8, 128):
                    continue
                t = 1.0 + abs(xs.index(x) - 2) + abs(ys.index(y) - 1) * 0.5 + z * 0.25
                rec = {"x": x, "y": y, "z": z, "time": t, "times": [t * 0.99, t * 1.01]}
                if (x, y, z) == (1, 16, 1):
                    rec = {"x": x, "y": y, "z": z, "time": "CompilationFailedConfig"}
                cache[f"{x},{y},{z}"] = rec
    doc = {
        "device_name": "TestGPU",
        "kernel_name": "k",
        "problem_size": [1],
        "tune_params_keys": ["x", "y", "z"],
        "tune_params": {"x": xs, "y": ys, "z": zs},
        "objective": "time",
        "cache": cache,
    }
    text = json.dumps(doc)
    if open_file:  # Kernel Tuner's appending writer leaves the cache unterminated until it finishes
        text = text[:-2] + ","
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("gz,open_file", [(False, False), (True, False), (False, True)])
def test_load_cache_json_gz_and_open(tmp_path, gz, open_file):
    c = load_cache(make_cache(tmp_path / ("c.json.gz" if gz else "c.json"), gz, open_file))
    assert c.space.size() == 30  # 32 minus the two absent configurations
    assert c.optimum == 1.0
    assert len(c.failures) == 1 and c.device == "TestGPU"


@pytest.mark.parametrize(
    "mutate,field",
    [
        (lambda d: d.pop("cache"), "'cache'"),
        (lambda d: d.pop("tune_params_keys"), "'tune_params_keys'"),
        (lambda d: d["tune_params"].update(x=5), "'tune_params'"),
        (lambda d: d["cache"]["1,16,0"].update(x=3), "cache.1,16,0"),
        (lambda d: d["cache"]["1,16,0"].update(time=[1]), "cache.1,16,0.time"),
    ],
)
def test_wrong_shape_names_file_and_field(tmp_path, mutate, field):
    path = make_cache(tmp_path / "c.json")
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(CacheError) as err:
        load_cache(path)
    assert str(path) in str(err.value) and field in str(err.value)


def test_not_json_and_not_an_object(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    with pytest.raises(CacheError, match="not valid JSON"):
        load_cache(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(CacheError, match="top level"):
        load_cache(bad)


@pytest.mark.parametrize("strategy", ["random", "surrogate"])
def test_curve_counts_unique_space_configs_and_is_monotone(tmp_path, strategy):
    c = load_cache(make_cache(tmp_path / "c.json"))
    curve = run_seed(c, strategy, 30, seed=1)
    assert len(curve) == 30  # exhaustive: every configuration of the space counted once, failures included
    assert all(b >= a for a, b in zip(curve, curve[1:], strict=False))
    assert curve[-1] == 1.0 and 0.0 <= curve[0] <= 1.0
    assert run_seed(c, strategy, 12, seed=1) == curve[:12]  # reproducible
    # budget larger than the space: stops when the space is exhausted
    assert len(run_seed(c, strategy, 100, seed=2)) == 30


def test_replay_command_writes_the_contract(tmp_path, capsys):
    cache = make_cache(tmp_path / "c.json.gz", gz=True)
    out = tmp_path / "out" / "r.json"
    rc = cli(
        ["replay", str(cache), "--budget", "10", "--seeds", "3", "--strategy", "random", "--json", str(out)]
    )
    assert rc == 0
    doc = json.loads(out.read_text())
    assert list(doc) == ["optimum", "budget", "seeds", "summary"]
    assert doc["optimum"] == 1.0 and doc["budget"] == 10
    assert [s["seed"] for s in doc["seeds"]] == [0, 1, 2]
    assert all(len(s["best_fraction"]) == 10 for s in doc["seeds"])
    assert doc["summary"]["numbers"] == "replayed" and "fraction_at_10" in doc["summary"]
    said = capsys.readouterr()
    # Progress while it runs (stderr, one line per seed), then what the numbers mean (stdout).
    assert [ln.split(":")[1].strip() for ln in said.err.splitlines()] == ["seed 1/3", "seed 2/3", "seed 3/3"]
    assert (
        "fraction of the recorded optimum" in said.out
        and f"N=10: {doc['summary']['fraction_at_10']['mean']:.3f}" in said.out
    )
    assert str(out) in said.out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"cache": {}}))
    assert cli(["replay", str(bad), "--budget", "5", "--seeds", "1", "--json", str(tmp_path / "x.json")]) == 2
    assert "tune_params_keys" in capsys.readouterr().err


def test_replay_backend_builds_and_measures_from_the_cache(tmp_path):
    cache = make_cache(tmp_path / "c.json")
    be = resolve({"backend": "replay", "replay": {"cache": str(cache)}, "seed": 3}, {}, "lib/gen0")
    assert be.numbers == "replayed" and be.provenance()["cache"] == str(cache)
    ks = [
        Kernel("ok", {"x": 4, "y": 32, "z": 0}),
        Kernel("failed", {"x": 1, "y": 16, "z": 1}),
        Kernel("absent", {"x": 8, "y": 128, "z": 0}),
    ]
    built = {b.kernel_id: b.status for b in be.build(None, ks, tmp_path)}
    assert built == {"ok": "ok", "failed": "compile_error", "absent": "rejected"}
    plan = MeasurePlan(
        {"ok": ks[0]}, [Size(64, 64, 1, 64)], [Launch("ok", "candidate", 0, r) for r in range(4)]
    )
    samples = be.measure(None, plan, tmp_path)
    assert [s.status for s in samples] == ["ok"] * 4
    assert all(abs(s.time_us - 1000.0) <= 10.0 + 1e-9 for s in samples)  # 1 ms +- 1 %, in microseconds
    with pytest.raises(ValueError, match="replay.cache"):
        resolve({"backend": "replay", "replay": {}}, {}, "s")


def test_shared_replay_files_smoke():
    conv = REPLAY / "convolution_A4000.json.gz"
    if not conv.is_file():
        pytest.skip(f"shared replay data not found at {conv}")
    doc = replay(conv, "surrogate", 20, 1)
    assert doc["summary"]["space_size"] == 4362 and doc["summary"]["failed_configs"] == 161
    assert len(doc["seeds"][0]["best_fraction"]) == 20

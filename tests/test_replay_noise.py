import gzip
import json

import numpy as np
import pytest
from conftest import SHARED
from oto.backends.base import Launch
from oto.measurement.recorded_noise import ReplayNoise, load_times

REPLAY = SHARED / "reference" / "replay"


def _cache(tmp_path, cache):
    path = tmp_path / "c.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"device_name": "x", "kernel_name": "k", "cache": cache}, fh)
    return path


def test_load_times_keeps_configurations_that_ran(tmp_path):
    ok = {"time": 1.5, "times": [1.4, 1.5, 1.6, 1.5, 1.5, 1.4, 1.6, 1.5, 1.5]}
    path = _cache(
        tmp_path,
        {
            "a": ok,
            "failed": {"time": "CompilationFailedConfig", "times": [1.0] * 9},
            "few": {"time": 1.0, "times": [1.0, 1.1]},
            "nan": {"time": 1.0, "times": [float("nan")] * 9},
        },
    )
    times = load_times(path)
    assert list(times) == ["a"] and np.allclose(times["a"], np.array(ok["times"]) * 1e3)


def test_load_times_names_the_file_and_field(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"cache": []}))
    with pytest.raises(ValueError, match=r"x.json: field 'cache'"):
        load_times(bad)
    with pytest.raises(ValueError, match=r"no configuration"):
        load_times(_cache(tmp_path, {"f": {"time": "RuntimeFailedConfig"}}))


def test_replay_draws_recorded_repetitions_with_optional_drift():
    times = {"x": np.array([10.0, 11.0, 12.0] * 3), "y": np.array([20.0] * 9)}
    launches = [Launch("a", "candidate", 0, r) for r in range(50)] + [Launch("r", "reference", 0, 0)]
    noise = ReplayNoise(times, {0: {"a": "x", "r": "y"}}, seed=1)
    df = noise.measure(launches)
    assert set(df.time_us[:50]) <= {10.0, 11.0, 12.0} and df.time_us.iat[50] == 20.0
    assert noise.truth_us(0, "a") == pytest.approx(11.0)
    drifted = ReplayNoise(times, {0: {"a": "x", "r": "y"}}, seed=1, drift=lambda i: 1 + 0.01 * i)
    d1 = drifted.measure(launches[:2])
    d2 = drifted.measure(launches[:2])  # the clock continues across plans
    assert d2.time_us.iat[0] >= 1.02 * 10.0 and (d1.seq.to_list(), d2.seq.to_list()) == ([0, 1], [0, 1])


def test_real_cache_has_32_repetitions_per_configuration():
    path = REPLAY / "gemm_RTX_2080_Ti.json.gz"
    if not path.exists():
        pytest.skip(f"shared replay data not found at {path}")
    times = load_times(path)
    assert len(times) > 10_000 and {len(t) for t in list(times.values())[:100]} == {32}

"""Clock/thermal telemetry (oto.hardware.telemetry): gpu_metrics tables built byte for byte from the kernel's
kgd_pp_interface.h (tests/gpu_metrics_blobs.py), the fallbacks, the sampler and the per-sweep summary."""

import ctypes
import math
import struct
import time

import pytest
from gpu_metrics_blobs import SIZES, blob, renoir
from oto.hardware.telemetry import (
    LAYOUTS,
    DpmSclkSource,
    GpuMetricsSource,
    Reading,
    Sampler,
    SamplerLog,
    TelemetryError,
    TelemetrySettings,
    decode_gpu_metrics,
    find_source,
    summarise,
)


def sysfs(tmp_path, name="card0", vendor="0x1002", **files):
    dev = tmp_path / "sys" / "class" / "drm" / name / "device"
    dev.mkdir(parents=True, exist_ok=True)
    (dev / "vendor").write_text(vendor + "\n")
    for f, data in files.items():
        (dev / f).write_bytes(data) if isinstance(data, bytes) else (dev / f).write_text(data)
    return tmp_path / "sys"


def settings(root, source="auto", card=None, rate_hz=50.0):
    return TelemetrySettings(source, rate_hz, root, card)


@pytest.mark.parametrize("rev", sorted(SIZES))
def test_every_layout_has_the_kernels_size_and_decodes_its_fields(rev):
    assert ctypes.sizeof(LAYOUTS[rev]) == SIZES[rev]
    got = decode_gpu_metrics(renoir(clock_mhz=1433, temperature_c=71.25, power_w=17.5, rev=rev))
    assert got == {
        "format": f"{rev[0]}.{rev[1]}",
        "clock_mhz": 1433.0,
        "temperature_c": 71.25,
        "power_w": 17.5,
    }


def test_a_field_the_firmware_does_not_fill_is_no_value_and_the_current_clock_stands_in():
    b = blob((2, 1), current_gfxclk=1200)  # average_gfxclk_frequency left at 0xFFFF
    got = decode_gpu_metrics(b)
    assert got["clock_mhz"] == 1200.0 and math.isnan(got["temperature_c"]) and math.isnan(got["power_w"])


def test_unknown_revision_truncation_and_size_mismatch_are_errors_never_guesses():
    with pytest.raises(TelemetryError, match=r"format 1\.3 .* no layout"):
        decode_gpu_metrics(struct.pack("<HBB", 120, 1, 3) + bytes(116), "card0/gpu_metrics")
    with pytest.raises(TelemetryError, match=r"format 2\.5"):
        decode_gpu_metrics(blob((2, 5), structure_size=176))
    with pytest.raises(TelemetryError, match="shorter than the 4-byte header"):
        decode_gpu_metrics(b"\x80\x00")
    with pytest.raises(TelemetryError, match=r"64 of 128 bytes of format 2.2 \(truncated\)"):
        decode_gpu_metrics(renoir()[:64])
    with pytest.raises(TelemetryError, match="structure_size 120, the kernel's GpuMetricsV2_2 is 128"):
        decode_gpu_metrics(blob((2, 2), structure_size=120))


def test_find_source_prefers_gpu_metrics_then_falls_back(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no rocm-smi
    root = sysfs(tmp_path, gpu_metrics=renoir(1600), pp_dpm_sclk="0: 200Mhz\n1: 1600Mhz *\n")
    src, what = find_source(settings(root))
    assert isinstance(src, GpuMetricsSource) and "gpu_metrics" in what
    assert src.read().clock_mhz == 1600.0
    # an unknown revision: recorded, and the next source is used
    (root / "class/drm/card0/device/gpu_metrics").write_bytes(struct.pack("<HBB", 120, 1, 3) + bytes(116))
    src, what = find_source(settings(root))
    assert isinstance(src, DpmSclkSource) and src.read().clock_mhz == 1600.0
    # nothing readable: no source, and every reason
    (root / "class/drm/card0/device/pp_dpm_sclk").write_text("0: 200Mhz\n1: 1600Mhz\n")
    src, why = find_source(settings(root))
    assert src is None
    assert "format 1.3" in why and "no current level" in why and "rocm-smi: not on PATH" in why
    assert find_source(settings(root, source="none")) == (None, "tensile.telemetry.source is none")


def test_only_amd_cards_are_read(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    root = sysfs(tmp_path, name="card0", vendor="0x8086", gpu_metrics=renoir(900))
    sysfs(tmp_path, name="card1", gpu_metrics=renoir(1700))
    src, _ = find_source(settings(root))
    assert src.read().clock_mhz == 1700.0
    assert find_source(settings(root, card="card0"))[0] is None


class Flaky:
    """A source that reads ``good`` times, then fails as an unreadable file would."""

    name, where = "gpu_metrics", "fake"

    def __init__(self, good, clock=1500.0):
        self.left, self.clock = good, clock

    def read(self):
        if self.left <= 0:
            raise TelemetryError("fake: unreadable (No such file or directory)")
        self.left -= 1
        return Reading(time.monotonic(), self.clock, 60.0, 10.0)


def test_sampler_reads_at_its_rate_and_a_dying_sampler_keeps_what_it_read():
    s = Sampler(Flaky(10**6), rate_hz=100.0).start()
    time.sleep(0.25)
    log = s.stop()
    assert 10 <= len(log.readings) <= 40 and not log.died
    s = Sampler(Flaky(3), rate_hz=100.0).start()
    time.sleep(0.2)
    log = s.stop()
    assert len(log.readings) == 3 and log.died.startswith("sampler died") and "unreadable" in log.died
    t0, t1 = log.readings[0].t - 1, time.monotonic()
    tele = summarise(log, t0, t1, 1800.0)
    assert tele.clock_mhz == 1500.0 and tele.readings == 3 and "sampler died" in tele.note


def test_summary_rejects_absurd_clocks_with_the_reason():
    readings = [Reading(1.0, c, 55.0, 12.0) for c in (1500.0, 0.0, 1510.0, 2900.0, 1490.0)]
    tele = summarise(SamplerLog("gpu_metrics (x)", readings), 0.0, 2.0, 1800.0)
    assert tele.clock_mhz == 1500.0 and tele.temperature_c == 55.0 and tele.power_w == 12.0
    assert "2 of 5 clock reading(s) rejected as absurd" in tele.note and "0, 2900" in tele.note
    only_bad = summarise(SamplerLog("gpu_metrics (x)", readings[1:2]), 0.0, 2.0, 1800.0)
    assert math.isnan(only_bad.clock_mhz) and "rejected as absurd" in only_bad.note
    none = summarise(SamplerLog(""), 0.0, 2.0, 1800.0, "no gpu_metrics")
    assert math.isnan(none.clock_mhz) and none.note == "no telemetry: no gpu_metrics"
    outside = summarise(SamplerLog("gpu_metrics (x)", readings), 5.0, 6.0, 1800.0)
    assert outside.readings == 0 and "no reading" in outside.note


def test_settings_come_from_the_schema_and_are_checked():
    s = TelemetrySettings.from_config({})
    assert (s.source, s.rate_hz, str(s.sysfs), s.card) == ("auto", 20, "/sys", None)
    with pytest.raises(ValueError, match="tensile.telemetry.source"):
        TelemetrySettings.from_config({"telemetry": {"source": "nvml"}})

"""Results CSV reader: golden layouts; every kind of bad file gives a clear error or a recorded cut."""

import math

import pytest
from oto.tensile.results_csv import TensileCsvError, read_results

NAMES = [
    "Cijk_Ailk_Bjlk_SB_MT32x32x8_SN_K1_TT4_4_WG8_8_1",
    "Cijk_Ailk_Bjlk_SB_MT128x128x8_SN_K1_TT8_8_WG16_16_1",
    "Cijk_Ailk_Bjlk_SB_MT64x64x8_SN_K1_TT8_8_WG8_8_1",
]


@pytest.fixture(params=["synthetic_Cijk_Ailk_Bjlk_SB_00_CSVWinner.csv", "synthetic_Cijk_Ailk_Bjlk_SB_00.csv"])
def golden_csv(request, golden_dir):
    return golden_dir / "librarylogic" / request.param


def test_golden_layouts(golden_csv):
    t = read_results(golden_csv, NAMES, expected_indices=4, expected_count=3)
    assert t.winner_columns == ("CSVWinner" in golden_csv.name)
    assert t.metric == "DeviceEfficiency" and t.solutions == tuple(NAMES) and not t.truncated
    assert [r.sizes for r in t.rows] == [(512, 512, 1, 512), (1024, 1024, 1, 1024)]
    assert t.rows[1].gflops == (-1.0, 1187.45, 1023.9)
    assert math.isnan(t.rows[1].time_us(0))
    assert t.rows[0].time_us(2) == pytest.approx(268435456 / 731.62 / 1e3)


def _write(tmp_path, text):
    p = tmp_path / "00_Final.csv"
    p.write_text(text)
    return p


def _golden_text(golden_dir):
    return (golden_dir / "librarylogic" / "synthetic_Cijk_Ailk_Bjlk_SB_00.csv").read_text()


def test_truncated_csv_keeps_complete_rows(golden_dir, tmp_path):
    text = _golden_text(golden_dir)
    cut = text[: text.rindex("\n", 0, len(text) - 1) + 12]  # the client died inside the last line
    t = read_results(_write(tmp_path, cut), NAMES)
    assert len(t.rows) == 1 and "line 3 is incomplete" in t.truncated


def test_last_line_without_newline_is_a_cut(golden_dir, tmp_path):
    t = read_results(_write(tmp_path, _golden_text(golden_dir).rstrip("\n")), NAMES)
    assert len(t.rows) == 1 and t.truncated


def test_empty_and_missing_files(tmp_path):
    assert read_results(_write(tmp_path, ""), NAMES).truncated == "empty file"
    with pytest.raises(FileNotFoundError, match="results CSV not found"):
        read_results(tmp_path / "nope.csv")
    with pytest.raises(TensileCsvError, match="header line is cut off"):
        read_results(_write(tmp_path, "GFlops, SizeI, Si"))


def test_missing_and_extra_columns(golden_dir, tmp_path):
    text = _golden_text(golden_dir)
    with pytest.raises(TensileCsvError, match=r"00_Final\.csv: missing column 'LDB'"):
        read_results(_write(tmp_path, text.replace(" LDB,", "")))
    with pytest.raises(TensileCsvError, match="missing solution column"):
        read_results(_write(tmp_path, text), [*NAMES, "Cijk_extra"])
    with pytest.raises(TensileCsvError, match="extra column"):
        read_results(_write(tmp_path, text), NAMES[:2])
    with pytest.raises(TensileCsvError, match="extra column"):
        read_results(_write(tmp_path, text), expected_count=2)
    with pytest.raises(TensileCsvError, match="3 Size columns"):
        read_results(
            _write(tmp_path, text.replace(" SizeL,", "").replace(", 1, 512,", ",", 1)), expected_indices=4
        )
    with pytest.raises(TensileCsvError, match="column 1 is 'Time'"):
        read_results(_write(tmp_path, text.replace("GFlops,", "Time,", 1)))


def test_bad_rows_name_the_line(golden_dir, tmp_path):
    lines = _golden_text(golden_dir).splitlines(keepends=True)
    with pytest.raises(TensileCsvError, match=r":2: .*fields"):
        read_results(_write(tmp_path, lines[0] + "0, 1, 2\n" + lines[2]))
    with pytest.raises(TensileCsvError, match=r":2: invalid literal"):
        read_results(_write(tmp_path, lines[0] + lines[1].replace(" 512,", " 512.0,", 1) + lines[2]))
    with pytest.raises(TensileCsvError, match="empty line"):
        read_results(_write(tmp_path, lines[0] + "\n" + lines[1] + lines[2]))


def test_repetitions_are_numbered(golden_dir, tmp_path):
    lines = _golden_text(golden_dir).splitlines(keepends=True)
    t = read_results(_write(tmp_path, lines[0] + lines[1] + lines[2] + lines[1] + lines[2]), NAMES)
    assert [(r.problem, r.run) for r in t.rows] == [(0, 0), (1, 0), (0, 1), (1, 1)]

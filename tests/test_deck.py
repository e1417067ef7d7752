from __future__ import annotations

import copy
import datetime
import gzip
import shutil

import pytest
from oto.deck.model import (
    Deck,
    DeckError,
    LibraryDeck,
    read_library_yaml,
    write_deck_yaml,
    write_library_yaml,
)
from oto.deck.sources import (
    SHIPPED_MANIFEST,
    deck_from_logic_files,
    load_deck,
    manifest_bytes,
    manifest_main,
    read_manifest,
    write_manifest,
)
from oto.files import read_yaml
from oto.tensile.logic_reader import read_logic_dir
from oto.tensile.params import canonical

VEGA10_FAMILIES = [
    "CB_GB",
    "DB",
    "DB_GB",
    "HB",
    "HB_GB",
    "HHS_BH",
    "HHS_BH_GB",
    "HSS_BH",
    "SB",
    "SBIIc",
    "SBIc",
    "SB_GB",
    "ZB_GB",
]


@pytest.fixture(scope="module")
def logic_deck(vega10_dir) -> Deck:
    # Parsing the 46 files takes ~10 s: once per module.
    return deck_from_logic_files(read_logic_dir(vega10_dir))


@pytest.fixture(scope="module")
def manifest_deck() -> Deck:
    return read_manifest(SHIPPED_MANIFEST)


def test_vega10_figures(logic_deck):
    assert logic_deck.stats() == {
        "libraries": 46,
        "family_codes": 13,
        "solutions": 3066,
        "unique_sizes": 23745,
        "exact_rows": 28858,
    }
    assert logic_deck.families() == VEGA10_FAMILIES
    assert logic_deck.arch_source == "gfx900"
    sb = logic_deck.libraries["Cijk_Ailk_Bljk_SB"]
    assert (sb.family, sb.pattern, len(sb.solutions), len(sb.sizes), sb.logic["exact_rows"]) == (
        "SB",
        "NN",
        632,
        1908,
        3816,
    )
    hss = logic_deck.libraries["Cijk_Alik_Bjlk_HSS_BH"]
    assert hss.logic["key_length"] == 8 and all(len(s) == 8 for s in hss.sizes)
    assert logic_deck.libraries["Cijk_Alik_Bljk_ZB_GB"].sizes[0][2] == 8  # GB files use batch 8
    # Old files leave these out; they take Tensile's defaults.
    assert logic_deck.libraries["Cijk_Ailk_Bljk_DB"].logic["defaulted_params"] == ["1LDSBuffer", "StaggerU"]


def test_params_are_canonical_and_old_booleans_normalised(logic_deck):
    db = logic_deck.libraries["Cijk_Ailk_Bljk_DB"]
    first = db.solutions[0]["params"]
    assert first == canonical(first)
    assert first["PrefetchGlobalRead"] == 1 and first["WorkGroup"] == [16, 16, 1] and first["StaggerU"] == 32
    assert first["KernelLanguage"] == "Source"
    hb = logic_deck.libraries["Cijk_Ailk_Bljk_HB"]
    assert [s["index"] for s in hb.solutions] == list(range(85))


def test_shipped_is_first_row_of_each_size(logic_deck):
    sb = logic_deck.libraries["Cijk_Ailk_Bljk_SB"]
    assert len({tuple(s) for s in sb.sizes}) == len(sb.sizes)
    assert all(0 <= pos < len(sb.solutions) and gflops > 0 for pos, gflops in sb.shipped)


def test_manifest_rederives_byte_identical(logic_deck, tmp_path):
    data = manifest_bytes(logic_deck)
    assert data == SHIPPED_MANIFEST.read_bytes()
    write_manifest(logic_deck, tmp_path / "m.json.gz")
    assert (tmp_path / "m.json.gz").read_bytes() == data
    assert len(data) < 400_000


def test_manifest_deck_equals_logic_deck(logic_deck, manifest_deck):
    assert manifest_deck.libraries == logic_deck.libraries
    assert manifest_deck.arch_source == logic_deck.arch_source
    assert manifest_deck.stats() == logic_deck.stats()
    assert manifest_deck.source["kind"] == "manifest"
    assert manifest_deck.source["derived_from"]["sha256"] == logic_deck.source["sha256"]
    assert manifest_deck.source["derived_from"]["path"] == "rocblas-vega10"


def test_load_deck_sources(manifest_deck, vega10_dir, tmp_path):
    assert load_deck("manifest").libraries == manifest_deck.libraries
    for f in ("vega10_Cijk_Ailk_Bljk_DB.yaml", "vega10_Cijk_Alik_Bjlk_DB.yaml"):
        shutil.copy(vega10_dir / f, tmp_path / f)
    small = load_deck("logic", tmp_path)
    assert list(small.libraries) == ["Cijk_Ailk_Bljk_DB", "Cijk_Alik_Bjlk_DB"]
    assert small.libraries["Cijk_Ailk_Bljk_DB"] == manifest_deck.libraries["Cijk_Ailk_Bljk_DB"]
    with pytest.raises(DeckError, match="config field 'deck.path': required when deck.source is 'logic'"):
        load_deck("logic")
    with pytest.raises(DeckError, match="unknown deck source 'tarball'"):
        load_deck("tarball", tmp_path)


def test_manifest_main(vega10_dir, tmp_path, capsys):
    logic = tmp_path / "logic"
    logic.mkdir()
    shutil.copy(vega10_dir / "vega10_Cijk_Ailk_Bljk_DB.yaml", logic)
    out = tmp_path / "out" / "deck.json.gz"
    assert manifest_main(["--logic-dir", str(logic), "--out", str(out)]) == 0
    assert "libraries 1, family_codes 1, solutions 4, unique_sizes 8, exact_rows 8" in capsys.readouterr().out
    assert list(read_manifest(out).libraries) == ["Cijk_Ailk_Bljk_DB"]


def test_select(manifest_deck):
    assert manifest_deck.select("all").libraries == manifest_deck.libraries
    sel = manifest_deck.select(["DB", "SB_GB"])
    assert sel.families() == ["DB", "SB_GB"] and len(sel.libraries) == 8
    assert sel.stats()["unique_sizes"] == 4 * 8 + 4 * 125
    nn = manifest_deck.select(["DB", "SB_GB"], patterns=["NN", "TT"])
    assert list(nn.libraries) == [
        "Cijk_Ailk_Bljk_DB",
        "Cijk_Ailk_Bljk_SB_GB",
        "Cijk_Alik_Bjlk_DB",
        "Cijk_Alik_Bjlk_SB_GB",
    ]
    with pytest.raises(DeckError, match=r"unknown family code\(s\) QQ, XB; this deck has CB_GB, DB, .*ZB_GB"):
        manifest_deck.select(["DB", "XB", "QQ"])
    with pytest.raises(DeckError, match=r"unknown pattern\(s\) NX"):
        manifest_deck.select(["DB"], patterns=["NX"])
    with pytest.raises(DeckError, match="no library matches"):
        manifest_deck.select(["SBIc"], patterns=["TT"])


def test_library_yaml_roundtrip(manifest_deck, tmp_path):
    sb = manifest_deck.libraries["Cijk_Ailk_Bljk_SB"]
    path = tmp_path / "Cijk_Ailk_Bljk_SB" / "deck.yaml"
    write_library_yaml(sb, path, {"numbers": "replayed", "source": "test"})
    text = path.read_text()
    first = ", ".join(str(v) for v in sb.sizes[0])
    assert f"\nsizes:\n- [{first}]\n" in text  # one flow list per size
    assert read_library_yaml(path) == sb
    hss = manifest_deck.libraries["Cijk_Ailk_Bljk_HSS_BH"]
    write_library_yaml(hss, tmp_path / "hss.yaml", {})
    assert read_library_yaml(tmp_path / "hss.yaml") == hss


def test_deck_yaml(manifest_deck, tmp_path):
    sel = manifest_deck.select(["DB", "ZB_GB"])
    write_deck_yaml(sel, tmp_path / "deck.yaml", {"numbers": "replayed"})
    doc = read_yaml(tmp_path / "deck.yaml")
    assert doc["stats"] == sel.stats() and doc["families"] == ["DB", "ZB_GB"]
    assert doc["libraries"]["Cijk_Alik_Bljk_ZB_GB"] == {
        "family": "ZB_GB",
        "pattern": "TN",
        "key_length": 8,
        "solutions": 6,
        "sizes": 125,
        "exact_rows": 125,
    }
    assert doc["source"]["kind"] == "manifest" and doc["provenance"] == {"numbers": "replayed"}


def test_bad_manifest_and_slice(manifest_deck, tmp_path):
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(DeckError, match="bad.json.gz"):
        read_manifest(bad)
    bad.write_bytes(gzip.compress(b'{"format": "something else"}'))
    with pytest.raises(DeckError, match="bad.json.gz: not an oto deck manifest"):
        read_manifest(bad)
    db = copy.deepcopy(manifest_deck.libraries["Cijk_Ailk_Bljk_DB"].to_dict())
    (tmp_path / "slice.yaml").write_text("name: x\n")
    with pytest.raises(DeckError, match="slice.yaml: library x lacks family"):
        read_library_yaml(tmp_path / "slice.yaml")
    db["shipped"][0] = [9, 1.0]
    write_library_yaml(LibraryDeck(**db), tmp_path / "s2.yaml", {})
    with pytest.raises(DeckError, match=r"s2.yaml: Cijk_Ailk_Bljk_DB: shipped\[0\] = \[9, 1.0\]"):
        read_library_yaml(tmp_path / "s2.yaml")


def test_a_negative_size_in_a_deck_file_is_refused_naming_file_and_size(manifest_deck, tmp_path):
    db = copy.deepcopy(manifest_deck.libraries["Cijk_Ailk_Bljk_DB"].to_dict())
    db["sizes"][2] = [128, -128, 1, 64]
    write_library_yaml(LibraryDeck(**db), tmp_path / "s3.yaml", {})
    with pytest.raises(
        DeckError, match=r"s3.yaml: Cijk_Ailk_Bljk_DB: sizes\[2\] \[128, -128, 1, 64\]: N = -128"
    ):
        read_library_yaml(tmp_path / "s3.yaml")
    db["sizes"][2] = [128, 128, 1, 64]
    db["shipped"][1] = [0, float("nan")]
    write_library_yaml(LibraryDeck(**db), tmp_path / "s4.yaml", {})
    with pytest.raises(DeckError, match=r"s4.yaml: Cijk_Ailk_Bljk_DB: shipped\[1\]: GFLOPS nan"):
        read_library_yaml(tmp_path / "s4.yaml")


def test_library_yaml_mirror_is_read_only_while_it_is_of_the_files_text(manifest_deck, tmp_path):
    """deck.yaml's JSON mirror (oto.files.write_yaml_mirrored) gives what the YAML parses to, integer keys
    (AssertStrideAEqual {0: 1}) included, and is ignored once the YAML's text is not the text it mirrors."""
    from oto.files import mirror_path, read_yaml_mirrored

    lib = manifest_deck.libraries["Cijk_Ailk_Bljk_ZB_GB"]
    path = tmp_path / "deck.yaml"
    write_library_yaml(lib, path, {"source": "test"})
    mirror = mirror_path(path)
    assert mirror.name == ".deck.yaml.json" and mirror.is_file()
    parsed = read_yaml(path)
    assert any(isinstance(k, int) for s in parsed["solutions"] for v in s["params"].values()
               if isinstance(v, dict) for k in v)  # fmt: skip
    assert read_yaml_mirrored(path) == parsed and read_library_yaml(path) == lib
    # the YAML edited by hand: its own text is read, not the mirror's
    path.write_text(
        path.read_text().replace("name: Cijk_Ailk_Bljk_ZB_GB", "name: Cijk_Ailk_Bljk_ZB_GB_edited")
    )
    assert read_library_yaml(path).name == "Cijk_Ailk_Bljk_ZB_GB_edited"
    # a torn or foreign mirror is ignored too
    write_library_yaml(lib, path, {"source": "test"})
    mirror.write_text('{"sha256": "0", "data": {"name": "wrong"}}')
    assert read_library_yaml(path) == lib
    mirror.write_text("{not json")
    assert read_library_yaml(path) == lib


def test_a_deck_json_cannot_carry_gets_no_mirror(manifest_deck, tmp_path):
    """NaN (and anything else JSON does not carry exactly) leaves no mirror, and no stale one behind."""
    from oto.files import mirror_path, read_yaml_mirrored, write_yaml_mirrored

    path = tmp_path / "doc.yaml"
    write_yaml_mirrored(path, {"a": 1.5, "b": {0: 1}, "c": [True, None, "x"]})
    assert mirror_path(path).is_file()
    write_yaml_mirrored(path, {"a": float("nan")})
    assert not mirror_path(path).exists()
    write_yaml_mirrored(path, {"b": {1.5: "a float key"}})  # keys other than text: as pairs
    assert mirror_path(path).is_file() and read_yaml_mirrored(path) == {"b": {1.5: "a float key"}}
    write_yaml_mirrored(path, {"day": datetime.date(2026, 12, 4)})  # YAML's timestamp: JSON has none
    assert not mirror_path(path).exists() and read_yaml_mirrored(path) == {"day": datetime.date(2026, 12, 4)}


def test_the_deck_jobs_legality_answers_spare_later_jobs_every_shipped_kernel(tmp_path, monkeypatch):
    from oto.deck.model import LEGALITY_FILE, read_library_yaml, write_library_legality, write_library_yaml
    from oto.deck.sources import shipped_manifest
    from oto.hardware.profile import load_profile
    from oto.tensile import legality

    navi31 = read_manifest(shipped_manifest("gfx1100"), ["Cijk_Alik_Bljk_HHS_BH"])
    lib = navi31.libraries["Cijk_Alik_Bljk_HHS_BH"]
    limits = legality.Limits.from_profile(load_profile("arch_profiles/gfx1103.yaml"))
    path = tmp_path / "Cijk_Alik_Bljk_HHS_BH" / "deck.yaml"
    write_library_yaml(lib, path, {})
    judged = write_library_legality(lib, path.with_name(LEGALITY_FILE), limits)
    assert 0 < judged <= len(lib.solutions)  # each distinct kernel once
    every = list(range(len(lib.sizes)))

    def fresh():
        legality._checked.clear()
        legality._resolved.clear()
        legality._seeded.clear()
        legality._pending.clear()

    derived = []
    real = legality._derive
    monkeypatch.setattr(legality, "_derive", lambda run: derived.append(1) or real(run))
    fresh()
    read = read_library_yaml(path)  # the memo is seeded from legality.json at the first legality question
    assert legality._pending == [path.with_name(LEGALITY_FILE)] and not legality._checked
    seeded = read.references(every, limits)
    assert not derived  # no shipped kernel judged again
    fresh()
    path.with_name(LEGALITY_FILE).rename(tmp_path / "aside.json")
    assert read_library_yaml(path).references(every, limits) == seeded and derived  # the same, judged here
    # another arch's limits: the answers are not theirs (computed afresh, and right)
    fresh()
    (tmp_path / "aside.json").rename(path.with_name(LEGALITY_FILE))
    other = legality.Limits()  # gfx90c's
    derived.clear()
    theirs = read_library_yaml(path).references(every, other)
    assert derived
    fresh()
    assert lib.references(every, other) == theirs
    # a table of other rules' source, or a torn file, is ignored: the deck still reads
    table = path.with_name(LEGALITY_FILE)
    text = table.read_text()
    table.write_text(text.replace(legality.rules_fingerprint(), "0" * 64))
    fresh()
    derived.clear()
    assert read_library_yaml(path).references(every, limits) == seeded and derived
    table.write_text(text[: len(text) // 2])
    assert read_library_yaml(path).references(every, limits) == seeded

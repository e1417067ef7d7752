"""``oto upstream`` (oto.rocblas.upstream): the kit laid out as rocBLAS lays out its libraries, the Tensile
and rocBLAS changes an architecture needs (as diffs on checkouts, here small samples written for this test
with the anchors of ROCm/Tensile a164ed70 and ROCm/rocBLAS b520bc83), and a PR description that refuses
simulated evidence unless told. TensileCreateLibrary over the kit: tests/test_tensile_real.py."""

import re
import subprocess
import sys
from pathlib import Path

import oto
import pytest
import yaml
from oto.deck.model import write_library_yaml
from oto.deck.sources import load_deck
from oto.files import write_yaml
from oto.rocblas.upstream import (
    ROCBLAS_LOGIC,
    EditError,
    UpstreamRefused,
    architecture_edits,
    patch_text,
    write_kit,
)
from oto.tensile.params import candidate_id, canonical

ROOT = Path(__file__).resolve().parents[1]
PROFILE = yaml.safe_load((ROOT / "arch_profiles" / "gfx90c.yaml").read_text())
LIBS = ("Cijk_Ailk_Bljk_DB", "Cijk_Alik_Bjlk_DB")


def results_folder(tmp: Path, numbers: str = "measured") -> Path:
    """results/gfx90c with two libraries whose shipped solution 0 wins every size (final + deck slice)."""
    deck = load_deck("manifest")
    results = tmp / "results" / "gfx90c"
    for name in LIBS:
        lib = deck.libraries[name]
        params = canonical(lib.solutions[0]["params"])
        kid = candidate_id(params)
        write_library_yaml(lib, results / name / "deck.yaml", {"source": "manifest"})
        rows = [
            {"size_index": i, "winner": kid, "score": 1.3, "ci_low": 1.2, "ci_high": 1.4, "gflops": 50.0,
             "generation": 0, "verdict": "win"}
            for i in range(len(lib.sizes))
        ]  # fmt: skip
        write_yaml(results / name / "final.yaml", {
            "library": name, "family": "DB", "pattern": lib.pattern,
            "provenance": {"backend": "tensile", "numbers": numbers, "tensile_version": "4.44.0",
                           "device": "gfx90c"},
            "measurement": {"drift": "reference_timeline+sweep_clock"},
            "generations": 4, "converged": True, "sizes": lib.sizes, "per_size": rows,
            "kernels": {kid: params},
            "summary": {"geomean_score": 1.3, "wins": len(rows), "ties": 0, "losses": 0, "failures": {}},
        })  # fmt: skip
    return results


VERIFY = {
    "numbers": "measured",
    "client": {"client": "rocblas-bench"},
    "libraries": {
        "Cijk_Ailk_Bljk_DB": {"counts": {"pass": 7, "fail": 1}, "changes": [{"size_index": 3}]},
        "Cijk_Alik_Bjlk_DB": {"counts": {"pass": 8}, "changes": []},
    },
}
COMPARE = {
    "numbers": "measured",
    "against": {
        "spoof": {
            "DB": {
                "sizes": 16,
                "measured": 16,
                "median_speedup": 1.31,
                "median_ci": [1.2, 1.4],
                "geomean_speedup": 1.28,
                "p10": 1.05,
                "p90": 1.6,
                "wins": 14,
                "ties": 1,
                "losses": 1,
                "regressions": [
                    {
                        "library": "Cijk_Alik_Bjlk_DB",
                        "size_index": 2,
                        "speedup": 0.93,
                        "ci_low": 0.9,
                        "ci_high": 0.96,
                    }
                ],
            }
        },  # fmt: skip
        "upstream": {
            "DB": {
                "sizes": 16,
                "measured": 16,
                "median_speedup": 1.3,
                "median_ci": [1.2, 1.4],
                "geomean_speedup": 1.27,
                "p10": 1.0,
                "p90": 1.6,
                "wins": 14,
                "ties": 2,
                "losses": 0,
                "regressions": [],
                "baseline_failed": [
                    {
                        "library": "Cijk_Ailk_Bljk_DB",
                        "size_index": 5,
                        "reason": "its kernel failed validation in finalize's race",
                    },
                ],
            }
        },  # fmt: skip
    },
}


def test_the_kit_is_laid_out_as_rocblas_lays_out_its_libraries(tmp_path):
    kit = write_kit(results_folder(tmp_path), PROFILE, tmp_path / "kit", VERIFY, COMPARE)
    folder = tmp_path / "kit" / ROCBLAS_LOGIC / "gfx90c"
    assert sorted(p.name for p in folder.glob("*.yaml")) == [f"gfx90c_{n}.yaml" for n in sorted(LIBS)]
    assert sorted(p.name for p in folder.glob("*.provenance.json")) == [
        f"gfx90c_{n}.provenance.json" for n in sorted(LIBS)
    ]
    logic = yaml.safe_load((folder / f"gfx90c_{LIBS[0]}.yaml").read_text())
    assert logic[1] == "gfx90c" and logic[2] == "gfx90c"  # schedule and arch: the native label
    assert kit["not_measured"] == [] and kit["numbers"] == {"logic": ["measured"], "verify": "measured",
                                                             "compare": "measured"}  # fmt: skip
    pr = (tmp_path / "kit" / "PR.md").read_text()
    assert "NOT FOR SUBMISSION" not in pr and "library/src/blas3/Tensile/Logic/asm_full/gfx90c/" in pr
    # who wrote it, from which commit, and the run (night) behind each library
    assert f"Written by oto {oto.__version__} (commit {oto.source_commit() or 'unknown'}" in pr
    assert "drift: reference_timeline+sweep_clock; night `not recorded`" in pr  # finals without a night
    assert "| Cijk_Ailk_Bljk_DB | 7 | 1 |" in pr and "**measured** by tensile" in pr
    assert "regression vs spoof: Cijk_Alik_Bjlk_DB size 2: 0.93 [0.9, 0.96]" in pr
    assert (
        "- 1 size(s) left out: upstream's kernel gave wrong results there on gfx90c (finalize's race); the "
        "tuned library ships its own kernel there, checked by verify above: Cijk_Ailk_Bljk_DB size 5" in pr
    ) and "size(s) left out: spoof's" not in pr
    assert "1.31 [1.2, 1.4]" in pr and "Tensile/Source/lib/include/Tensile/AMDGPU.hpp" in pr
    patch = (tmp_path / "kit" / "patches" / "ROCm-Tensile.patch").read_text()
    assert "no checkout given" in patch and "architectureMap: 'gfx90c':'gfx90c'" in patch
    # without checkouts PR.md says the patches list the edits (it said "one patch per repository")
    assert (
        "a file per repository: ROCm/Tensile's the edits listed, no diff (`oto upstream --tensile-src "
        "<checkout>` writes one); ROCm/rocBLAS's the edits listed" in pr
    )


def test_the_kit_refuses_simulated_or_missing_evidence_unless_told(tmp_path):
    results = results_folder(tmp_path, numbers="simulated")
    with pytest.raises(UpstreamRefused, match="winners are simulated; the verify results are missing"):
        write_kit(results, PROFILE, tmp_path / "kit", None, COMPARE)
    assert not (tmp_path / "kit").exists()  # refused: nothing written
    kit = write_kit(results, PROFILE, tmp_path / "kit", {**VERIFY, "numbers": "simulated"}, COMPARE, True)
    pr = (tmp_path / "kit" / "PR.md").read_text()
    assert pr.startswith("> **NOT FOR SUBMISSION.**") and "the verify results are simulated" in pr
    # the kit's logic files say how well the model was checked on this chip, as the logic stage's do
    from oto.hardware.simulated.checks import final_model_check

    check = final_model_check(yaml.safe_load((results / LIBS[0] / "final.yaml").read_text()), "gfx90c")
    logic = (tmp_path / "kit" / ROCBLAS_LOGIC / "gfx90c" / f"gfx90c_{LIBS[0]}.yaml").read_text()
    assert check and check in logic
    assert kit["not_measured"] == [
        "the logic files' winners are simulated",
        "the verify results are simulated",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "oto.cli", "upstream", "--arch", "gfx90c",
         "--results", str(tmp_path / "results")],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 1 and "refused: the logic files' winners are simulated" in proc.stderr


def test_the_kit_ships_what_verify_left_and_checks_every_final_before_it_touches_the_kit(tmp_path):
    """The logic stage replaces a kernel verify took out; the kit wrote the final's winner as it was (the very
    kernel rocBLAS's client found wrong, with a PR saying it was taken out). A final.yaml whose winner is not
    among its kernels raised a KeyError after the kit's old logic files were deleted; one with a NaN score
    shipped a row of 0 GFLOPS. A library verify never saw is named and refuses the kit; the PR says how
    much of the footprint the kit covers and where the tuned library's own calls failed in compare."""
    import copy
    import math

    results = results_folder(tmp_path)
    final = yaml.safe_load((results / LIBS[0] / "final.yaml").read_text())
    old = final["per_size"][3]["winner"]
    deck = load_deck("manifest").libraries[LIBS[0]]
    other = canonical(deck.solutions[1]["params"])
    replaced = candidate_id(other)
    verify = copy.deepcopy(VERIFY)
    verify["libraries"][LIBS[0]]["replacements"] = {
        3: {"kernel": replaced, "params": other, "gflops": 42.0, "how": "next_candidate"}
    }
    compare = copy.deepcopy(COMPARE)
    compare["against"]["spoof"]["DB"]["failed"] = [
        {"library": LIBS[1], "size_index": 4, "status": "timeout", "reason": "no completion"}
    ]
    write_kit(results, PROFILE, tmp_path / "kit", verify, compare)
    folder = tmp_path / "kit" / ROCBLAS_LOGIC / "gfx90c"
    logic = yaml.safe_load((folder / f"gfx90c_{LIBS[0]}.yaml").read_text())
    names = [s.get("SolutionIndex") for s in logic[5]]
    size = list(final["sizes"][3][:4])
    (row,) = [r for r in logic[7] if r[0][:4] == size]
    assert row[1][1] == 42.0 and len(names) == 2  # the replacement's row, with its GFLOPS
    assert old != replaced
    pr = (tmp_path / "kit" / "PR.md").read_text()
    assert "- Coverage: 2 of the ? GEMM libraries rocBLAS ships" in pr  # no run deck.yaml in this folder
    assert "**Partial:**" not in pr  # unknown footprint: nothing to say
    stock = {"deck_of": "gfx900", "libraries_in_source": 46, "stats_of_source": {"unique_sizes": 23745}}
    write_yaml(results / "deck.yaml", {"provenance": stock})
    write_kit(results, PROFILE, tmp_path / "kit", verify, compare)
    pr = (tmp_path / "kit" / "PR.md").read_text()
    assert "- Coverage: 2 of the 46 GEMM libraries rocBLAS ships for the stock gfx900 footprint" in pr
    assert "**Partial:** once `architectureMap` maps this arch to its own logic" in pr
    assert "- DB: 1 size(s) where the tuned library's calls failed or did not run (timeout 1); the" in pr
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def refused(change, match):
        doc = copy.deepcopy(final)
        change(doc)
        write_yaml(results / LIBS[0] / "final.yaml", doc)
        with pytest.raises(UpstreamRefused, match=match):
            write_kit(results, PROFILE, tmp_path / "kit", verify, compare)
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # the kit as it was

    refused(lambda d: d["per_size"][2].update(winner="kdeadbeef0000"),
            r"final.yaml: field 'per_size\[2\].winner': 'kdeadbeef0000' is not in 'kernels'")  # fmt: skip
    refused(lambda d: d["per_size"][2].update(score=math.nan),
            r"field 'per_size\[2\].score': nan is not a measurement")  # fmt: skip
    refused(lambda d: d["per_size"][2].update(verdict="floor_failed"),  # as the merge's intake refuses it
            r"'per_size\[2\].score': .* where the reference failed \(verdict floor_failed\)")  # fmt: skip
    refused(lambda d: d["provenance"].update(arch="gfx1103"),
            r"field 'provenance.arch': 'gfx1103': another GPU's library")  # fmt: skip
    write_yaml(results / LIBS[0] / "final.yaml", final)
    partial = copy.deepcopy(verify)
    del partial["libraries"][LIBS[1]]
    with pytest.raises(UpstreamRefused, match=f"verify has no result for {LIBS[1]}"):
        write_kit(results, PROFILE, tmp_path / "kit", partial, compare)


# Small stand-ins for the files the edits touch, written for this test: each holds the anchors the edits
# find in ROCm/Tensile a164ed70 and ROCm/rocBLAS b520bc83 (the real files are much longer).
SAMPLES = {
    "ROCm/Tensile": {
        "Tensile/Common.py": 'globalParameters["SupportedISA"] = [(8,0,3),\n'
        "                                    (9,0,0), (9,0,6), (9,0,8), (9,0,10),\n"
        "                                    (10,3,0)]\n"
        "architectureMap = {\n  'all':'_', 'gfx900':'vega10',\n"
        "  'gfx90a':'aldebaran', 'gfx90a:xnack+':'aldebaran',\n"
        "  'gfx1030':'navi21'\n}\n",
        "Tensile/AsmCaps.py": "    cachedAsmCaps = \\\n    {(0, 0, 0): {'HasAddLshl': False,\n"
        "                 'v_pk_fmac_f16': False},\n     (9, 0, 0): {'HasAddLshl': True,\n"
        "                 'MaxVmcnt': 63,\n                 'v_pk_fmac_f16': False},\n"
        "     (9, 0, 6): {'HasAddLshl': True,\n                 'v_pk_fmac_f16': False}}\n",
        "Tensile/Source/lib/include/Tensile/AMDGPU.hpp":
        "            gfx900  = 900,\n            gfx90a  = 910,\n            gfx942  = 942,\n"
        "            case AMDGPU::Processor::gfx90a:\n                return \"gfx90a\";\n"
        '            else if(deviceString.find("gfx90a") != std::string::npos)\n            {\n'
        "                return AMDGPU::Processor::gfx90a;\n            }\n",
        "Tensile/Source/lib/include/Tensile/Serialization/Predicates.hpp":
        '                iot::enumCase(io, value, "gfx900", AMDGPU::Processor::gfx900);\n'
        '                iot::enumCase(io, value, "gfx90a", AMDGPU::Processor::gfx90a);\n',
        "Tensile/Source/lib/include/Tensile/PlaceholderLibrary.hpp": "        gfx90a,\n        gfx942,\n"
        '        case LazyLoadingInit::gfx90a:\n            return "TensileLibrary_*_gfx90a";\n',
        "Tensile/Source/CMakeLists.txt":
        '  set(TENSILE_GPU_ARCHS gfx900 gfx90a:xnack- gfx1030 CACHE STRING "x")\n',
    },
    "ROCm/rocBLAS": {
        "CMakeLists.txt": '  set( TARGET_LIST_ROCM_6.0 "gfx900;gfx90a:xnack-")\n'
        '  set( TARGET_LIST_ROCM_6.3 "gfx900;gfx90a;gfx942")\n',
        "library/src/tensile_host.cpp": '        else if(deviceString.find("gfx90a") != std::string::npos)\n'
        "        {\n            return Tensile::LazyLoadingInit::gfx90a;\n        }\n",
    },
}  # fmt: skip


def checkouts(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for repo, files in SAMPLES.items():
        root = tmp_path / repo.replace("/", "-")
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        out[repo] = root
    return out


def test_the_patches_are_diffs_that_apply_to_the_checkouts(tmp_path):
    roots = checkouts(tmp_path)
    patches, problems = patch_text(architecture_edits(PROFILE), roots)
    assert problems == []
    for repo, root in roots.items():
        path = tmp_path / f"{repo.replace('/', '-')}.patch"
        path.write_text(patches[repo])
        subprocess.run(["git", "apply", str(path)], cwd=root, check=True)
    t, r = roots["ROCm/Tensile"], roots["ROCm/rocBLAS"]
    assert "(9,0,10), (9,0,12)," in (t / "Tensile/Common.py").read_text()
    kit, fresh = tmp_path / "kit", checkouts(tmp_path / "fresh")["ROCm/Tensile"]
    write_kit(results_folder(tmp_path), PROFILE, kit, VERIFY, COMPARE, sources={"ROCm/Tensile": fresh})
    said = (kit / "PR.md").read_text()  # which patch is a diff
    assert "per repository: ROCm/Tensile's a diff (`git apply` in its checkout); ROCm/rocBLAS's the" in said
    assert (
        "'gfx90a':'aldebaran', 'gfx90a:xnack+':'aldebaran',\n  'gfx90c':'gfx90c',\n"
        in (t / "Tensile/Common.py").read_text()
    )
    caps = (t / "Tensile/AsmCaps.py").read_text()
    assert "     (9, 0, 12): {'HasAddLshl': True,\n                 'MaxVmcnt': 63," in caps
    compile(caps.replace("    cachedAsmCaps = \\\n", "cachedAsmCaps = \\\n"), "AsmCaps.py", "exec")
    hpp = (t / "Tensile/Source/lib/include/Tensile/AMDGPU.hpp").read_text()
    assert "gfx90c  = 912," in hpp and 'return "gfx90c";' in hpp and 'find("gfx90c")' in hpp
    assert "gfx90a:xnack- gfx90c gfx1030" in (t / "Tensile/Source/CMakeLists.txt").read_text()
    cmake = (r / "CMakeLists.txt").read_text()
    assert '6.3 "gfx900;gfx90a;gfx90c;gfx942"' in cmake and '6.0 "gfx900;gfx90a:xnack-")' in cmake
    assert "LazyLoadingInit::gfx90c;" in (r / "library/src/tensile_host.cpp").read_text()


def test_an_anchor_another_version_moved_is_named_not_guessed(tmp_path):
    roots = checkouts(tmp_path)
    (roots["ROCm/Tensile"] / "Tensile/Source/lib/include/Tensile/PlaceholderLibrary.hpp").write_text(
        "// gone\n"
    )
    patches, problems = patch_text(architecture_edits(PROFILE), roots)
    assert problems == [
        "ROCm/Tensile: Tensile/Source/lib/include/Tensile/PlaceholderLibrary.hpp: no gfx9 entry below gfx90c "
        "to place it after ('case LazyLoadingInit::(gfx[0-9a-f]+):')"
    ]
    assert "+++ b/Tensile/Common.py" in patches["ROCm/Tensile"]  # the rest is still written
    with pytest.raises(EditError):
        architecture_edits({**PROFILE, "arch": "gfx90c"})[0].apply("nothing here")


def test_the_source_commit_is_this_checkouts():
    """What the kit and every logic file's provenance name: the checkout's HEAD, marked dirty with changes."""
    root = Path(oto.__file__).resolve().parents[2]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    commit = oto.source_commit()
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?", commit) and commit[:12] == head.stdout.strip()[:12]

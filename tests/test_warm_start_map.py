"""Warm start across ISA generations: another GPU's kernels reach this GPU's search at their nearest legal
point (oto.search.prior_map), unchanged where they are legal here, and every prior is counted."""

from __future__ import annotations

from pathlib import Path

import yaml
from oto.gemm import Library
from oto.registry.transfer import valu_only
from oto.search.evidence import warm_priors
from oto.search.prior_map import KNOB_WEIGHT, map_priors
from oto.search.space import Parameter, Space
from oto.search.strategies import Evidence, Observation
from oto.search.strategies.common import history
from oto.search.tensile_space import tensile_space
from oto.tensile import legality
from oto.tensile.params import macro_tile

PROFILES = Path(__file__).resolve().parents[1] / "arch_profiles"
HALF = Library.parse("Cijk_Alik_Bljk_HHS_BH")
INT8 = Library.parse("Cijk_Ailk_Bljk_I8II_BH")


def limits(arch: str) -> legality.Limits:
    return legality.Limits.from_profile(yaml.safe_load((PROFILES / f"{arch}.yaml").read_text()))


def point(space: Space, **knobs) -> dict:
    """A full point of ``space``: its defaults with ``knobs``, as a strategy proposes it."""
    defaults = {p.name: p.default_value for p in space.parameters}
    idx = space.index({k: list(v) if isinstance(v, tuple) else v for k, v in {**defaults, **knobs}.items()})
    assert idx is not None and space.valid(idx), space.violations({**defaults, **knobs})
    return space.config(idx)


def rdna2_kernel(library: Library, **knobs) -> dict:
    """A wave32 VALU kernel of gfx1035's space (RDNA2: dot instructions, no WMMA), as its registry has it."""
    space = tensile_space(library, limits("gfx1035"))
    base = {"ThreadTile": [8, 8], "WorkGroup": [16, 8, 1], "DepthU": 16, "VectorWidth": 8}
    return point(space, **{**base, "WavefrontSize": 32, **knobs})


def test_an_rdna2_prior_maps_to_a_legal_wmma_point_of_gfx1103():
    """gfx1035's half kernels lack gfx1103's WMMA knobs; before the mapping the search dropped every one
    (their ids were no points of its space); now each lands on a legal gfx1103 kernel with the target's
    matrix instruction, the donor's macro tile and depth, and is labelled with where it came from."""
    donor = rdna2_kernel(HALF, LocalDotLayout=2, InnerUnroll=2)
    target = tensile_space(HALF, limits("gfx1103"))
    # as it is, a VALU dot2 kernel of gfx1103 too (its missing WMMA knobs index at their defaults); a donor
    # ISA without WMMA makes it adopt the target's instruction all the same
    assert target.valid(target.index(donor))
    know = [
        {
            "id": "kdonor",
            "params": donor,
            "score": 1.4,
            "numbers": "simulated",
            "from_arch": "gfx1035",
            "valu_only": valu_only("gfx1035", HALF.name),
        }
    ]
    moved = warm_priors(know, target)
    assert (moved.as_is, moved.mapped, moved.merged, moved.unmapped) == (0, 1, 0, [])
    (prior,) = moved.priors
    assert legality.check(HALF, prior.params, limits("gfx1103")).valid
    assert prior.params["MatrixInstruction"] == [16, 16, 16, 1] and prior.params["WavefrontSize"] == 32
    assert macro_tile(prior.params) == macro_tile(donor) == (128, 64)
    assert prior.params["DepthU"] == donor["DepthU"] and prior.params["LocalDotLayout"] == 1  # no dot in MI
    assert prior.score == 1.4 and prior.kernel_id == target.id_of(prior.params)
    assert "gfx1035's registry" in prior.source and "mapped from kdonor" in prior.source
    assert moved.distances[0] > 0 and "1 mapped to their nearest legal point" in moved.summary()
    assert prior.distance == moved.distances[0]  # the search weighs a mapped prior by it
    # the search takes it as a prior point of its space
    hist = history(Evidence(target, 0, prior=moved.priors), target)
    assert len(hist.prior_points) == 1


def test_int8_dot_kernels_map_onto_gfx1103_which_has_no_dot4():
    """gfx1103 lacks v_dot4 (LocalDotLayout 4 is no knob of its int8 space): the donor's dot kernels map to
    WMMA kernels; two donor kernels that differ only in that knob land on one point, counted as merged."""
    target = tensile_space(INT8, limits("gfx1103"))
    dot = rdna2_kernel(
        INT8, ThreadTile=[4, 4], WorkGroup=[8, 8, 1], VectorWidth=4, LocalDotLayout=4, InnerUnroll=4
    )
    plain = rdna2_kernel(INT8, ThreadTile=[4, 4], WorkGroup=[8, 8, 1], VectorWidth=4)
    priors = [Observation("kdot", dot, 1.2), Observation("kplain", plain, 1.1)]
    moved = map_priors(priors, target, [True, True])
    assert moved.mapped == 1 and moved.merged == 1 and moved.total == 2
    assert moved.priors[0].score == 1.2  # the better-scored prior keeps the point
    assert legality.check(INT8, moved.priors[0].params, limits("gfx1103")).valid
    assert macro_tile(moved.priors[0].params) == (32, 32)


def test_a_moved_prior_is_never_at_distance_zero():
    """navi21's HB kernel [8, 8] x [16, 8] keeps its macro tile, depth and knobs on gfx1103 and only adopts
    WMMA: the geometry terms give 0, which the surrogate took for a prior legal here as it is (four first bets
    before the shipped seeds, a full place in the model, never relevelled). A moved prior is one knob away."""
    hb = Library.parse("Cijk_Alik_Bjlk_HB")
    donor = rdna2_kernel(hb, GlobalReadVectorWidth=8)
    target = tensile_space(hb, limits("gfx1103"))
    moved = map_priors([Observation("kvalu", donor, 1.3)], target, [valu_only("gfx1035", hb.name)])
    assert moved.mapped == 1 and moved.priors[0].params["MatrixInstruction"] == [16, 16, 16, 1]
    assert macro_tile(moved.priors[0].params) == macro_tile(donor)
    assert moved.distances == [KNOB_WEIGHT] and moved.priors[0].distance == KNOB_WEIGHT
    hist = history(Evidence(target, 0, [], (), frozenset(), prior=moved.priors), target)
    assert hist.prior_distances == [KNOB_WEIGHT]


def test_priors_legal_here_pass_through_unchanged():
    """gfx90c -> gfx902 (one ISA family, the same space): every prior is the same observation as before; an
    RDNA3 VALU kernel whose donor could have used WMMA and chose not to stays a VALU kernel."""
    vega = tensile_space(HALF, limits("gfx902"))
    priors = [
        Observation(f"k{i}", point(vega, ThreadTile=tt, WorkGroup=wg, DepthU=du, VectorWidth=2), 1.0 + i)
        for i, (tt, wg, du) in enumerate(
            [((4, 4), (16, 16, 1), 16), ((8, 4), (16, 16, 1), 8), ((4, 8), (8, 8, 1), 32)]
        )
    ]
    assert all(tensile_space(HALF, limits("gfx90c")).valid(vega.index(o.params)) for o in priors)
    moved = map_priors(priors, vega, [valu_only("gfx90c", HALF.name)] * 3)
    assert moved.as_is == 3 and moved.mapped == moved.merged == 0 and not moved.unmapped
    assert all(a is b for a, b in zip(moved.priors, priors, strict=True))
    rdna3 = tensile_space(HALF, limits("gfx1103"))
    valu = point(rdna3, ThreadTile=[8, 8], WorkGroup=[16, 8, 1], VectorWidth=8, WavefrontSize=32)
    kept = map_priors([Observation("kvalu", valu, 1.0)], rdna3, [valu_only("gfx1100", HALF.name)])
    assert kept.as_is == 1 and kept.priors[0].params == valu


def test_which_donors_adopt_the_targets_instruction():
    assert valu_only("gfx1035", HALF.name) is True  # RDNA2: no WMMA
    assert valu_only("gfx1100", HALF.name) is False  # RDNA3: WMMA for half
    assert valu_only("gfx1100", "Cijk_Ailk_Bljk_SB") is True  # no WMMA for fp32
    assert valu_only("gfx90c", HALF.name) is True
    assert valu_only("results", HALF.name) is None  # not named after an ISA: mapped as it is


def test_a_prior_with_no_legal_point_is_counted_not_dropped():
    space = Space("toy", (Parameter("x", (1, 2, 4)),), constraint=lambda c: c["x"] != 4)
    moved = map_priors([Observation("a", {"x": 2}, 1.0), Observation("b", {"x": 4}, 2.0)], space)
    assert moved.as_is == 1 and [kid for kid, _ in moved.unmapped] == ["b"]
    assert "1 with no legal point here" in moved.summary()


def test_mutates_evidence_maps_another_gpus_priors_and_logs_the_counts(caplog):
    """evidence_for (what mutate asks the strategy with): a gfx1035 registry's half kernels reach gfx1103's
    search as legal WMMA points, and the job's log says how many were kept, mapped, merged or unmappable."""
    import logging

    from oto.deck.sources import SHIPPED_MANIFESTS, read_manifest
    from oto.registry.transfer import Knowledge
    from oto.search.evidence import evidence_for

    deck = read_manifest(SHIPPED_MANIFESTS["gfx1100"]).libraries[HALF.name]
    profile = yaml.safe_load((PROFILES / "gfx1103.yaml").read_text())
    donor = rdna2_kernel(HALF)
    prior = {"id": "kd", "params": donor, "score": 1.3, "numbers": "simulated", "library": HALF.name}
    know = Knowledge(
        set(), set(), [], [], "simulated", [{**prior, "from_arch": "gfx1035", "valu_only": True}]
    )
    with caplog.at_level(logging.INFO, logger="oto.search.evidence"):
        ev = evidence_for(deck, 0, None, profile, {"benchmark": {"tuning_sizes": 4}}, know)
    (mapped,) = ev.prior
    assert mapped.params["MatrixInstruction"] == [16, 16, 16, 1] and ev.space.violations(mapped.params) == ()
    assert "1 prior(s) from other GPUs: 0 legal here as they are, 1 mapped" in caplog.text

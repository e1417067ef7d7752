"""The ``oto`` command: helpers around the workflow (the workflow itself runs with ``snakemake``)."""

from __future__ import annotations

import sys

import oto


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {
        "calibrate": (
            "fit the simulated GPU to logic files' GFLOPS (--chip: one chip's constants) or --bundles",
            _calibrate,
        ),
        "deck-manifest": ("derive the shipped deck manifest from a folder of logic files", _deck_manifest),
        "env": ("report GPU, ROCm, Tensile, compilers, client, API key and the auto backend", _env),
        "merge": ("merge testers' result bundles (folders or storage URLs) into one results/<arch>/", _merge),
        "override": (
            "rocBLAS's override file: the best shipped kernel per GEMM of your workload (stock install)",
            _override,
        ),
        "plan": ("estimate a configured run: jobs, timed launches, GPU time on the target, time here", _plan),
        "predict": (
            "what the simulated GPU expects of a kernel at one size (GFLOPS, % of peak, bound)",
            _predict,
        ),
        "replay": ("score a search strategy on a recorded Kernel Tuner cache", _replay),
        "registry": ("query the experiment registry or export it as Kernel Tuner T4", _registry),
        "shards": ("list what each of N shards of the deck holds (one tester, one night each)", _shards),
        "strategies": (
            "list the search strategies and their options (config search.strategy/options)",
            _strategies,
        ),
        "tester": ("check this machine, tune your shard overnight and pack a result bundle", _tester),
        "upstream": (
            "write the tuned library as a rocBLAS/Tensile change: logic files, patches, PR description",
            _upstream,
        ),
    }
    if not argv or argv[0] in ("-h", "--help"):
        print(f"oto {oto.__version__}\n\nusage: oto COMMAND [...]\n")
        for name, (doc, _) in commands.items():
            print(f"  {name:16s} {doc}")
        print(
            "\n`oto COMMAND --help` describes a command's arguments. The workflow itself runs with snakemake."
        )
        return 0
    if argv[0] == "--version":
        print(oto.__version__)
        return 0
    if argv[0] not in commands:
        print(f"oto: unknown command {argv[0]!r} (try oto --help)", file=sys.stderr)
        return 2
    return int(commands[argv[0]][1](argv[1:]) or 0)


def _calibrate(argv: list[str]) -> int:
    if any(a == "--bundles" or a.startswith("--bundles=") for a in argv):  # a tester's races, per device
        from oto.fleet.calibrate import main as bundles_main

        return bundles_main(argv)
    from oto.hardware.simulated.calibration import main

    return main(argv)


def _deck_manifest(argv: list[str]) -> int:
    from oto.deck.sources import manifest_main

    return manifest_main(argv)


def _replay(argv: list[str]) -> int:
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads: small GP solves, no contention
    from oto.search.replay_scorer import main

    return main(argv)


def _registry(argv: list[str]) -> int:
    from oto.registry.export import main

    return main(argv)


def _strategies(argv: list[str]) -> int:
    import argparse

    argparse.ArgumentParser(
        prog="oto strategies",
        description="Print every search strategy with its options, their defaults and what they do.",
    ).parse_args(argv)
    from oto.search.strategies import describe

    print(describe())
    return 0


def _tester(argv: list[str]) -> int:
    from oto.fleet.tester import main

    return main(argv)


def _upstream(argv: list[str]) -> int:
    from oto.rocblas.upstream import main

    return main(argv)


def _shards(argv: list[str]) -> int:
    from oto.fleet.tester import shards_main

    return shards_main(argv)


def _merge(argv: list[str]) -> int:
    from oto.fleet.merge import main

    return main(argv)


def _override(argv: list[str]) -> int:
    from oto.measurement.stock_override import main

    return main(argv)


def _plan(argv: list[str]) -> int:
    from oto.run.estimate import main

    return main(argv)


def _predict(argv: list[str]) -> int:
    from oto.run.predict import main

    return main(argv)


def _env(argv: list[str]) -> int:
    from oto.environment import main

    return main(argv)


if __name__ == "__main__":
    raise SystemExit(main())

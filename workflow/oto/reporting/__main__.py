"""Redraw a run's dashboard by hand, also mid-run: python -m oto.reporting results/<arch> [--config FILE]."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import yaml

from oto.reporting.dashboard import write_dashboard


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m oto.reporting", description=__doc__)
    ap.add_argument("results", type=Path, help="the run's results/<arch> folder")
    ap.add_argument(
        "--config",
        type=Path,
        default=Path("config/config.yaml"),
        help="run config, for max_generations, seed and the tie tolerance (default: %(default)s)",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    config = yaml.safe_load(args.config.read_text()) if args.config.is_file() else {}
    data = write_dashboard(args.results, config or {})
    print(f"{args.results / 'dashboard' / 'index.html'}: {data['state']}, {len(data['libraries'])} libraries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

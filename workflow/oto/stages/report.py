"""report: the acceptance report, results/<arch>/acceptance.md and its HTML twin acceptance.html
(:mod:`oto.reporting.acceptance`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from oto.files import atomic_write_text, read_yaml
from oto.reporting.acceptance import check_finals, render_html, render_markdown
from oto.reporting.collect import collect
from oto.reporting.dashboard import LIVE_DIR
from oto.stages import Stage

STAGE = Stage(
    name="report", scope="run", home="", reads=("ceilings", "compare", "coverage", "finalize", "verify")
)
log = logging.getLogger(__name__)


def run(
    final_paths: Sequence[Path],
    ceilings_path: Path,
    deck_path: Path,
    profile: Mapping | None,
    config: Mapping,
    out: Path,
    out_html: Path | None = None,
) -> str:
    final_paths = [Path(p) for p in final_paths]
    check_finals(final_paths)
    results = Path(ceilings_path).parent
    # The generation digests the live page's refreshes cached (keyed on their files' sizes and times): a
    # big deck's 32 generations are read once a run, not once per page. Read only: the cache is the live
    # page's, and this rule writes nothing but its declared outputs.
    names = [p.parent.name for p in final_paths]
    data: dict[str, Any] = collect(
        results, config, cache_dir=results / LIVE_DIR / "cache", libraries=names, write_cache=False
    )
    deck_source = ((read_yaml(deck_path) or {}).get("provenance") or {}).get("deck_source") or {}
    text = render_markdown(data, deck_source)
    atomic_write_text(out, text)
    if out_html is not None:
        atomic_write_text(out_html, render_html(data, deck_source))
    log.info("acceptance report for %d libraries", len(final_paths))
    return text

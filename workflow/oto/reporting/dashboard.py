"""Render the dashboard (index.html + plots/*.svg + data.json) from the run's files.

Two copies, each written by one writer: the **live** page ``results/<arch>/live/``, refreshed best-effort by
the deck job, every select job and the dashboard job (:func:`refresh`), so it is at most one generation
behind and reloads itself until the run finishes; and the **final** page ``results/<arch>/dashboard/``, the
dashboard rule's declared output. The page is static and opens from disk. Concurrent refreshes are
serialised by a lock file and each file is replaced atomically, so a reader never sees half a page.

The live refresh is paced so it never costs more than ``LIVE_SHARE`` of the run's time: after a refresh that
took d seconds, the next one waits until (1/LIVE_SHARE - 1)·d seconds have passed, and a select job that
comes earlier leaves the page as it is (the next one, or the dashboard rule at the end, brings it up to
date). On a night where a generation takes minutes every select refreshes; a demo's second-long jobs skip
most refreshes instead of spending half their time drawing charts. A page still waiting for first results is
always due: the first generation to finish shows at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oto.files import atomic_write_text
from oto.reporting.charts import CHARTS

if TYPE_CHECKING:
    import jinja2

# jinja2, pandas (oto.reporting.collect) and matplotlib (oto.reporting.plots) are imported where a page is
# drawn: a select job whose paced refresh is not due starts without them.

log = logging.getLogger(__name__)
TEMPLATES = Path(__file__).resolve().parent / "templates"
LIVE_DIR = "live"  # results/<arch>/live/: the page every select job refreshes
FINAL_DIR = "dashboard"  # results/<arch>/dashboard/: the dashboard rule's output
REFRESH_SECONDS = 30
LIVE_SHARE = 0.1  # at most this share of the run's wall time goes to refreshing the live page
LIVE_STAMP = ".refreshed"  # live/.refreshed: when the last live refresh ended and how long it took
STATE_TEXT = {
    "waiting": "waiting for first results",
    "running": "run in progress",
    "finished": "run finished",
}
STATE_COLOUR = {
    "waiting": "cool-gray",
    "tuning": "blue",
    "converged": "teal",
    "finalizing": "purple",
    "finished": "green",
}


def fmt(value: Any, spec: str = "", suffix: str = "", missing: str = "—") -> str:
    """A number for a page: formatted, or a dash when there is none."""
    if value is None:
        return missing
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if v != v:  # NaN
        return missing
    return f"{v:{spec}}{suffix}"


def environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
    )
    env.filters["fmt"] = fmt
    env.filters["breakable"] = breakable
    return env


def breakable(name: Any) -> Any:
    """A library name that may wrap before its family in a narrow table: ``Cijk_Ailk_Bljk_`` / ``ZB_GB``."""
    from markupsafe import Markup, escape

    parts = str(name).split("_")
    if len(parts) < 4:
        return escape(str(name))
    return escape("_".join(parts[:3]) + "_") + Markup("<wbr>") + escape("_".join(parts[3:]))


def css() -> str:
    return (TEMPLATES / "carbon.css").read_text()


@contextlib.contextmanager
def _locked(out_dir: Path) -> Iterator[None]:
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _launches(lib: Mapping) -> dict[str, int]:
    """Candidate launches by proposer, most first (the reference launches are the same for every one)."""
    total: dict[str, int] = {}
    for g in lib["generations"]:
        for k, v in (g.get("launches") or {}).items():
            if k != "reference":
                total[k] = total.get(k, 0) + int(v)
    return dict(sorted(((k, v) for k, v in total.items() if v), key=lambda kv: -kv[1]))


def page_context(data: Mapping, results: Path) -> dict[str, Any]:
    from oto.reporting.collect import generations_done
    from oto.reporting.figures import roofline_text

    finished = data["state"] == "finished"
    # Mid-run, the latest generation of every library (a finished library's final is not comparable
    # with the others' tuning sizes); once all are finished, the final measurement.
    table = data["final"] if finished else data["current"]
    headline = table["overall"]
    done, total = generations_done(data)
    lib_rows = {r["library"]: r for r in data["final"]["libraries"]}
    for r in data["current"]["libraries"]:
        lib_rows.setdefault(r["library"], r)
    return {
        "d": data,
        "css": css(),
        "refresh_seconds": None if finished else REFRESH_SECONDS,
        "state_text": STATE_TEXT.get(data["state"], data["state"]),
        "state_colour": STATE_COLOUR,
        "table": table,
        "headline": headline,
        "headline_scope": (
            f"final, {headline['sizes']} deck sizes"
            if finished
            else f"latest generation, {headline['sizes']} tuning sizes"
        ),  # fmt: skip
        "gens_done": done,
        "gens_total": total,
        "converged": sum(1 for lib in data["libraries"] if (lib["convergence"] or {}).get("converged")),
        "sizes_measured": data["coverage"]["final_sizes_with_winner"]
        or data["coverage"]["tuning_sizes_measured"],
        "lib_rows": lib_rows,
        "launches": {lib["library"]: _launches(lib) for lib in data["libraries"]},
        "acceptance_link": (results / "acceptance.html").is_file(),
        "roofline_text": roofline_text(data.get("launch_us")),
    }


def write_dashboard(
    results: str | Path, config: Mapping | None = None, out_dir: str | Path | None = None
) -> dict:
    """Collect, plot and render; returns the collected document (also written as data.json)."""
    results = Path(results)
    out_dir = Path(out_dir) if out_dir else results / FINAL_DIR
    from oto.reporting.collect import collect

    with _locked(out_dir):
        # Per-generation digests are cached by the live page's refreshes; the final page reuses them.
        data = collect(results, config, cache_dir=results / LIVE_DIR / "cache")
        from oto.reporting import plots

        for name in CHARTS:
            atomic_write_text(out_dir / "plots" / f"{name}.svg", plots.CHARTS[name](data))
        atomic_write_text(out_dir / "data.json", json.dumps(data, indent=1, sort_keys=True, default=str))
        html = environment().get_template("dashboard.html.j2").render(**page_context(data, results))
        atomic_write_text(out_dir / "index.html", html)  # last: the page appears once its plots exist
    log.info("dashboard %s: %s, %d libraries", out_dir / "index.html", data["state"], len(data["libraries"]))
    return data


def publish_live(results: str | Path, page_dir: str | Path) -> bool:
    """The live page becomes a copy of the final page (the run has finished: they show the same), best
    effort like :func:`refresh`, without drawing the charts a second time."""
    live, src = Path(results) / LIVE_DIR, Path(page_dir)
    t0 = time.time()
    try:
        with _locked(live):
            for name in CHARTS:
                atomic_write_text(live / "plots" / f"{name}.svg", (src / "plots" / f"{name}.svg").read_text())
            atomic_write_text(live / "data.json", (src / "data.json").read_text())
            atomic_write_text(live / "index.html", (src / "index.html").read_text())
    except OSError:
        log.warning("could not copy the final dashboard to %s", live, exc_info=True)
        return False
    now = time.time()
    atomic_write_text(live / LIVE_STAMP, json.dumps({"ended": now, "seconds": round(now - t0, 3)}))
    return True


def _live_due(live: Path, now: float) -> tuple[bool, float]:
    """Whether the live page is due for a refresh, and the seconds until it is."""
    try:
        stamp = json.loads((live / LIVE_STAMP).read_text())
        wait = float(stamp["ended"]) + (1 / LIVE_SHARE - 1) * float(stamp["seconds"]) - now
        if stamp.get("state") == "waiting":
            return True, 0.0  # the page shows no result yet: the first ones are worth a refresh
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return True, 0.0  # never refreshed, or a torn stamp: refresh
    return wait <= 0 or wait > 3600, max(wait, 0.0)  # a clock jump never stalls the page for long


def refresh(results: str | Path, config: Mapping | None = None, force: bool = False) -> bool:
    """The live page, best effort, for the end of a stage: a dashboard problem is logged and never fails
    the tuning job. Paced (``LIVE_SHARE``) unless ``force``; returns whether the page was written."""
    live = Path(results) / LIVE_DIR
    t0 = time.time()
    due, wait = _live_due(live, t0)
    if not (due or force):
        log.info("live dashboard: refreshed recently, next refresh in %.0f s or more", wait)
        return False
    try:
        state = write_dashboard(results, config, live)["state"]
    except Exception:  # noqa: BLE001  (the measurement the stage just wrote matters more than the page)
        log.warning("dashboard refresh failed; the next generation will try again", exc_info=True)
        return False
    now = time.time()
    stamp = {"ended": now, "seconds": round(now - t0, 3), "state": state}
    atomic_write_text(live / LIVE_STAMP, json.dumps(stamp))
    return True

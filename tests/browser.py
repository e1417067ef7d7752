"""Render a page in headless Chromium through the DevTools protocol: console errors, evaluated values and
a full-page screenshot. Used by the dashboard tests; skips cleanly where Chromium is absent."""

from __future__ import annotations

import base64
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from oto.reporting import charts

CHROMIUM = os.environ.get("OTO_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
]


def available() -> bool:
    return Path(CHROMIUM).is_file() and shutil.which(CHROMIUM) is not None


@dataclass
class Rendered:
    errors: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    screenshot: bytes = b""


class _Session:
    def __init__(self, ws):
        self.ws, self.next_id, self.events = ws, 0, []

    def call(self, method: str, timeout: float = 30, **params) -> dict:
        self.next_id += 1
        my = self.next_id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)
        raise TimeoutError(method)

    def wait_for(self, method: str, timeout: float = 30) -> dict:
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == method:
                return msg
            self.events.append(msg)
        raise TimeoutError(method)

    def evaluate(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")


def _errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
        elif m == "Runtime.exceptionThrown":
            out.append("exception: " + p["exceptionDetails"].get("text", ""))
        elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
            out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
    return out


def render(page: Path, expressions: dict[str, str], width: int = 1440, height: int = 900) -> Rendered:
    """Open ``page`` (a file), evaluate each JavaScript expression, screenshot the whole page."""
    import websocket  # test dependency (websocket-client)

    with tempfile.TemporaryDirectory(prefix="oto-chromium-") as profile:
        proc = subprocess.Popen(
            [
                CHROMIUM,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: teardown stops the helpers too
        )
        try:
            lines: queue.Queue = queue.Queue()
            # Keep draining stderr (dbus noise) so chromium never blocks on a full pipe.
            threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
            port = None
            end = time.monotonic() + 60
            while port is None and time.monotonic() < end:
                try:
                    line = lines.get(timeout=1)
                except queue.Empty:
                    if proc.poll() is not None:
                        raise RuntimeError(f"chromium exited with {proc.returncode}") from None
                    continue
                if m := re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line):
                    port = int(m.group(1))
            if port is None:
                raise TimeoutError("chromium did not open its DevTools port")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                target = next(t for t in json.load(r) if t["type"] == "page")
            ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
            try:
                s = _Session(ws)
                for domain in ("Page", "Runtime", "Log"):
                    s.call(f"{domain}.enable")
                s.call("Page.navigate", url=page.resolve().as_uri())
                s.wait_for("Page.loadEventFired", timeout=60)
                # Images decode asynchronously: wait until every one is complete.
                s.evaluate(
                    "Promise.all([...document.images].map(i => i.complete ? 0 : "
                    "new Promise(r => { i.onload = i.onerror = r; })))"
                )
                out = Rendered(values={k: s.evaluate(v) for k, v in expressions.items()})
                metrics = s.call("Page.getLayoutMetrics")
                size = metrics.get("cssContentSize") or metrics["contentSize"]
                shot = s.call(
                    "Page.captureScreenshot",
                    format="png",
                    captureBeyondViewport=True,
                    clip={"x": 0, "y": 0, "width": width, "height": size["height"], "scale": 1},
                )
                out.screenshot = base64.b64decode(shot["data"])
                time.sleep(0.2)
                ws.settimeout(0.5)
                try:  # drain late console events
                    while True:
                        s.events.append(json.loads(ws.recv()))
                except websocket.WebSocketTimeoutException:
                    pass
                out.errors = _errors(s.events)
                return out
            finally:
                ws.close()
        finally:
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen) -> None:
    """Stop chromium and every helper it forked (crashpad, zygote, renderers), and wait until all are
    gone: a helper still writing into the profile would make removing the profile folder fail."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        end = time.monotonic() + grace
        while time.monotonic() < end:
            proc.poll()  # reap the leader so the group can empty
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
    proc.wait()


SHOTS = os.environ.get("OTO_SCREENSHOTS")  # keep the screenshots in this folder (to look at them)

# Every element that sticks out of the window or out of its parent's box, or clips its own content: what a
# reader sees as cut off or spilling over. A table wrapper scrolls by design (its hint is checked apart), so
# what is inside one is not checked here; nor the inside of a chart.
MISFITS = """(() => {
  const W = document.documentElement.clientWidth, out = [];
  const name = e => e.tagName.toLowerCase()
    + (e.className && typeof e.className === 'string' ? '.' + e.className.trim().split(/\\s+/).join('.') : '')
    + ' "' + (e.textContent || '').trim().slice(0, 40) + '"';
  for (const e of document.body.querySelectorAll('*')) {
    if (['SCRIPT', 'STYLE', 'BR', 'WBR'].includes(e.tagName)) continue;
    if (e.closest('svg') || (e.parentElement && e.parentElement.closest('.table-wrap'))) continue;
    const r = e.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > W + 1 || r.left < -1) { out.push(name(e) + ' outside the window'); continue; }
    const p = e.parentElement;
    if (p && p !== document.body) {
      const q = p.getBoundingClientRect();
      if (r.right > q.right + 1 || r.bottom > q.bottom + 1 || r.left < q.left - 1 || r.top < q.top - 1)
        out.push(name(e) + ' sticks out of ' + name(p));
    }
    const cs = getComputedStyle(e);
    if (['hidden', 'clip'].includes(cs.overflowX) && e.scrollWidth > e.clientWidth + 1)
      out.push(name(e) + ' clips');
  }
  return out;
})()"""

SCROLL_HINTS = """[...document.querySelectorAll('.table-wrap')].map(w => {
  const h = w.querySelector('caption.scroll-hint .hint'), q = w.getBoundingClientRect();
  const r = h ? h.getBoundingClientRect() : null;
  const shown = !!r && r.width > 20 && r.height > 0 && r.left >= q.left && r.right <= q.right
    && getComputedStyle(h).visibility !== 'hidden';
  return [(w.querySelector('table') || {dataset: {}}).dataset.test, w.scrollWidth > w.clientWidth + 1, shown];
})"""

PAGE_VALUES = {
    "images": "[...document.images].map(i => ({src: i.getAttribute('src'), w: i.naturalWidth, "
    "h: i.naturalHeight}))",
    "inline_svgs": "document.querySelectorAll('div.chart svg').length",
    "state": "(document.querySelector('[data-test=state]') || {dataset: {}}).dataset.state",
    "numbers": "(document.querySelector('[data-test=provenance]') || {dataset: {}}).dataset.numbers",
    "rows": "Object.fromEntries([...document.querySelectorAll('table[data-test=libraries] tr[data-library]')]"
    ".map(tr => [tr.dataset.library, Object.fromEntries([...tr.querySelectorAll('[data-key]')]"
    ".map(td => [td.dataset.key, td.textContent.replace(/\\s+/g, ' ').trim()]))]))",
    "kpis": "Object.fromEntries([...document.querySelectorAll('[data-test=kpis] [data-key]')]"
    ".map(e => [e.dataset.key, e.textContent.replace(/\\s+/g, ' ').trim()]))",
    "waiting": "!!document.querySelector('[data-test=waiting]')",
    "font": "getComputedStyle(document.body).fontFamily",
    "overflow": "document.documentElement.scrollWidth > window.innerWidth + 1",
    "tables_overflow": "[...document.querySelectorAll('.table-wrap')]"
    ".some(e => e.scrollWidth > e.clientWidth + 1)",
    # per table card: its table, whether it scrolls sideways, and whether its hint shows, whole, in the card
    "scrolling_tables": SCROLL_HINTS,
    "misfits": MISFITS,
    "shown": "Object.fromEntries([...document.images].map(i => [i.getAttribute('src'), i.clientWidth]))",
    "inline": "[...document.querySelectorAll('div.chart[data-test] svg')]"
    ".map(s => [s.parentElement.dataset.test, s.getBoundingClientRect().width, s.outerHTML])",
}
WIDTH = 1400  # the window the charts and figures are checked in: a laptop screen
WIDTHS = (800, 1000, WIDTH)  # the windows the layout is checked in: half a laptop screen, a small one, one


def _shown(res: Path, lib: str) -> dict | None:
    """What a library row must show: its final.yaml, else its latest selection.yaml."""
    final = res / lib / "final.yaml"
    if final.is_file():
        return yaml.safe_load(final.read_text())
    sels = sorted(res.glob(f"{lib}/gen*/selection.yaml"), key=lambda p: int(p.parent.name[3:]))
    return yaml.safe_load(sels[-1].read_text()) if sels else None


def check_layout(page: Path, name: str, width: int) -> dict:
    """The page at ``width`` px: no console error, nothing cut off or spilling over, and a table that
    scrolls inside its card says so. Returns the page's values (PAGE_VALUES)."""
    out = render(page, PAGE_VALUES, width=width)
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        (Path(SHOTS) / f"{name}_{width}.png").write_bytes(out.screenshot)
    assert out.screenshot[:8] == b"\x89PNG\r\n\x1a\n" and len(out.screenshot) > 10_000
    assert out.errors == [], out.errors
    v = out.values
    assert "Plex" in v["font"] and "sans-serif" in v["font"], v["font"]  # the CSS was applied
    assert not v["overflow"], f"the page scrolls sideways at {width} px"
    assert v["misfits"] == [], f"at {width} px: {v['misfits'][:5]}"
    silent = [table for table, scrolls, hinted in v["scrolling_tables"] if scrolls and not hinted]
    assert not silent, f"at {width} px, tables {silent} scroll sideways without saying so"
    false = [table for table, scrolls, hinted in v["scrolling_tables"] if hinted and not scrolls]
    assert not false, f"at {width} px, tables {false} fit their card but say they scroll"
    return v


def check_page(res: Path, page: Path, name: str) -> dict:
    for width in WIDTHS[:-1]:
        check_layout(page, name, width)
    v = check_layout(page, name, WIDTH)
    assert not v["tables_overflow"], f"a table does not fit its card at {WIDTH} px"
    for chart, shown, svg in v["inline"]:  # charts inside the page (acceptance.html)
        facts = check_chart(chart, svg, shown)
        assert shown >= facts.width * 4 / 3 - 1, f"{chart} squeezed to {shown:.0f} px"
    if v["state"] in ("waiting", None):  # the waiting page, or acceptance.html (no live state)
        return v
    srcs = {i["src"]: i for i in v["images"]}
    assert set(srcs) == {f"plots/{n}.svg" for n in charts.CHARTS}
    for img in v["images"]:
        assert img["w"] > 0 and img["h"] > 0, f"{img['src']} did not load"
        check_chart(img["src"], (page.parent / img["src"]).read_text(), v["shown"][img["src"]])
    for lib, row in v["rows"].items():
        doc = _shown(res, lib)
        if doc is None:
            assert row["geomean_score"] == "—" and row["generations"].startswith("0")
            continue
        g = doc["summary"]["geomean_score"]
        assert row["geomean_score"] == f"{g:.3f}×", lib
        c = Counter(r["verdict"] for r in doc["per_size"])
        assert row["wtl"] == f"{c['win']} / {c['tie']} / {c['loss']}", lib
        gens = len(list(res.glob(f"{lib}/gen*/selection.yaml")))
        assert row["generations"].split(" / ")[0] == str(gens), lib
    finals = list(res.glob("*/final.yaml"))
    assert v["kpis"]["libraries_finished"].split(" / ")[0] == str(len(finals))
    assert v["kpis"]["generations_done"].split(" / ")[0] == str(len(list(res.glob("*/gen*/selection.yaml"))))
    docs = [yaml.safe_load(p.read_text()) for p in res.glob("*/gen*/selection.yaml")]
    assert v["numbers"] == ",".join(sorted({d["provenance"]["numbers"] for d in docs}))
    return v


# -- the charts themselves (matplotlib SVG: text stays text, groups carry ids)
SVG = "{http://www.w3.org/2000/svg}"
MIN_CHART_PX = 11  # the smallest chart text a page may show at 1400 px


@dataclass
class ChartFacts:
    width: float  # the SVG's own width (viewBox units = pt)
    font_sizes: list[float]  # font sizes of every text, in viewBox units
    legend: list[tuple[str, str]]  # (colour, label) per legend entry
    yticks: list[list[str]]  # per axes, its y tick labels


def chart_facts(svg: str) -> ChartFacts:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(svg)
    width = float(root.get("viewBox").split()[2])
    fonts = [float(m) for m in re.findall(r"font-size: ([\d.]+)px", svg)]
    legend: list[tuple[str, str]] = []
    yticks: list[list[str]] = []
    for g in root.iter(f"{SVG}g"):
        gid = g.get("id", "")
        if gid.startswith("legend"):
            colour = None
            for entry in g:
                eid = entry.get("id", "")
                style = " ".join(p.get("style") or "" for p in entry.iter(f"{SVG}path"))
                if eid.startswith(("patch", "line2d")):
                    key = "fill" if eid.startswith("patch") else "stroke"
                    m = re.search(rf"{key}: (#[0-9a-fA-F]{{6}})", style)
                    colour = m.group(1).lower() if m else colour
                elif eid.startswith("text") and colour:
                    legend.append((colour, "".join(entry.itertext()).strip()))
                    colour = None
        elif re.fullmatch(r"axes_\d+", gid):
            for axis in g:
                ticks = [t for t in axis if t.get("id", "").startswith("ytick")]
                if ticks:
                    labels = ["".join(x.itertext()).strip() for t in ticks for x in t.iter(f"{SVG}text")]
                    yticks.append([x for x in labels if x])
    return ChartFacts(width, fonts, legend, yticks)


def _number(label: str) -> bool:
    try:
        float(label.replace("×", "").replace("%", "").replace(",", "").replace("−", "-"))
    except ValueError:
        return False
    return True


def check_chart(name: str, svg: str, shown_px: float) -> ChartFacts:
    """A chart as a page shows it ``shown_px`` wide: readable text, one colour per legend entry, and numeric
    axes with at least three labels."""
    f = chart_facts(svg)
    scale = shown_px / f.width  # px per SVG unit on the page
    smallest = min(f.font_sizes) * scale
    assert smallest >= MIN_CHART_PX, f"{name}: smallest text {smallest:.1f} px at 1400 px (< {MIN_CHART_PX})"
    colours = [c for c, _ in f.legend]
    assert len(set(colours)) == len(colours), f"{name}: legend entries share a colour: {f.legend}"
    for labels in f.yticks:
        if any(_number(x) for x in labels):
            assert len(labels) >= 3, f"{name}: a value axis with only {labels}"
    return f

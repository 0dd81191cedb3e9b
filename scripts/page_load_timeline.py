"""Where a new page load's time goes, page by page: browser marks, tasks, resources and the server's run.

    flock <the team's bench lock> python scripts/page_load_timeline.py [--pages explore,compare] [--loads 2]
        [--steps 25000] [--json FILE] [--chromium-flag FLAG ...]

Ingests two ``kelly_trap_run8`` runs (as ``bench ui`` does), serves the app with its
script wrapped so that each session's script run logs its start and end (wall time),
and opens each page ``--loads`` times as a new page load after one that is dropped,
in headless chromium at the benchmark's viewport. For each load it prints, in
milliseconds after the navigation started (the page's own clock): when streamlit's
main bundle has run (the app shell), when the websocket opened, the server's script
run, when the largest websocket messages arrived, when the Plotly chunk was
requested and loaded, the main thread's long tasks (the Plotly chunk's evaluation
and the first ``newPlot`` are the two largest on a chart page), and when the first
subplot (or table) was in the DOM and painted. ``--chromium-flag`` adds a flag to
the browser (e.g. ``--disable-features=BackgroundResourceFetch``, see
docs/BENCHMARKS.md). A diagnostic, not the benchmark: ``python -m regime_dash bench ui``
is.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from regime_dash.benchmarks import page_load  # noqa: E402
from regime_dash.benchmarks.ui import FIRST_VIEW  # noqa: E402

#: Stamps, in the page's clock: websocket messages (arrival, size), long tasks and the first
#: chart / table in the DOM (and two animation frames later: painted).
INIT_JS = r"""(() => {
  const T = window.__timeline = {ws: [], marks: {}, long: []};
  const mark = (k) => { if (!(k in T.marks)) T.marks[k] = performance.now(); };
  const Native = window.WebSocket;
  function Stamped(...args) {
    const ws = new Native(...args);
    ws.addEventListener('open', () => mark('ws_open'));
    ws.addEventListener('message', (e) => T.ws.push([performance.now(), e.data.byteLength ?? e.data.size ?? e.data.length]));
    return ws;
  }
  Stamped.prototype = Native.prototype;
  for (const k of ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED']) Stamped[k] = Native[k];
  window.WebSocket = Stamped;
  new PerformanceObserver(l => { for (const e of l.getEntries()) T.long.push([e.startTime, e.duration]); })
    .observe({type: 'longtask', buffered: true});
  const sels = {shell: '[data-testid=stMain]', title: 'h1', subplot: '.js-plotly-plot .cartesianlayer .subplot',
                table: '[data-testid=stDataFrame] canvas'};
  const seen = new MutationObserver(() => {
    for (const [k, s] of Object.entries(sels)) if (!(k in T.marks) && document.querySelector(s)) {
      mark(k);
      if (k === 'subplot' || k === 'table') requestAnimationFrame(() => requestAnimationFrame(() => mark(k + '_painted')));
    }
  });
  document.addEventListener('DOMContentLoaded', () => seen.observe(document.body, {subtree: true, childList: true}));
})();"""

COLLECT_JS = """() => {
  const T = window.__timeline;
  const res = performance.getEntriesByType('resource').filter(e => /\\.js(\\?|$)/.test(e.name))
     .map(e => [e.name.split('/').pop(), Math.round(e.startTime), Math.round(e.responseEnd), e.encodedBodySize]);
  return {origin: performance.timeOrigin, marks: T.marks, ws: T.ws, long: T.long, res};
}"""

#: The app, its script run stamped in wall time (``TIMELINE_LOG``) for each session.
WRAPPER = '''import json, os, time
from streamlit.runtime.scriptrunner import get_script_run_ctx
_ctx = get_script_run_ctx()
def _log(ev):
    with open(os.environ["TIMELINE_LOG"], "a") as f:
        f.write(json.dumps({"t": time.time(), "ev": ev, "sid": _ctx.session_id if _ctx else None}) + "\\n")
_log("start")
_app = os.path.join(os.environ["TIMELINE_ROOT"], "app.py")
try:
    exec(compile(open(_app).read(), _app, "exec"), {"__name__": "__main__"})
finally:
    _log("end")
'''


@contextlib.contextmanager
def serve_stamped(store: str, tmp: Path):
    """``streamlit run`` of the wrapped app against ``store``; yields ``(base_url, log_path)``."""
    app, log = tmp / "stamped_app.py", tmp / "script_runs.jsonl"
    app.write_text(WRAPPER)
    log.touch()
    env = dict(TIMELINE_LOG=str(log), TIMELINE_ROOT=str(ROOT),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    with page_load.serve(store, app=app, env=env) as base:
        yield base, log


def one_load(ctx, url: str, selector: str, log: Path) -> dict:
    """One new page load of ``url`` until ``selector`` is painted; its timeline."""
    page = ctx.new_page()
    page.add_init_script(INIT_JS)
    try:
        seen = len(log.read_text().splitlines())
        t0 = time.time()
        page.goto(url)
        page.locator(selector).first.wait_for()
        page.evaluate(page_load.PAINTED_JS)
        t1 = time.time()
        time.sleep(0.3)  # late messages and tasks
        d = page.evaluate(COLLECT_JS)
        runs = [json.loads(line) for line in log.read_text().splitlines()[seen:]]
        d["server"] = [(r["ev"], round(r["t"] * 1000 - d["origin"])) for r in runs]
        d["total_ms"] = round((t1 - t0) * 1000)
        return d
    finally:
        page.close()


def describe(name: str, d: dict) -> str:
    """A few lines of text for one load."""
    marks = {k: round(v) for k, v in d["marks"].items()}
    biggest = sorted(d["ws"], key=lambda w: -w[1])[:3]
    plotly = [r for r in d["res"] if r[0].startswith("PlotlyChart")]
    return "\n".join([
        f"== {name}: {d['total_ms']} ms from goto to painted (as bench ui counts)",
        f"   marks {marks}",
        f"   server script run {d['server']}",
        f"   websocket: {len(d['ws'])} messages, the largest at {[(round(t), n) for t, n in biggest]}",
        f"   plotly chunk (name, requested, loaded, bytes) {plotly}",
        f"   long tasks (start, ms) {[(round(s), round(x)) for s, x in d['long']]}"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", default="runs,explore,replay,controllers,compare")
    ap.add_argument("--loads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=25_000)
    ap.add_argument("--chromium-flag", action="append", default=[])
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    pages = args.pages.split(",")
    unknown = [p for p in pages if p not in FIRST_VIEW]
    if unknown:
        ap.error(f"unknown page(s) {unknown}; choose from {list(FIRST_VIEW)}")
    page_load.CHROMIUM_ARGS.extend(args.chromium_flag)
    out: dict[str, list[dict]] = {}
    print(f"load average {os.getloadavg()}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="regime-dash-timeline-") as tmp:
        store = str(Path(tmp) / "store")
        first = page_load.make_run(store, args.steps, 64)
        page_load.make_run(store, args.steps, 64, seed=1)
        with serve_stamped(store, Path(tmp)) as (base, log), page_load.chromium(viewport=(1600, 1200)) as ctx:
            for name in pages:
                url = f"{base}/{'' if name == 'runs' else name}" + (
                    f"?runs={first['run_id']}" if name == "explore" else "")
                selector = FIRST_VIEW[name][1]
                one_load(ctx, url, selector, log)  # the first load of each page is dropped
                out[name] = [one_load(ctx, url, selector, log) for _ in range(args.loads)]
                for d in out[name]:
                    print(describe(name, d), flush=True)
    print(f"load average {os.getloadavg()}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

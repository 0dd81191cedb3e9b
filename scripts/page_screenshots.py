"""One screenshot of every page of the dashboard at 1280 × 800, to look for cut or overlapping labels.

    python scripts/page_screenshots.py OUT_DIR [--width 1280] [--height 800] [--pages runs,explore]

Makes a temporary store holding the sample run (``data/samples/diag.jsonl``) and a copy of it
logged with another ``max_duration`` (Compare needs two runs), serves the app with
``streamlit run app.py`` on a free port of 127.0.0.1 against that store, opens each page in
headless chromium at the window size given, waits for it to settle and saves the whole page as
``OUT_DIR/<page>.png``; Replay's Sweep and Sensitivity tabs are run and saved as
``replay-sweep.png`` and ``replay-sensitivity.png``. Explore opens with one custom panel below
the spec panels. The server is stopped and the store removed after. ``OUT_DIR`` must lie outside
the checkout: screenshots are not part of it.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from regime_dash.benchmarks import page_load  # noqa: E402
from regime_dash.diag import catalogue as diag  # noqa: E402
from regime_dash.diag.panel_set import Panel, PanelSet, encode  # noqa: E402
from regime_dash.sources.samples import SAMPLE_DIR  # noqa: E402
from regime_dash.store.open import open_store  # noqa: E402
from regime_dash.ui.navigation import PAGES  # noqa: E402

#: Milliseconds a page is given to settle after its last element appeared (charts, fragments).
SETTLE_MS = 2500


def make_store(root: Path) -> None:
    """The sample run and a copy of it logged with max_duration 300."""
    store = open_store(root)
    text = (SAMPLE_DIR / "diag.jsonl").read_bytes()
    store.ingest(text, name="sample", source_name="data/samples/diag.jsonl")
    store.ingest(text.replace(b'"max_duration":1000.0', b'"max_duration":300.0'), name="sample-md300")


def settle(page) -> None:
    """Wait until streamlit has stopped running the script and the page has painted."""
    page.wait_for_selector("[data-testid=stMain]")
    page.wait_for_timeout(500)
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=180_000)
    page.wait_for_timeout(SETTLE_MS)


#: The height of what the app scrolls in its own container (a screenshot of the window shows
#: only what is in view: streamlit's main block scrolls, not the document).
CONTENT_HEIGHT_JS = """() => Math.max(...[...document.querySelectorAll('[data-testid=stMain], section, div')]
    .filter(e => e.scrollHeight > e.clientHeight + 4 && getComputedStyle(e).overflowY !== 'visible')
    .map(e => e.scrollHeight), document.documentElement.scrollHeight)"""


def shoot(page, out: Path, name: str) -> Path:
    """Save the whole page: the window made as tall as what it scrolls, at the same width (the
    width is what wraps or cuts a label), then set back."""
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": int(page.evaluate(CONTENT_HEIGHT_JS)) + 40})
    page.wait_for_timeout(SETTLE_MS)
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(size)
    print(path)
    return path


def run_tab(page, out: Path, tab: str, button: str, name: str) -> None:
    """Open Replay's tab ``tab``, press its button named ``button`` (start of its label), save it."""
    page.get_by_role("tab", name=tab).click()
    settle(page)
    page.get_by_role("button", name=button).first.click()
    settle(page)
    shoot(page, out, name)


def screenshots(out: Path, size: tuple[int, int], names: list[str]) -> None:
    custom = encode(PanelSet((Panel(diag.KELLY),)))
    with tempfile.TemporaryDirectory(prefix="regime-dash-shots-") as tmp:
        make_store(Path(tmp) / "store")
        with page_load.serve(Path(tmp) / "store", Path(tmp) / "server.log",
                             env={"STREAMLIT_SERVER_ADDRESS": "127.0.0.1"}) as base, \
                page_load.chromium(viewport=size) as ctx:
            page = ctx.new_page()
            for name in names:
                query = f"?panels={custom}" if name == "explore" else ""
                path = "" if name == Path(PAGES[0][0]).stem else name  # the default page is the app's root
                page.goto(f"{base}/{path}{query}")
                settle(page)
                shoot(page, out, name)
                if name == "replay":
                    run_tab(page, out, "Sweep", "Run sweep", "replay-sweep")
                    run_tab(page, out, "Sensitivity", "Run sensitivity", "replay-sensitivity")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for the PNGs (outside the checkout)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    parser.add_argument("--pages", default=",".join(Path(f).stem for f, _, _ in PAGES),
                        help="comma-separated page names (default: every page)")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if out == ROOT or ROOT in out.parents:
        parser.error(f"{args.out} is inside the checkout: give a folder outside it")
    known = [Path(f).stem for f, _, _ in PAGES]
    names = [n.strip() for n in args.pages.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"no page named {', '.join(unknown)}: pages are {', '.join(known)}")
    out.mkdir(parents=True, exist_ok=True)
    screenshots(out, (args.width, args.height), names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

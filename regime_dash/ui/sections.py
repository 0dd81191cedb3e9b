"""Whole page sections: panels and tabs built from several widgets and one core call each.

The Runs page's ingest panels, Explore's tables and invariant report, the
Replay input and headline metrics, the Live controls and the Sweep tab.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import pandas as pd
import streamlit as st

from regime_dash.core.config import RegimeConfig
from regime_dash.errors import RegimeDashError
from regime_dash.text import markdown_literal
from regime_dash.ui.errors import ErrorNote, show_error
from regime_dash.ui.stores import REPORTS_KEY, ingest_reports
from regime_dash.ui.widgets import download_view, jump_to_step, numeric_fields, plotly_chart, slider_domain


def ingest_report_panel() -> None:
    """One expander per ingest of this session: rows, rejected lines, columns and step range."""
    for upload_id, (name, result) in reversed(list(ingest_reports().items())):
        if isinstance(result, (Exception, ErrorNote)):
            show_error(result, context=f"{markdown_literal(name)}: not ingested. ")
            continue
        rejected = list(getattr(result, "rejected", []) or [])
        dup = getattr(result, "duplicate_of", None)
        head = (f"{markdown_literal(name)}: {result.rows:,} rows, {len(rejected):,} rejected, "
                f"{len(result.columns):,} columns, steps {result.first_step}…{result.last_step}")
        if dup:  # said outside the expander: a copy under a new name is an alias, not a silent drop
            st.info(f"{markdown_literal(name)}: {markdown_literal(result.duplicate_text())}.")
        with st.expander(head + (" (same content as a stored run)" if dup else ""), expanded=bool(rejected)):
            if rejected:
                st.markdown(f"**Rejected lines** ({len(rejected):,})")
                st.dataframe(pd.DataFrame([dict(r) if isinstance(r, Mapping) else vars(r) for r in rejected]),
                             hide_index=True, key=f"{REPORTS_KEY}.{upload_id}.rejects")
            st.markdown("**Columns**: " + ", ".join(markdown_literal(c) for c in result.columns))


def rejected_lines_panel(key: str, store, runs: pd.DataFrame) -> None:
    """The rejected lines (line number, reason, text) of any stored run, read from the store.

    The store keeps each run's rejects beside its Parquet parts, so they show in
    any later session, not only in the one that uploaded the file.
    """
    if "rejected" not in runs.columns:
        return
    counts = pd.to_numeric(runs["rejected"], errors="coerce").fillna(0).astype(int)
    with_rejects = runs[counts > 0]
    with st.expander(f"Rejected lines ({int(counts.sum()):,} in {len(with_rejects)} run(s))"):
        if with_rejects.empty:
            st.caption("No stored run has rejected lines.")
            return
        names = dict(zip(with_rejects["run_id"], with_rejects["name"]))
        n = dict(zip(runs["run_id"], counts))
        rid = st.selectbox("Run", list(with_rejects["run_id"]), key=f"{key}.run",
                           format_func=lambda r: f"{names[r]} · {r[-6:]} ({n[r]:,} rejected)")
        rows = store.rejects(rid)
        table = pd.DataFrame([{"line": r.get("line"), "reason": r.get("reason"), "text": r.get("raw")}
                              for r in rows])
        st.dataframe(table, hide_index=True, key=f"{key}.table",
                     column_config={"line": st.column_config.NumberColumn("line", format="%d")})


def _arm_delete(key: str, rid: str) -> None:
    """The confirmation tick names the run it was given for (an untick disarms it)."""
    st.session_state[f"{key}.confirmed"] = rid if st.session_state.get(f"{key}.sure") else None


def delete_run_control(key: str, store, runs: pd.DataFrame) -> None:
    """Pick a run and delete it after a confirmation tick (then the page reruns).

    The tick belongs to the run it was given for: when the selection moves under it
    (the run was deleted in another tab or by ``rm``, and the list fell back to another
    run), the tick is cleared and nothing is deleted.
    """
    with st.expander("Delete a run"):
        names = dict(zip(runs["run_id"], runs["name"]))
        rid = st.selectbox("Run", list(runs["run_id"]), format_func=lambda r: f"{names[r]} · {r[-6:]}",
                           key=f"{key}.run")
        confirmed = st.session_state.get(f"{key}.confirmed")
        if confirmed is not None and confirmed != rid:
            st.warning(f"The tick was for {markdown_literal(confirmed)}, which is no longer selected (deleted "
                       f"in another tab or by `rm`, or another run picked); nothing was deleted. Tick again to "
                       f"delete {markdown_literal(names[rid])} ({markdown_literal(rid)}).")
            st.session_state[f"{key}.sure"] = False
            st.session_state[f"{key}.confirmed"] = confirmed = None
        name, ident = markdown_literal(names[rid]), markdown_literal(rid)  # widget labels are Markdown
        sure = st.checkbox(f"Yes, delete {name} ({ident}) from the store", key=f"{key}.sure",
                           on_change=_arm_delete, args=(key, rid))
        if st.button(f"Delete {name}", disabled=not sure, key=f"{key}.go") and sure and confirmed == rid:
            from regime_dash.errors import StoreError

            st.session_state[f"{key}.confirmed"] = None
            try:
                store.delete(rid)
            except StoreError as exc:  # gone between the list and the click: say so, delete nothing else
                st.warning(f"{ident} was not deleted: {markdown_literal(exc)}")
                return
            st.toast(f"deleted {name} ({ident})")
            if store.keeps_removed_runs:  # a Delta store: the run can come back (restore_offer)
                st.session_state[f"{key}.undo"] = (rid, names[rid])
            st.rerun()


def restore_offer(key: str, store) -> None:
    """After a delete on a store that keeps removed runs (a Delta store), a button that brings the run back."""
    undo = st.session_state.get(f"{key}.undo")
    if not undo:
        return
    rid, name = undo
    label = f"{markdown_literal(name)} ({markdown_literal(rid)})"
    left, right = st.columns([4, 1])
    left.info(f"Deleted {label}. It can be restored until the store's retention window passes "
              f"(`regime-dash restore {rid}` does the same).")
    if right.button("Restore", key=f"{key}.restore", icon=":material/undo:"):
        from regime_dash.errors import StoreError

        st.session_state[f"{key}.undo"] = None
        try:
            store.restore(rid)
        except StoreError as exc:  # restored elsewhere meanwhile, or past the window
            st.warning(f"{label} was not restored: {markdown_literal(exc)}")
            return
        st.toast(f"restored {label}")
        st.rerun()


# ---- Explore -------------------------------------------------------------------------
def _tables(key: str, results: Mapping[str, Any], part: str) -> None:
    for label, res in results.items():
        tables = getattr(res, part)
        st.markdown(f"**{markdown_literal(label)}**")
        shown = False
        for name, table in tables.items():
            st.caption(f"{name.replace('_', ' ')}: {len(table)}")
            if len(table):
                st.dataframe(table, hide_index=True, key=f"{key}.{label}.{name}",
                             height=min(35 * (len(table) + 1) + 3, 300))
            shown = True
        if not shown:
            st.caption("none")
        for name, why in res.skipped.items():
            if (part == "episodes") == (name == "dead_zone"):
                st.caption(f"{name}: not found — {markdown_literal(why)}")


def episode_tables(key: str, results: Mapping[str, Any]) -> None:
    """Dead-zone episodes of each run (``results``: :class:`regime_dash.analysis.Report` by label)."""
    _tables(key, results, "episodes")


def event_tables(key: str, results: Mapping[str, Any]) -> None:
    """Tail events, timeouts, floor spans, transitions and boundaries of each run."""
    _tables(key, results, "events")


STATUS_ICON = {"pass": ":material/check_circle:", "fail": ":material/cancel:", "warn": ":material/warning:",
               "skip": ":material/block:"}


def invariant_report(key: str, results: Mapping[str, Any], window: str,
                     frames: Mapping[str, pd.DataFrame]) -> None:
    """The invariant checks of each run; each violation's step is a button that moves the window there."""
    for label, res in results.items():
        checks = res.checks
        counts = {s: sum(c.status == s for c in checks) for s in STATUS_ICON}
        st.markdown(f"**{markdown_literal(label)}** — {counts['pass']} pass, {counts['fail']} fail, {counts['warn']} warn, "
                    f"{counts['skip']} skip")
        st.dataframe(pd.DataFrame([{"check": c.id, "status": c.status,
                                    "violations": c.violations, "first step": c.first_step,
                                    "detail": c.detail} for c in checks]),
                     hide_index=True, key=f"{key}.{label}.table")
        f = frames[label]
        lo, hi = int(f["step"].min()), int(f["step"].max())
        for c in checks:
            if c.status != "fail":
                continue
            st.markdown(f"{STATUS_ICON['fail']} `{c.id}`: {c.violations} violation(s) — jump to step:")
            cols = st.columns(min(len(c.steps), 8) or 1)
            for i, s in enumerate(c.steps[:8]):
                cols[i].button(f"step {s}", key=f"{key}.{label}.{c.id}.{s}", on_click=jump_to_step,
                               args=(window, s, lo, hi))


# ---- Replay ---------------------------------------------------------------------------
SOURCES = ("Scenario", "Stream file", "Simulator")


def stream_source(key: str, kind: str | None = None, in_url: bool = False) -> tuple[str | None, Any]:
    """Choose the replay input: a scenario preset, an uploaded stream file, or a simulator run.

    Returns ``(source_key, stream)``: a Stream, or for a file its light form
    (:class:`regime_dash.engine.file_phase1.LightFile`; :func:`cache.full_stream` gives the whole
    stream); ``source_key`` names the stream for caches,
    and both are ``None`` until a file is uploaded. ``kind`` (one of
    :data:`SOURCES`) skips the source radio. With ``in_url`` the choice is
    kept across pages and in the URL (``src``, ``scenario``, ``seed``, ...; a file
    cannot travel in a URL, so it is named there only as the source kind).
    """
    import hashlib

    from regime_dash.sources import scenarios
    from regime_dash.sources import simulator
    from regime_dash.ui import cache, state

    def seed_(name: str, param: str, kind_: str, default: Any, **kw) -> dict[str, Any]:
        if not in_url:
            return {"value": default}
        state.restore(f"{key}.{name}", param, kind_, default, **kw)
        return {}

    def in_range(lo: int, hi: int):
        return lambda v: lo <= v <= hi

    if kind is None:
        seed_("kind", "src", "str", SOURCES[0], options=SOURCES)
        kind = st.radio("Source", SOURCES, horizontal=True, key=f"{key}.kind")
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    if kind == "Scenario":
        names = [n for n in scenarios.SCENARIOS if n != "recorded" or scenarios.SAMPLE_STREAM.exists()]
        first = names.index("kelly_trap_run8") if "kelly_trap_run8" in names else 0
        seed_("scenario", "scenario", "str", names[first], options=names)
        name = c1.selectbox("Scenario", names, key=f"{key}.scenario", **({} if in_url else {"index": first}))
        seed = int(c2.number_input("Seed", 0, 2 ** 31 - 1, key=f"{key}.seed",
                                   **seed_("seed", "seed", "int", 0, valid=in_range(0, 2 ** 31 - 1))))
        steps = int(c3.number_input("Steps (0 = preset)", 0, 1_000_000, step=500, key=f"{key}.steps",
                                    **seed_("steps", "steps", "int", 0, valid=in_range(0, 1_000_000))))
        accounts = int(c4.number_input("Accounts (0 = preset)", 0, 8192, step=64, key=f"{key}.accounts",
                                       **seed_("accounts", "accounts", "int", 0, valid=in_range(0, 8192))))
        st.caption(scenarios.describe(name))
        stream = cache.scenario_stream(name, seed, steps or None, accounts or None)
        return f"scenario:{name}:{seed}:{stream.steps}:{stream.accounts}", stream
    if kind == "Stream file":
        up = c1.file_uploader("Stream file (.npz or .parquet, as Stream.save writes)",
                              type=["npz", "parquet"], key=f"{key}.file")
        if up is None:
            st.info("Upload a stream file to replay it.")
            return None, None
        data = up.getvalue()
        digest = hashlib.sha256(data).hexdigest()
        suffix = ".npz" if up.name.endswith(".npz") else ".parquet"
        try:
            return f"file:{digest}", cache.uploaded_stream(digest, data, suffix)
        except RegimeDashError as exc:  # a file the stream reader refuses (ragged, wrong shape, ...): said, not raised
            show_error(exc, context=f"{markdown_literal(up.name)}: not a stream file to replay. ")
            return None, None
    names = list(simulator.PRESETS)
    first = names.index("adverse_regime") if "adverse_regime" in names else 0
    seed_("preset", "preset", "str", names[first], options=names)
    preset = c1.selectbox("Simulator preset", names, key=f"{key}.preset", **({} if in_url else {"index": first}))
    seed = int(c2.number_input("Seed", 0, 2 ** 31 - 1, key=f"{key}.simseed",
                               **seed_("simseed", "seed", "int", 0, valid=in_range(0, 2 ** 31 - 1))))
    steps = int(c3.number_input("Steps", 100, 200_000, step=500, key=f"{key}.simsteps",
                                **seed_("simsteps", "steps", "int", simulator.PRESETS[preset].steps,
                                        valid=in_range(100, 200_000))))
    st.caption(simulator.PRESETS[preset].doc + " The live run uses the spec's default config; its "
               "recorded inputs are then replayed open loop under each config.")
    stream = cache.simulator_stream(preset, seed, steps, RegimeConfig().as_dict())
    return f"sim:{preset}:{seed}:{steps}", stream


def fast_engine_status(key: str) -> None:
    """The background compile of the fast engine, as a progress bar while it runs.

    Redraws itself every second while compiling (a fragment: nothing else on
    the page reruns) and reruns the page once the engine is ready, so ``auto``
    replays move to it.
    """
    from regime_dash.engine import warm

    compiling = warm.compile_state()["state"] == "compiling"
    if compiling:
        st.session_state[f"{key}.waited"] = True

    @st.fragment(run_every=1.0 if compiling else None)
    def badge() -> None:
        s = warm.compile_state()
        if s["state"] == "compiling":
            frac = min(s["elapsed_s"] / max(s["estimate_s"], 1e-9), 0.99)
            st.progress(frac, text=f"Compiling the fast engine in the background: {s['elapsed_s']:.0f} s of "
                                   f"about {s['estimate_s']:.0f} s. Replays run on the reference engine "
                                   "(exact, slower on long streams) until it is ready.")
        elif s["state"] == "failed":
            st.warning(f"The fast engine could not be compiled ({markdown_literal(s['error'])}); replays use the "
                       "reference engine.")
        elif s["state"] == "ready" and st.session_state.pop(f"{key}.waited", False):
            st.rerun()  # the whole page: auto replays now run on the fast engine

    badge()


#: Summary metrics shown as headline numbers on the Replay page.
HEADLINE = ("timeouts", "timeout_steps", "dead_zone_steps", "longest_dead_zone", "tail_events",
            "floor_active_steps", "kelly_zero_steps", "sigma_max")


def summary_metrics(key: str, what_if: Mapping[str, float], baseline: Mapping[str, float]) -> None:
    """Headline summary metrics of the what-if replay, with the change from the baseline."""
    cols = st.columns(4)
    for i, name in enumerate(HEADLINE):
        v, b = what_if[name], baseline[name]
        delta = v - b
        cols[i % 4].metric(name.replace("_", " "), f"{v:g}", f"{delta:+g}" if delta else None,
                           delta_color="off")


# ---- Live -----------------------------------------------------------------------------
LIVE_SOURCES = ("Simulator", "Scenario", "Stream file")


def live_source(key: str) -> dict[str, Any] | None:
    """What a live run plays: the closed-loop simulator, a scenario or a stream file.

    A scenario or a file is picked as on the Replay page (:func:`stream_source`);
    the simulator by preset, seed, accounts and schedule length. Returns
    ``{"kind", "key", "stream"}`` or ``{"kind", "key", "sim"}`` (``key`` names
    the source: a new key means a new run), or None until a file is uploaded.
    """
    from regime_dash.sources.simulator import PRESETS
    from regime_dash.ui import cache

    kind = st.radio("Source", LIVE_SOURCES, horizontal=True, key=f"{key}.kind")
    if kind != "Simulator":
        source_key, stream = stream_source(key, kind=kind)
        if stream is None:
            return None
        return {"kind": kind, "key": source_key, "stream": cache.full_stream(source_key, stream)}
    names = list(PRESETS)
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    preset = c1.selectbox("Market preset", names, key=f"{key}.sim.preset",
                          index=names.index("adverse_regime") if "adverse_regime" in names else 0)
    seed = int(c2.number_input("Seed", 0, 2 ** 31 - 1, 0, key=f"{key}.sim.seed"))
    accounts = int(c3.number_input("Accounts", 1, 4096, PRESETS[preset].accounts, key=f"{key}.sim.accounts"))
    horizon = int(c4.number_input("Schedule length", 100, 1_000_000, PRESETS[preset].steps, step=500,
                                  key=f"{key}.sim.horizon"))
    st.caption(PRESETS[preset].doc)
    return {"kind": kind, "key": f"sim:{preset}:{seed}:{accounts}:{horizon}",
            "sim": {"preset": preset, "seed": seed, "accounts": accounts, "horizon": horizon}}


#: Ticks a second while a live run plays (each one ``speed`` steps and one redraw): a little
#: above the ten redraws a second the chart is to reach, so a late tick does not drop it below.
LIVE_TICKS_PER_S = 12


def live_controls(key: str) -> dict[str, Any]:
    """Play/pause, step, reset, speed and the three injections.

    Returns ``{"playing", "step", "reset", "speed", "shock", "flat", "boundary"}``;
    ``playing`` persists in ``st.session_state[key + '.playing']``.
    """
    pk = f"{key}.playing"
    st.session_state.setdefault(pk, False)
    c = st.columns([1, 1, 1, 3])
    playing = st.session_state[pk]
    c[0].button("Pause" if playing else "Play", key=f"{key}.play",
                icon=":material/pause:" if playing else ":material/play_arrow:",
                # the label's action, not a toggle: a click delivered twice (a page run and a
                # fragment run racing) still pauses a Pause
                on_click=st.session_state.update, args=({pk: not playing},))
    step = c[1].button("Step", key=f"{key}.step", icon=":material/skip_next:")
    reset = c[2].button("Reset", key=f"{key}.reset", icon=":material/restart_alt:")
    speed = c[3].slider(f"Speed (steps per tick, {LIVE_TICKS_PER_S} ticks/s)", 1, 500, 20, key=f"{key}.speed")
    d = st.columns(3)
    shock = d[0].button("Inject tail shock", key=f"{key}.shock", icon=":material/bolt:")
    flat = d[1].button("Force every account flat", key=f"{key}.flat", icon=":material/block:")
    boundary = d[2].button("Cross a fold boundary", key=f"{key}.boundary", icon=":material/start:")
    return {"playing": st.session_state[pk], "step": step, "reset": reset, "speed": speed,
            "shock": shock, "flat": flat, "boundary": boundary}


# ---- Sweep ----------------------------------------------------------------------------
def sweep_range(name: str, base: RegimeConfig) -> tuple[float, float]:
    """The values field ``name`` can be swept over on top of ``base``: its slider range, within
    what RegimeConfig accepts next to ``base``'s other fields (ε_min up to ε_max and back)."""
    lo, hi, _ = slider_domain(name)
    if name == "eps_min":
        hi = min(hi, base.eps_max)
    elif name == "eps_max":
        lo = max(lo, base.eps_min)
    return lo, hi


def sweep_controls(key: str, base: RegimeConfig | None = None) -> dict[str, Any] | None:
    """One or two fields, each over ``[lo, hi]`` in ``n`` points, and a summary metric.

    The ``from``/``to`` bounds are :func:`sweep_range` of ``base`` (default: the
    spec's config). Returns the sweep's parameters once "Run sweep" has been
    pressed (they stay in ``st.session_state[key + '.params']`` until pressed
    again), else ``None``.
    """
    from regime_dash.engine.summary import METRICS

    base = base or RegimeConfig()
    names = numeric_fields()
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    f1 = c1.selectbox("Field 1", names, index=names.index("max_duration"), key=f"{key}.f1")
    lo1, hi1 = sweep_range(f1, base)
    a1 = c2.number_input("from", lo1, hi1, lo1 if f1 != "max_duration" else 100.0, key=f"{key}.lo1")
    b1 = c3.number_input("to", lo1, hi1, hi1 if f1 != "max_duration" else 3000.0, key=f"{key}.hi1")
    n1 = int(c4.number_input("points", 2, 64, 8, key=f"{key}.n1"))
    d1, d2, d3, d4 = st.columns([2, 1, 1, 1])
    f2 = d1.selectbox("Field 2 (optional)", ["—"] + [n for n in names if n != f1], key=f"{key}.f2")
    grid = {f1: _grid(f1, a1, b1, n1)}
    if f2 != "—":
        lo2, hi2 = sweep_range(f2, base)
        a2 = d2.number_input("from", lo2, hi2, lo2, key=f"{key}.lo2")
        b2 = d3.number_input("to", lo2, hi2, hi2, key=f"{key}.hi2")
        n2 = int(d4.number_input("points", 2, 64, 6, key=f"{key}.n2"))
        grid[f2] = _grid(f2, a2, b2, n2)
    metric = st.selectbox("Summary metric", METRICS, index=METRICS.index("timeout_steps"), key=f"{key}.metric")
    if st.button(f"Run sweep ({math.prod(len(v) for v in grid.values())} replays)", key=f"{key}.run",
                 type="primary"):
        st.session_state[f"{key}.params"] = {"grid": grid}
    params = st.session_state.get(f"{key}.params")
    return None if params is None else {**params, "metric": metric}


def _changed(config: RegimeConfig) -> dict[str, Any]:
    default = RegimeConfig().as_dict()
    return {k: v for k, v in config.as_dict().items() if default[k] != v}


def _grid(name: str, lo: float, hi: float, n: int) -> list[float]:
    """``n`` values from ``lo`` to ``hi``; whole-step fields are rounded to whole numbers."""
    import numpy as np

    values = np.linspace(min(lo, hi), max(lo, hi), n)
    if slider_domain(name)[2] >= 1.0:
        values = np.unique(np.round(values))
    return [float(v) for v in values]


def pick_sweep_row(key: str, event: Any, table: pd.DataFrame, swept: Sequence[str]) -> int | None:
    """The sweep row to open: the clicked heatmap cell or line point, else the row chosen below the chart.

    ``event`` is what ``st.plotly_chart(on_select="rerun")`` returned; ``swept``
    names the swept fields (the row picker's labels).
    """
    points = []
    try:
        points = event.selection.points if event is not None else []
    except AttributeError:
        points = []
    seen = f"{key}.clicked"
    for p in points:
        row = p.get("customdata")
        if isinstance(row, (list, tuple)):
            row = row[0] if row else None
        if not isinstance(row, (int, float)) or isinstance(row, bool) or not float(row).is_integer():
            continue  # a point that names no sweep row (not one of ours)
        # a chart keeps its selection across reruns: apply each click once, so the
        # row picker below still works after a click
        if int(row) >= 0 and st.session_state.get(seen) != int(row):
            st.session_state[seen] = int(row)
            st.session_state[f"{key}.row"] = int(row)
    labels = {i: ", ".join(f"{c}={table[c].iloc[i]:g}" for c in swept) for i in range(len(table))}
    st.session_state.setdefault(f"{key}.row", None)
    if st.session_state[f"{key}.row"] is not None and st.session_state[f"{key}.row"] >= len(table):
        st.session_state[f"{key}.row"] = None  # a smaller sweep replaced the one the row was from
    return st.selectbox("Open the replay of", list(range(len(table))), key=f"{key}.row",
                        format_func=lambda i: labels[i], placeholder="click a point or cell above, or pick one")


def sweep_panel(key: str, source_key: str, stream: Any, engine: str, base: RegimeConfig | None,
                layout=None) -> None:
    """The Sweep tab: controls, the heatmap or line of a summary metric, and the replay of a picked cell.

    The swept fields vary on top of ``base`` (the what-if config; the spec's
    defaults when it is ``None``); replays use ``layout`` (default registry if None).
    """
    from regime_dash.figures import signals as figures
    from regime_dash.errors import RegimeDashError
    from regime_dash.ui import cache

    base = base or RegimeConfig()
    st.caption("Fields vary on top of the what-if config"
               + (f" ({', '.join(f'{k}={v}' for k, v in _changed(base).items())})." if _changed(base) else
                  " (the spec's defaults)."))
    params = sweep_controls(key, base)
    if params is None:
        st.caption("Pick one or two fields and press Run sweep.")
        return
    fp = layout.fingerprint_hex() if layout is not None else ""
    try:
        result = cache.sweep(source_key, stream, params["grid"], engine, base.as_dict(), fp, layout)
    except RegimeDashError as exc:
        st.error(f"Sweep rejected: {markdown_literal(exc)}. Narrow the range, or change the what-if config it "
                 "varies on.")
        return
    table = result["table"]
    fields_ = list(params["grid"])
    metric = params["metric"]
    st.caption(f"{len(table)} replays in {result['seconds']:.2f} s on {result['engine']}.")
    with st.expander("Download the sweep table"):
        download_view(f"{key}.download", lambda: table, "regime-dash-sweep")
    if len(fields_) == 2:
        fig = figures.sweep_heatmap(table, fields_[0], fields_[1], metric)
    else:
        fig = figures.sweep_line(table, fields_[0], metric)
    event = plotly_chart(fig, f"{key}.chart", on_select="rerun", selection_mode="points")
    from regime_dash.analysis.verdict import flat_sweep_note, verdict

    note = flat_sweep_note(table[metric], fields_, verdict(cache.replay(source_key, stream, base.as_dict(), engine,
                                                                         fp, layout)["frame"]))
    if note:
        st.caption(note)
    row = pick_sweep_row(key, event, table, fields_)
    if row is None:
        return
    config = base.replace(**{f: float(table[f].iloc[row]) for f in fields_})
    baseline = cache.replay(source_key, stream, RegimeConfig().as_dict(), engine, fp, layout)
    cell = cache.replay(source_key, stream, config.as_dict(), engine, fp, layout)
    label = ", ".join(f"{f}={table[f].iloc[row]:g}" for f in fields_)
    cell_summary = cache.replay_summary(source_key, stream, config.as_dict(), engine, fp, layout)
    base_summary = cache.replay_summary(source_key, stream, RegimeConfig().as_dict(), engine, fp, layout)
    st.markdown(f"**Replay of {label}** — {metric} = {cell_summary[metric]:g} "
                f"(baseline {base_summary[metric]:g}), {cell['seconds'] * 1000:.1f} ms")
    fig = cache.signal_figure(f"sweepcell|{source_key}|{engine}|{fp}|{config}",
                              {"baseline": baseline["frame"], label: cell["frame"]}, "step", 0.0)
    plotly_chart(fig, f"{key}.cell_chart")

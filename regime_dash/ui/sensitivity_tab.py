"""The Replay page's Sensitivity tab: a tornado chart per metric, the no-effect list, a field's sweep.

The analysis (:func:`regime_dash.runs.sensitivity.sensitivity`) runs when "Run
sensitivity" is pressed, with a progress bar, and its result stays in
``st.session_state[key + '.result']`` beside what it was computed for, so
reruns of the page cost nothing and a changed what-if config asks for a new run.
"""
from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from regime_dash.core.config import RegimeConfig, field_names
from regime_dash.errors import RegimeDashError
from regime_dash.runs.sensitivity import PAIR_FIELDS
from regime_dash.text import markdown_literal
from regime_dash.ui import cache, sections, widgets


def clicked_field(event: Any, last: str | None) -> str | None:
    """The field of the clicked tornado bar (its ``customdata``) when it is not ``last``; else None.

    ``event`` is what ``st.plotly_chart(on_select="rerun")`` returned. A chart
    keeps its selection across reruns, so the caller passes the click it
    applied last and a click is applied once.
    """
    try:
        points = event.selection.points if event is not None else []
    except AttributeError:
        return None
    for p in points:
        name = p.get("customdata")
        if isinstance(name, (list, tuple)):
            name = name[0] if name else None
        if name in field_names() and name != last:
            return name
    return None


def no_effect_table(result: Any) -> pd.DataFrame:
    """The no-effect fields of a sensitivity result: each with the findings that explain it and
    what its end value moved."""
    return pd.DataFrame([{"field": n.field,
                          "explained by": " ".join(f"{f['id']}: {f['message']}" for f in n.findings)
                          or "No finding explains it.",
                          "except at the end of its range": n.edge_text()} for n in result.no_effect],
                        columns=["field", "explained by", "except at the end of its range"])


def _run(source_key: str, stream: Any, base: RegimeConfig, layout) -> Any:
    from regime_dash.usecases.sensitivity import sensitivity_prepared
    from regime_dash.usecases.sweep import engine_for_sweep

    bar = st.progress(0.0, text="sensitivity: starting")
    try:
        # engines agree bit for bit, so the sweeps take the fast one wherever it runs, from the light inputs
        fp = layout.fingerprint_hex() if layout is not None else ""
        ready = cache.prepared(source_key, stream, engine_for_sweep("auto"), fp, layout)
        result = sensitivity_prepared(ready, base,
                                      progress=lambda f, text: bar.progress(min(max(f, 0.0), 1.0), text=text))
    except RegimeDashError as exc:
        bar.empty()
        st.error(f"Sensitivity failed: {markdown_literal(exc)}")
        return None
    bar.progress(1.0, text=f"sensitivity: done in {result.seconds:.2f} s")
    return result


def sensitivity_tab(key: str, source_key: str, stream: Any, base: RegimeConfig | None, layout=None) -> None:
    """The Sensitivity tab of the Replay page, around ``base`` (the what-if config).

    Keys: ``{key}.run`` (button), ``{key}.result``, ``{key}.tornado.{metric}``
    (charts), ``{key}.clicked.{metric}``, ``{key}.field`` (the opened field), ``{key}.sweep``.
    """
    from regime_dash.figures import sensitivity as figures_sensitivity

    if base is None:
        st.info("The what-if config is rejected (see the What-if tab); fix it to run a sensitivity.")
        return
    st.caption("Every config field swept across its slider domain, one at a time around the what-if config "
               f"(switches both ways), then the top {PAIR_FIELDS} fields pairwise. A field that moves no summary "
               "metric is listed as having no effect here, with the finding that explains it.")
    fp = layout.fingerprint_hex() if layout is not None else ""
    ident = (source_key, fp, tuple(base.as_dict().items()))
    if st.button("Run sensitivity", key=f"{key}.run", type="primary"):
        result = _run(source_key, stream, base, layout)
        if result is not None:
            st.session_state[f"{key}.result"] = (ident, result)
    stored = st.session_state.get(f"{key}.result")
    if stored is None or stored[0] != ident:
        st.caption("Press Run sensitivity." if stored is None else
                   "The stream or the what-if config changed since the last run: press Run sensitivity again.")
        return
    result = stored[1]
    st.caption(f"{len(result.oat)} one-at-a-time and {len(result.pair_table)} pairwise replays of "
               f"{result.steps:,} steps in {result.seconds:.2f} s on {result.engine}.")

    quiet = result.no_effect_fields
    moved = [m for m in result.effects["metric"].unique()
             if ((result.effects["metric"] == m) & (result.effects["span"] > 0)
                 & ~result.effects["field"].isin(quiet)).any()]
    st.markdown("**Tornado per metric** — each field's lowest to highest value of the metric, from the "
                "base replay's value (0). Click a bar to open that field's sweep.")
    cols = st.columns(2)
    for i, metric in enumerate(moved):
        with cols[i % 2]:
            event = widgets.plotly_chart(figures_sensitivity.tornado(result.effects, metric, exclude=quiet),
                                         f"{key}.tornado.{metric}", on_select="rerun", selection_mode="points")
        name = clicked_field(event, st.session_state.get(f"{key}.clicked.{metric}"))
        if name is not None:
            st.session_state[f"{key}.clicked.{metric}"] = name
            st.session_state[f"{key}.field"] = name

    st.markdown("**No effect here**")
    if quiet:
        st.dataframe(no_effect_table(result), hide_index=True, key=f"{key}.no_effect")
    else:
        st.caption("Every field moves some metric.")
    if len(result.pairs):
        st.markdown("**Pairs** — interaction: how far the joint move departs from the two single moves")
        st.dataframe(result.pairs[result.pairs["interaction"] > 0], hide_index=True, key=f"{key}.pairs")
    if result.skipped:
        st.caption("Not replayed (RegimeConfig rejects them next to the base): "
                   + markdown_literal("; ".join(f"{f}={v}: {m}" for f, v, m in result.skipped)))

    with st.expander("Download the tables"):
        widgets.download_tables(f"{key}.download", {
            "effects": lambda: result.effects, "one-at-a-time": lambda: result.oat,
            "pairs": lambda: result.pairs, "pair grid": lambda: result.pair_table,
            "no effect": lambda: no_effect_table(result)}, "regime-dash-sensitivity")

    names = [n for n, _ in result.ranking] + quiet
    if st.session_state.get(f"{key}.field") not in names:
        st.session_state[f"{key}.field"] = None  # a new result without the field opened before
    name = st.selectbox("Open the sweep of", names, key=f"{key}.field",
                        placeholder="click a bar above, or pick a field")
    if name is None:
        return
    edge = {n.field: list(n.edge_deltas) for n in result.no_effect}
    # a no-effect field draws what its end value moved, else the headline metrics (flat lines)
    metrics = list(result.moves(name)) or edge.get(name) or list(sections.HEADLINE[:4])
    widgets.plotly_chart(figures_sensitivity.field_sweep(result.field_sweep(name), name, metrics), f"{key}.sweep")

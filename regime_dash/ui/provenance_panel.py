"""Explore's failures table and provenance panel: what failed where, in ``check``'s words, and why.

The table lists every failed check and every finding of severity ``fail`` of the
runs on screen (:func:`regime_dash.analysis.failures.failures`), with the text
``check`` prints. Choosing a row, or clicking a verdict marker on the chart, selects
an item and a step; the selection opens the provenance panel, a side sheet with
:func:`regime_dash.analysis.failures.explain`'s answer: the formula with its
numbers, the rows t−1 and t with the fields the formula reads highlighted, and the
local replay drawn over the logged trajectory.

The selection is view state (:mod:`regime_dash.ui.state`): kept across pages and in
the URL as ``failure=<id>@<step>`` and ``failure_run=<run id>``; closing the panel clears it.
"""
from __future__ import annotations

import html
from typing import Any, Callable, Mapping

import pandas as pd
import streamlit as st

from regime_dash.analysis.failures import failures, find_item
from regime_dash.text import markdown_literal
from regime_dash.ui import state

#: Query parameters of the selection.
PARAM, RUN_PARAM = "failure", "failure_run"
#: The panel's width in pixels: a side sheet that leaves the chart's left part in view.
PANEL_WIDTH = 860


def _parse(text: str) -> tuple[str, int] | None:
    item_id, _, step = str(text).rpartition("@")
    try:
        return (item_id, int(step)) if item_id else None
    except ValueError:
        return None


def select(key: str, run_id: str, item_id: str, step: int) -> None:
    """Select verdict item ``item_id`` of run ``run_id`` at ``step`` (a callback may call it)."""
    state.keep(key, f"{item_id}@{int(step)}")
    state.keep(f"{key}.run", run_id)


def close(key: str) -> None:
    """Clear the selection (the panel closes; its URL parameters go) and the table's chosen row."""
    state.forget(key, PARAM)
    state.forget(f"{key}.run", RUN_PARAM)
    st.session_state[f"{key}.table.version"] = st.session_state.get(f"{key}.table.version", 0) + 1


def restore(key: str, results: Mapping[str, Any], ids: Mapping[str, str]) -> tuple[str, str, int] | None:
    """The selection ``(run id, item id, step)`` from this session or the URL, or ``None``.

    ``results`` holds each run's report by label, ``ids`` each label's run id. A selection that
    names a run not on screen, or an item its verdict does not have, is dropped.
    """
    verdicts = {ids[label]: r.verdict for label, r in results.items()}
    run_id = state.restore(f"{key}.run", RUN_PARAM, "str", "", valid=lambda v: v in verdicts)

    def known(text: str) -> bool:
        got = _parse(text)
        return got is not None and run_id in verdicts and find_item(verdicts[run_id], got[0]) is not None

    text = state.restore(key, PARAM, "str", "", valid=lambda v: v == "" or known(v))
    got = _parse(text) if run_id else None
    return None if got is None else (run_id, got[0], got[1])


def marker_clicked(key: str, ids: Mapping[str, str]) -> Callable[[Mapping[str, Any], Any], None]:
    """What a click on a verdict marker does: select its item at the clicked step (``ids``: run id by label)."""
    def clicked(meta: Mapping[str, Any], x: Any) -> None:
        label, item_id = meta.get("run"), meta.get("verdict")
        if label in ids and item_id:
            select(key, ids[label], str(item_id), int(round(float(x))))
    return clicked


def failures_table(key: str, results: Mapping[str, Any], ids: Mapping[str, str]) -> None:
    """Every failure of the runs on screen, one row each; choosing a row opens its provenance."""
    rows = [{"run": label, "run_id": ids[label], "kind": f.kind, "id": f.id, "first step": f.first_step,
             "message": f.message} for label, res in results.items() for f in failures(res.verdict)]
    if not rows:
        st.caption("No check failed and no finding of severity fail: nothing to explain.")
        return
    table = pd.DataFrame(rows)
    table_key = f"{key}.table.{st.session_state.get(f'{key}.table.version', 0)}"
    st.markdown(f"**Failures** ({len(rows)}) — choose a row, or click a ▼/★ marker on the chart, to see "
                "where its value comes from.")
    shown = table.drop(columns=["run_id"] + ([] if len(results) > 1 else ["run"]))
    event = st.dataframe(shown, hide_index=True, key=table_key, on_select="rerun", selection_mode="single-row",
                         height=min(35 * (len(rows) + 1) + 3, 250),
                         column_config={"first step": st.column_config.NumberColumn(format="%d"),
                                        "message": st.column_config.TextColumn(width="large")})
    picked = list(event.selection.rows)
    # a row chosen anew selects it; the same row still chosen on a later rerun leaves a marker's selection be
    if picked and picked != st.session_state.get(f"{table_key}.seen"):
        row = table.iloc[int(picked[0])]
        step = row["first step"]
        select(key, row["run_id"], row["id"], 0 if pd.isna(step) else int(step))
    st.session_state[f"{table_key}.seen"] = picked


_ROWS_CSS = ("<style>.rd-rows{max-height:330px;overflow:auto;border:1px solid rgba(128,128,128,.3);"
             "border-radius:.4rem}.rd-rows table{border-collapse:collapse;width:100%;font-size:.82rem}"
             ".rd-rows th{position:sticky;top:0;background:var(--st-background-color,#fff);text-align:left}"
             ".rd-rows th,.rd-rows td{padding:.2rem .5rem;border-bottom:1px solid rgba(128,128,128,.2)}"
             ".rd-rows td.rd-v{font-family:var(--st-code-font,monospace);white-space:nowrap}"
             ".rd-rows tr.rd-used td{background:rgba(255,193,7,.28);font-weight:600}</style>")


def rows_html(rows: pd.DataFrame) -> str:
    """The rows table as HTML, the fields the formula uses (``use`` not empty) highlighted (``rd-used``).

    HTML, not a styled ``st.dataframe``: a click waits on this table, and a pandas Styler of it
    takes longer to send than the re-derivation behind it.
    """
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in rows.columns)
    body = []
    for rec, use in zip(rows.itertuples(index=False), rows["use"]):
        cells = "".join(f"<td class='rd-v'>{html.escape(str(v))}</td>" if c in ("t−1", "t") else
                        f"<td>{html.escape(str(v))}</td>" for c, v in zip(rows.columns, rec))
        body.append(f"<tr class='rd-used'>{cells}</tr>" if use else f"<tr>{cells}</tr>")
    return f"{_ROWS_CSS}<div class='rd-rows'><table><tr>{head}</tr>{''.join(body)}</table></div>"


def _body(key: str, expl, label: str) -> None:
    from regime_dash.figures.overlay import provenance_figure
    from regime_dash.ui.widgets import plotly_chart

    item = expl.item
    st.markdown(f"**{item.status.upper()}** `{item.id}` at step **{expl.step}** — {markdown_literal(label)}")
    st.caption(markdown_literal(item.message))  # a message names the file's columns and values
    if expl.formula is not None:
        st.markdown("**Formula**")
        st.markdown(markdown_literal(expl.formula))  # a formula has ``_``, ``|``, ``*``
        st.markdown("**With the numbers of this step**")
        st.code(expl.filled, language=None, wrap_lines=True)
        c1, c2, c3 = st.columns(3)
        c1.metric("expected", "NaN" if expl.expected is None else f"{expl.expected:.9g}")
        c2.metric("logged", "NaN" if expl.logged is None else f"{expl.logged:.9g}")
        c3.metric("replay splits at", "—" if expl.split_step is None else f"step {expl.split_step}")
    if expl.source == "resume":  # t−1 the checkpoint row, t the first resumed row
        st.markdown("**The checkpoint row (t−1) and the resumed row (t)** (the slots that did not continue "
                    "highlighted)")
    else:
        st.markdown("**Rows t−1 and t** " + ("(the fields the formula reads highlighted)" if expl.formula is not None
                                             else "(the field it concerns highlighted)"))
    st.html(rows_html(expl.rows))
    if expl.replay is not None:
        st.markdown("**Local replay over the logged trajectory**")
        plotly_chart(provenance_figure(expl.replay, expl.step, expl.split_step, item.column or item.id),
                     f"{key}.replay")
    st.caption(markdown_literal(expl.note))


def panel(key: str, selected: tuple[str, str, int] | None, root: str, aliases: tuple,
          frames: Mapping[str, pd.DataFrame], results: Mapping[str, Any], ids: Mapping[str, str]) -> None:
    """Open the provenance panel of ``selected`` (from :func:`restore`); nothing when ``None``.

    ``frames`` and ``results`` hold each run's frame and report by label, ``ids`` each label's run id.
    """
    from regime_dash.errors import RegimeDashError
    from regime_dash.ui import cache
    from regime_dash.ui.errors import show_error

    if selected is None:
        return
    run_id, item_id, step = selected
    labels = {rid: label for label, rid in ids.items()}
    frames = {ids[label]: f for label, f in frames.items()}
    verdicts = {ids[label]: r.verdict for label, r in results.items()}

    def body() -> None:
        try:
            expl = cache.explanation(root, run_id, aliases, item_id, step, frames[run_id], verdicts[run_id])
        except RegimeDashError as exc:
            show_error(exc, context=f"{markdown_literal(item_id)} at step {step} cannot be explained: ")
            return
        if expl is None:
            st.info(f"{markdown_literal(labels.get(run_id, run_id))}'s verdict has no item "
                    f"{markdown_literal(item_id)}.")
            return
        _body(f"{key}.panel", expl, labels.get(run_id, run_id))

    st.dialog(f"Provenance: {markdown_literal(item_id)} at step {step}", width=PANEL_WIDTH, position="right",
              on_dismiss=lambda: close(key))(body)()


__all__ = ["PARAM", "RUN_PARAM", "close", "failures_table", "marker_clicked", "panel", "restore", "select"]

"""Compare's three tabs: the runs overlaid, A − B of the chosen pair, and the runs grouped.

Each tab is a fragment: a control in it (the smoothing, the fields, the grouping) reruns that
tab alone, on the frames the page loaded, not the page (whose run reads every run again).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd
import streamlit as st

from regime_dash.diag import catalogue as diag
from regime_dash.analysis.groups import BANDS, group_options, group_runs
from regime_dash.figures.compare import BAND_WORDS, short_name
from regime_dash.ui import cache, state, widgets

#: The fields the Groups tab starts on: the continuous signals of the panels, one a controller.
GROUP_FIELDS = (diag.KELLY, diag.LIVE, diag.SIGMA, diag.TAU_MIN_EFF)
#: How many differing fields the Difference tab starts on.
DIFF_FIELDS = 6


@st.fragment
def overlay(root: str, run_ids: Sequence[str], frames: Mapping[str, pd.DataFrame]) -> None:
    """Every run on the seven signal panels, one colour each; smoothing and the x axis."""
    c1, c2 = st.columns([1, 2])
    with c1:
        x = widgets.x_axis_picker("compare.x", list(frames.values()), param="x")
    with c2:
        smoothing = widgets.smoothing_slider("compare.smoothing", param="smooth")
    # each run's traces cached on their own: a run added costs its traces, not the others'
    run_keys = tuple((label, f"{root}|{rid}") for rid, label in zip(run_ids, frames))
    spec = cache.signal_spec(f"compare|{root}|{'|'.join(run_ids)}", dict(frames), x, smoothing, run_keys=run_keys,
                             colours=widgets.run_colours(dict(zip(run_ids, frames))))
    widgets.plotly_chart(widgets.thin_bands(spec, len(frames)), "compare.chart")
    state.publish()


@st.fragment
def difference(root: str, run_a: str, run_b: str, names: tuple[str, str], rows_compared: int) -> None:
    """A − B of the fields picked (the differing ones first), each field's first differing step marked."""
    if rows_compared == 0:
        st.info("A and B share no step: there is no difference to draw. Pick runs that cover the same steps.")
        return
    firsts = cache.delta_fields(root, run_a, run_b)
    differing = [c for c, step in firsts.items() if step is not None]
    if not firsts:
        st.info("A and B share no numeric field.")
        return
    st.caption(f"{len(differing)} of {len(firsts)} shared numeric fields differ; A − B at the shared steps, "
               "✕ at each field's first differing step, the dotted line where the runs first part.")
    picked = st.multiselect("Fields", list(firsts), default=differing[:DIFF_FIELDS], format_func=short_name,
                            key="compare.diff.fields")
    if not picked:
        st.info("A and B are equal in every numeric field they share." if not differing
                else "Pick one or more fields to draw A − B of.")
        return
    widgets.plotly_chart(cache.difference_spec(root, run_a, run_b, tuple(picked), names), "compare.diff.chart")


def _rows(runs: pd.DataFrame, root: str, run_ids: Sequence[str]) -> list[dict]:
    """The picked runs as the runs table has them for grouping: ``run_id``, ``tags``, ``config``."""
    by_id = runs.set_index("run_id")
    return [{"run_id": rid, "tags": list(by_id.at[rid, "tags"] or []) if "tags" in by_id else [],
             "config": cache.logged_config(root, rid, by_id.at[rid, "rows"] if "rows" in by_id else None)}
            for rid in run_ids]


def _group_label(by: str) -> str:
    kind, _, name = by.partition(":")
    return {"tags": "their tags", "tag": f"tag {name}=…", "config": f"config {name}"}.get(kind, by)


@st.fragment
def groups(root: str, runs: pd.DataFrame, run_ids: Sequence[str], frames: Mapping[str, pd.DataFrame]) -> None:
    """The runs grouped by a tag or a logged config field: each group's mean over its band, step-aligned."""
    rows = _rows(runs, root, run_ids)
    options = group_options(rows)
    if not options:
        st.info("These runs have no tags and log no config field to group them by. Tag them on the Runs page "
                "(for example seed=1, seed=2 and cfg=a on the seeds of one config).")
        return
    c1, c2, c3 = st.columns([2, 1, 2])
    with c1:
        state.restore("compare.group_by", "group", "str", options[0], options=options)
        by = st.selectbox("Group by", options, format_func=_group_label, key="compare.group_by")
    with c2:
        state.restore("compare.band", "band", "str", BANDS[0], options=BANDS)
        band = st.radio("Band", BANDS, format_func=BAND_WORDS.get, horizontal=True, key="compare.band")
    with c3:
        smoothing = widgets.smoothing_slider("compare.smoothing", param="smooth")
    fields = _numeric_fields(frames)
    picked = st.multiselect("Fields", fields, default=[c for c in GROUP_FIELDS if c in fields],
                            format_func=short_name, key="compare.group.fields")
    members = group_runs(rows, by)
    label_of = dict(zip(run_ids, frames))
    named = {label_of[rid]: g for rid, g in members.items()}
    sizes = pd.Series(list(named.values())).value_counts(sort=False)
    st.caption(f"{len(sizes)} group(s): " + "; ".join(f"{g} ({n})" for g, n in sizes.items())
               + ". At each step, a group's mean and band are over its runs that reached that step.")
    state.publish()
    if not picked:
        st.info("Pick one or more fields to draw the groups of.")
        return
    spec = cache.group_spec(f"groups|{root}|{'|'.join(run_ids)}", dict(frames), tuple(named.items()),
                            tuple(picked), band, smoothing)
    widgets.plotly_chart(spec, "compare.group.chart")


def _numeric_fields(frames: Mapping[str, pd.DataFrame]) -> list[str]:
    """The numeric diag fields the runs have (the panels' signals first)."""
    from regime_dash.figures.signals import FLAG_COLUMNS, PANEL_COLUMNS

    have = {c for f in frames.values() for c in f.columns if pd.api.types.is_numeric_dtype(f[c].dtype)}
    first = [c for c in PANEL_COLUMNS if c in have and c not in FLAG_COLUMNS]
    rest = sorted(c for c in have if c.startswith(diag.P) and c not in first and c not in FLAG_COLUMNS)
    return first + rest

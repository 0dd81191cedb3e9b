"""The Runs page's runs table: one row per run (names, tags, notes, steps, verdict, logged config,
headline metrics), filtered by text, tag, verdict and a numeric range with the filter in the URL;
selected rows open in Explore or Compare, and are tagged, noted and renamed here."""
from __future__ import annotations

from typing import Sequence

import pandas as pd
import streamlit as st

from regime_dash.diag.catalogue import LOGGED_CONFIG
from regime_dash.errors import RegimeDashError
from regime_dash.runs.run_table import HEADLINE, at_slot_precision, flat, table
from regime_dash.text import clip, markdown_literal, terminal_safe
from regime_dash.ui import live_alerts, state, widgets
from regime_dash.ui.errors import show_error

#: The run's own columns, in the table's order (config and headline metrics follow).
FIRST = ("name", "aliases", "tags", "notes", "diag", "verdict", "fail", "warn", "pass", "skip", "rows", "steps",
         "first_step", "last_step", "ingested_at")
VERDICTS = ("pass", "warn", "fail", "not a diag", "unreadable")


def table_frame(store) -> pd.DataFrame:
    """Every run as a flat row; the first view of a run judges it (a bar shows it), later ones read its cache."""
    bar = st.empty()

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"reading run {done} of {total} (a run's first listing judges it once)")

    rows = [flat(r) for r in table(store, progress=progress)]
    bar.empty()
    frame = pd.DataFrame(rows)
    for c in ("aliases", "tags"):
        frame[c] = [", ".join(v) for v in frame[c]]
    frame["steps"] = [f"{a} … {b}" for a, b in zip(frame["first_step"], frame["last_step"])]
    # the table shows cells as raw text: a name's right-to-left override would reorder it, a note's
    # newline hide the rest of it; shown escaped, as the CLI's runs table shows them (labels keep theirs)
    for c in ("name", "aliases", "tags", "notes", "source"):
        if c in frame:
            frame[c] = [terminal_safe(v) if isinstance(v, str) else v for v in frame[c]]
    return live_alerts.badges(frame)


def numeric_columns(frame: pd.DataFrame) -> list[str]:
    """The columns a range filter can apply to."""
    return [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])
            and not pd.api.types.is_bool_dtype(frame[c])]


def _range_ok(text: str) -> bool:
    """``field:lo..hi`` (either bound may be empty), or empty."""
    if not text:
        return True
    field, _, bounds = text.partition(":")
    lo, sep, hi = bounds.partition("..")
    try:
        [float(b) for b in (lo, hi) if b]
    except ValueError:
        return False
    return bool(field) and sep == ".."


def filters(key: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The filter row (text, tags, verdicts, one numeric range), each kept in the URL; the rows it keeps."""
    tags = sorted({t for v in frame["tags"] for t in v.split(", ") if t})
    c1, c2, c3, c4 = st.columns([3, 2, 2, 3])
    state.restore(f"{key}.q", "q", "str", "")
    text = c1.text_input("Search (name, alias, tag, note, source, id)", key=f"{key}.q")
    state.restore(f"{key}.tags", "tags", "list", [], options=tags)
    want_tags = c2.multiselect("Tags (all of)", tags, key=f"{key}.tags")
    state.restore(f"{key}.verdicts", "verdicts", "list", [], options=VERDICTS)
    verdicts = c3.multiselect("Verdict", VERDICTS, key=f"{key}.verdicts")
    state.restore(f"{key}.range", "range", "str", "", valid=_range_ok)
    rng = c4.text_input("Range: column:lo..hi (e.g. max_duration:300..900)", key=f"{key}.range",
                        help="Any numeric column: " + markdown_literal(", ".join(numeric_columns(frame))))
    keep = pd.Series(True, index=frame.index)
    if text:
        hay = frame[["name", "aliases", "tags", "notes", "source", "run_id"]].fillna("").astype(str).agg(" ".join, axis=1)
        keep &= hay.str.contains(text, case=False, regex=False)
    for t in want_tags:
        keep &= frame["tags"].map(lambda v, t=t: t in v.split(", "))
    if verdicts:
        keep &= frame["verdict"].isin(verdicts)
    if rng and _range_ok(rng):
        keep &= _in_range(frame, rng)
    elif rng:
        st.warning(f"Range {markdown_literal(repr(clip(rng)))} is not column:lo..hi; it is not applied.")
    return frame[keep]


def _in_range(frame: pd.DataFrame, rng: str) -> pd.Series:
    field, _, bounds = rng.partition(":")
    if field not in frame.columns:
        st.warning(f"No column {markdown_literal(repr(clip(field)))} to filter on; numeric columns: "
                   f"{markdown_literal(', '.join(numeric_columns(frame)))}.")
        return pd.Series(True, index=frame.index)
    lo, _, hi = bounds.partition("..")
    v = pd.to_numeric(frame[field], errors="coerce").map(lambda x: at_slot_precision(field, x))
    keep = v.notna()
    if lo:
        keep &= v >= at_slot_precision(field, float(lo))
    if hi:
        keep &= v <= at_slot_precision(field, float(hi))
    return keep


def sorted_rows(key: str, frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """The rows in the order picked here: by one of ``columns``, ascending or not (in the URL as
    ``sort`` and ``desc``), missing values last; the store's order (oldest ingest first) by default.

    A header click sorts only the browser's copy of the table, which the server never learns, so a
    shared URL could not carry it: this control is the sort a link keeps.
    """
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    options = ["", *columns]
    state.restore(f"{key}.by", "sort", "str", "", options=options)
    by = c1.selectbox("Sort by", options, format_func=lambda c: c or "ingest order", key=f"{key}.by")
    state.restore(f"{key}.desc", "desc", "bool", False)
    descending = c2.toggle("Descending", key=f"{key}.desc")
    if not by:
        return frame.iloc[::-1] if descending else frame
    # text columns may hold numbers and None side by side: compared as text
    as_sortable = (lambda col: col if pd.api.types.is_numeric_dtype(col) else col.fillna("").astype(str))
    return frame.sort_values(by, ascending=not descending, kind="stable", na_position="last", key=as_sortable)


def shown_columns(frame: pd.DataFrame) -> list[str]:
    """The run's columns, then the logged config fields and headline metrics the runs have."""
    cols = [c for c in FIRST if c in frame.columns]
    if "live" in frame and frame["live"].any():
        cols[1:1] = ["live", "alerts"]
    cols += [c for c in LOGGED_CONFIG if c in frame.columns and frame[c].notna().any()]
    cols += [c for c in HEADLINE if c in frame.columns and frame[c].notna().any()]
    return cols + ["source", "run_id"]


def selected(key: str, frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The table itself (sortable by any column header; rows selectable); the selected run ids.
    ``columns``: the whole table's :func:`shown_columns`, so a filter keeps the columns where they are."""
    event = st.dataframe(frame[list(columns)], hide_index=True, key=key, on_select="rerun",
                         selection_mode="multi-row",
                         # names and the live badge whole at a 1,280 px window ("trap-ru", "followe…" were cut)
                         column_config={"notes": st.column_config.TextColumn("notes", width="medium"),
                                        "name": st.column_config.TextColumn("name", width="medium"),
                                        "live": st.column_config.TextColumn("live", width="medium"),
                                        "alerts": st.column_config.TextColumn("alerts", width="medium")})
    rows = list(getattr(getattr(event, "selection", None), "rows", []) or [])
    return [frame["run_id"].iloc[i] for i in rows if i < len(frame)]


def open_buttons(key: str, picked: Sequence[str]) -> None:
    """Open the selected runs in Explore (any number) or Compare (two)."""
    c1, c2 = st.columns(2)
    if c1.button(f"Open {len(picked)} selected in Explore", key=f"{key}.explore", disabled=not picked):
        state.keep("explore.runs", list(picked))
        st.switch_page(widgets.page_path("explore.py"))
    if len(picked) == 2 and c2.button("Compare the 2 selected", key=f"{key}.compare"):
        state.keep("compare.a", picked[0])
        state.keep("compare.b", picked[1])
        st.switch_page(widgets.page_path("compare.py"))


def edit_panel(key: str, store, frame: pd.DataFrame, picked: Sequence[str]) -> None:
    """Tag, untag, note and rename the selected runs (note and rename: one run)."""
    from regime_dash.store import labels

    names = dict(zip(frame["run_id"], frame["name"]))
    if not picked:
        st.caption("Select rows in the table to open them in Explore or Compare, or to edit them; "
                   "or pick runs to edit here.")
        picked = st.multiselect("Runs to edit", list(frame["run_id"]), key=f"{key}.runs",
                                format_func=lambda r: f"{names[r]} · {r[-6:]}")
        if not picked:
            return
    with st.expander(f"Edit {len(picked)} selected run(s): " + markdown_literal(", ".join(names[r] for r in picked)),
                     expanded=True):
        try:
            c1, c2 = st.columns(2)
            add = c1.text_input("Add tags (space-separated)", key=f"{key}.add")
            # never disabled: a box's text commits only as the click takes its focus, so a button
            # disabled until then needs a second click
            if c1.button("Tag", key=f"{key}.tag"):
                if not add.strip():
                    st.warning("Type the tags to add first.")
                else:
                    for rid in picked:
                        labels.tag(store, rid, add.split())
                    st.rerun()
            have = sorted({t for r in picked for t in store.meta(r).get("tags", [])})
            drop = c2.multiselect("Remove tags", have, key=f"{key}.drop")
            if c2.button("Untag", key=f"{key}.untag", disabled=not drop):
                for rid in picked:
                    labels.untag(store, rid, drop)
                st.rerun()
            if len(picked) == 1:
                _note_and_rename(key, store, picked[0])
        except RegimeDashError as exc:
            show_error(exc)


def _note_and_rename(key: str, store, rid: str) -> None:
    from regime_dash.store import labels

    meta = store.meta(rid)
    c1, c2 = st.columns(2)
    note = c1.text_area("Note", value=meta.get("notes", ""), key=f"{key}.note.{rid}")
    if c1.button("Save note", key=f"{key}.save_note"):
        labels.set_note(store, rid, note)
        st.rerun()
    new = c2.text_input("New name", value=meta.get("name") or "", key=f"{key}.name.{rid}")
    if c2.button("Rename", key=f"{key}.rename"):  # not disabled, for the reason Tag is not
        if new == meta.get("name"):
            st.info("That is the run's name already: type a new one.")
            return
        done = labels.rename(store, rid, new)
        st.toast(f"renamed {markdown_literal(done['old'])} to {markdown_literal(done['name'])}")
        st.rerun()

"""Runs: upload diag files into the store, see each ingest's report, list and delete runs."""
import streamlit as st

from regime_dash.errors import RegimeDashError
from regime_dash.text import markdown_literal
from regime_dash.ui import cache, sections, state, stores, widgets
from regime_dash.ui.errors import ErrorNote


def diag_column(runs):
    """Each run's "diag", or "not a diag: why" for a run an older version stored without a
    diag field (the store's ``not_diag``, :mod:`regime_dash.ingest.diag_rows`)."""
    reasons = runs["not_diag"] if "not_diag" in runs else [None] * len(runs)
    return [f"not a diag: {r}" if isinstance(r, str) else "diag" for r in reasons]


st.title("Runs")
st.caption("Keep your runs here: upload a trainer's diag.jsonl (or load the sample) to store it as Parquet; "
           "every other page reads the runs stored here.")
store = cache.get_store()

uploads = st.file_uploader("Upload diag.jsonl files (plain or .gz)", type=["jsonl", "json", "gz"],
                           accept_multiple_files=True, key="runs.upload")
new = [u for u in uploads or [] if u.file_id not in stores.ingest_reports()]
if new:
    bar = st.progress(0.0, text="ingesting…")
    for k, up in enumerate(new):
        def progress(done: int, total: int, k=k, name=markdown_literal(up.name)) -> None:
            frac = (k + (done / total if total else 1.0)) / len(new)
            bar.progress(min(frac, 1.0), text=f"ingesting {name}: {done:,} of {total:,} bytes")

        try:  # the upload streams through ingest: memory stays bounded whatever it holds
            result = store.ingest(up, source_name=up.name, progress=progress)
        except Exception as exc:  # noqa: BLE001 - reported once, never retried; the others still store
            result = ErrorNote.from_exception(exc)
        stores.record_ingest(up.file_id, up.name, result)
    bar.progress(1.0, text=f"ingested {len(new)} file(s)")

sections.ingest_report_panel()

sections.restore_offer("runs.delete", store)
runs = cache.runs_frame(store)
if runs.empty:
    st.info("The store is empty. Upload a diag.jsonl above, or start with the sample files.")
    samples = cache.sample_files()
    if samples and st.button(f"Load {len(samples)} sample file(s) from data/samples", type="primary",
                             key="runs.samples"):
        for path in samples:
            try:
                stores.record_ingest(f"sample:{path.name}", path.name,
                                      store.ingest(path, source_name=f"data/samples/{path.name}"))
            except RegimeDashError as exc:
                stores.record_ingest(f"sample:{path.name}", path.name, exc)
        st.rerun()
    elif not samples:
        st.warning("No sample files found under data/samples.")
else:
    st.subheader(f"Stored runs ({len(runs)})")
    st.caption(f"store: `{cache.store_root()}`")
    from regime_dash.ui import runs_table

    table = runs_table.table_frame(store)
    table = table.assign(diag=diag_column(table))
    kept = runs_table.filters("runs.filter", table)
    if len(kept) < len(table):
        st.caption(f"{len(kept)} of {len(table)} run(s) match the filter")
    columns = runs_table.shown_columns(table)
    kept = runs_table.sorted_rows("runs.sort", kept, columns)
    picked = runs_table.selected("runs.table", kept, columns)
    runs_table.open_buttons("runs.open", picked)
    runs_table.edit_panel("runs.edit", store, table, picked)
    sections.rejected_lines_panel("runs.rejects", store, runs)
    # a button, not a page link: the sidebar already has a link named "Explore"
    just = stores.uploaded_runs(list(runs["run_id"]))  # what the user just did is what they look at next
    if st.button(f"Next: look at the run{'s' if len(just or runs) > 1 else ''} on Explore", key="runs.explore",
                 icon=":material/monitoring:", type="primary"):
        if just:
            state.keep("explore.runs", just)
        st.switch_page(widgets.page_path("explore.py"))
    sections.delete_run_control("runs.delete", store, runs)

    st.subheader("Check all runs")
    if st.button(f"Check all {len(runs)} run(s) against the spec", key="runs.check_all"):
        from regime_dash.usecases.check import check_store

        bar = st.progress(0.0, text="checking…")
        st.session_state["runs.check_all_table"] = check_store(
            cache.store_root(),
            progress=lambda done, total: bar.progress(done / total, text=f"checked {done} of {total} run(s)"))
    summary = st.session_state.get("runs.check_all_table")
    if summary is not None:
        failed = int((summary["status"] != "ok").sum())
        st.caption(f"{failed} of {len(summary)} run(s) failed or could not be checked")
        st.dataframe(summary, hide_index=True, key="runs.check_all_view")
state.publish()

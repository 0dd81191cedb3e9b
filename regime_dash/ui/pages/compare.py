"""Compare: stored runs overlaid (two or more), the diff report and A − B of a pair, the runs grouped."""
import pandas as pd
import streamlit as st

from regime_dash.errors import RegimeDashError
from regime_dash.text import markdown_literal
from regime_dash.ui import cache, compare_tabs, state, widgets
from regime_dash.ui.errors import show_error

st.title("Compare")
st.caption("Where do two runs part? Rows are matched by step and every shared field is compared by value; "
           "pick run A and run B (it starts on two runs that cover the same steps), and more runs to overlay "
           "or to group (seeds and folds of one config).")
store = cache.get_store()
runs = cache.runs_frame(store)
if len(runs) < 2:
    st.info(f"Compare needs two runs; the store holds {len(runs)}. Add runs on the Runs page.")
    st.page_link(widgets.page_path("runs.py"), label="Go to Runs", icon=":material/folder_open:")
    st.stop()

first, _ = widgets.sharing_pair(runs)
c1, c2 = st.columns(2)
with c1:
    run_a = widgets.run_picker("compare.a", runs, multi=False, label="Run A", index=first, param="run_a")[0]
_, second = widgets.sharing_pair(runs, run_a)  # a URL naming only A: B is the run sharing most with it
with c2:
    run_b = widgets.run_picker("compare.b", runs, multi=False, label="Run B", index=second, param="run_b")[0]
more = widgets.run_picker("compare.more", runs, default=0, label="More runs to overlay", param="more")
root = cache.store_root()
diff = cache.diff_runs(root, run_a, run_b)

if diff.rows_compared == 0:
    st.warning("These two runs share no step, so no value can be compared. Pick runs that cover the same "
               "steps.")
else:
    (st.success if diff.identical else st.warning)(markdown_literal(diff.lines()[0]))
c = st.columns(4)
c[0].metric("shared steps compared", f"{diff.rows_compared:,}")
c[1].metric("first differing step", "—" if diff.first_step is None else f"{diff.first_step:,}")
c[2].metric("differing fields", len(diff.fields))
c[3].metric("steps in one run only", f"{diff.steps_only_a + diff.steps_only_b:,}")
# the details are built only while their expander is open (a rerun when it opens): a table
# and a code block each start a sizeable script in the browser, and a new page load would
# pay for them before the chart is drawn
fields = (widgets.lazy_expander(f"The {len(diff.fields)} differing field(s)", "compare.fields.open")
          if diff.fields else None)
if fields is not None:
    with fields:
        st.dataframe(pd.DataFrame([f.to_dict() for f in diff.fields]), hide_index=True, key="compare.fields")
report = widgets.lazy_expander("Full diff report", "compare.report.open")
if report is not None:
    with report:
        st.code("\n".join(diff.lines()), language=None)

picked = list(dict.fromkeys([run_a, run_b, *more]))
labels = widgets.run_labels(runs, picked)
frames = {}
for rid in list(picked):
    try:  # a damaged run (or one deleted meanwhile) is said and left out; the others are drawn
        frames[labels[rid]] = cache.load_run(root, rid)
    except RegimeDashError as exc:
        show_error(exc, context=f"{labels[rid]}: not shown. ")
        picked.remove(rid)
# only the open tab is built (a rerun when another is opened)
tab_runs, tab_diff, tab_groups = st.tabs(["Runs overlaid", "Difference A − B", "Groups"],
                                         key="compare.tabs", on_change="rerun")
if tab_runs.open:
    with tab_runs:
        compare_tabs.overlay(root, picked, frames)
if tab_diff.open:
    with tab_diff:
        compare_tabs.difference(root, run_a, run_b, (labels[run_a], labels[run_b]), diff.rows_compared)
if tab_groups.open:
    with tab_groups:
        compare_tabs.groups(root, runs, picked, frames)
state.publish()

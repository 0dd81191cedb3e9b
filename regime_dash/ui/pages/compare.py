"""Compare: two stored runs, their diff report and their signals overlaid."""
import pandas as pd
import streamlit as st

from regime_dash.text import markdown_literal
from regime_dash.ui import cache, state, widgets

st.title("Compare")
st.caption("Where do two runs part? Rows are matched by step and every shared field is compared by value; "
           "pick run A and run B (it starts on two runs that cover the same steps).")
store = cache.get_store()
runs = cache.runs_frame(store)
if len(runs) < 2:
    st.info(f"Compare needs two runs; the store holds {len(runs)}. Add runs on the Runs page.")
    st.page_link(widgets.page_path("runs.py"), label="Go to Runs", icon=":material/folder_open:")
    st.stop()

first, second = widgets.sharing_pair(runs)
c1, c2 = st.columns(2)
with c1:
    run_a = widgets.run_picker("compare.a", runs, multi=False, label="Run A", index=first, param="run_a")[0]
with c2:
    run_b = widgets.run_picker("compare.b", runs, multi=False, label="Run B", index=second, param="run_b")[0]
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

labels = widgets.run_labels(runs, [run_a, run_b]) if run_a != run_b else {run_a: "A"}
frames = {labels[r]: cache.load_run(root, r) for r in dict.fromkeys([run_a, run_b])}
x = widgets.x_axis_picker("compare.x", list(frames.values()), param="x")
fig = cache.signal_figure(f"compare|{root}|{run_a}|{run_b}", frames, x, 0.0)
widgets.plotly_chart(fig, "compare.chart")
state.publish()

"""Slots: the ISV slot registry, its reset policy and bootstraps; load a trainer's isv_slots.rs."""
import pandas as pd
import streamlit as st

from regime_dash.errors import SlotLayoutError
from regime_dash.modules import full_layout, orphan_slots
from regime_dash.core.slots import DEFAULT_LAYOUT, import_rust
from regime_dash.text import markdown_literal
from regime_dash.ui import stores

st.title("Slots")
st.caption("Check the ISV slot layout the replays use: find a slot by name, see who writes and reads it; "
           "upload your trainer's isv_slots.rs to replay with its layout.")
with st.expander("What the words here mean"):
    st.markdown(
        "- **ISV**: the float32 state vector every regime kernel reads and writes; a **slot** is one "
        "named index in it.\n"
        "- **bootstrap**: the value a slot starts from, and gets back at a fold or phase boundary when its "
        "**policy** says reset (*keep* slots carry over).\n"
        "- **producer / consumers**: the kernel that writes a slot and the kernels that read it.\n"
        "- **orphan**: a slot with consumers but no producer: it is read but never written, so it is stuck "
        "at its bootstrap value.\n"
        "- **fingerprint**: a hash (FNV-1a 64) of every slot's name and index; two layouts with the same "
        "fingerprint are the same layout.")
upload = st.file_uploader("Use the layout of an isv_slots.rs (`pub const NAME: usize = N;` lines)",
                          type=["rs", "txt"], key="slots.upload")
layout, source = stores.active_layout()  # what replays use now (kept across pages)
imported = None
if upload is not None:
    try:
        imported = import_rust(upload.getvalue().decode("utf-8", errors="replace"))
        layout = imported.layout
    except SlotLayoutError as exc:
        st.error(f"{markdown_literal(upload.name)}: {markdown_literal(exc)}")

report = layout.report()
if imported is not None and report.ok:  # replays use an imported layout only when it is usable
    stores.use_layout(layout, upload.name)
elif upload is None and layout is not DEFAULT_LAYOUT:
    st.info(f"Replays use the layout of {markdown_literal(source)}.")
    st.button("Use the default registry again", key="slots.reset",
              on_click=stores.use_layout, args=(None, None))
c1, c2, c3 = st.columns(3)
c1.metric("Slots", len(layout))
c2.metric("ISV size", layout.size)
c3.metric("Fingerprint (FNV-1a 64)", layout.fingerprint_hex())
if imported is not None:
    st.success(f"{markdown_literal(upload.name)}: {len(imported.replaced)} index(es) moved, {len(imported.unknown)} unknown "
               f"constant(s) ignored, {len(imported.missing)} registry slot(s) not in the file "
               "(they keep their default index).")
    if imported.replaced:
        st.dataframe(pd.DataFrame([{"slot": n, "default index": a, "file index": b}
                                   for n, (a, b) in sorted(imported.replaced.items())]),
                     hide_index=True, key="slots.replaced")
(st.error if report.overlaps else st.info)("Layout report: " + markdown_literal("; ".join(report.lines())))
if imported is not None:
    st.caption(f"Replays use this layout ({markdown_literal(upload.name)})." if report.ok else
               "Replays keep the default registry: this layout has overlapping indices.")

query = st.text_input("Filter (name, role, policy, producer or doc)", key="slots.filter")
try:  # the registry plus the controller modules' slots (regime_dash.modules)
    shown = full_layout(layout)
except SlotLayoutError:
    shown = layout
table = pd.DataFrame(shown.table())
orphans = orphan_slots(table.to_dict(orient="records"))
table.insert(2, "orphan", table["name"].isin(orphans))
if orphans:
    st.warning("Consumers but no producer (read, never written, so stuck at the bootstrap): "
               + markdown_literal(", ".join(orphans)))
if query:
    hay = table[["name", "role", "policy", "producer", "consumers", "doc"]].astype(str).agg(" ".join, axis=1)
    table = table[hay.str.contains(query, case=False, regex=False)]
st.caption(f"{len(table)} of {len(shown)} slots ({len(shown) - len(layout)} from the controller modules)")
st.dataframe(table, hide_index=True, key="slots.table",
             column_config={"bootstrap": st.column_config.NumberColumn(format="%g")})

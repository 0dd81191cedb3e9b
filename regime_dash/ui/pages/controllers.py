"""Controllers: any controller module (SP14, SP18, Pearl C, the regime observer) replayed with what-if sliders.

Everything on this page comes from the module record (:mod:`regime_dash.modules`):
the sliders from its config fields, the invariants table, the panels, the
slots with the orphan flag, and a one-field sweep. Adding a module package adds
it to the picker; nothing here names a module.
"""
from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

from regime_dash.errors import RegimeDashError
from regime_dash.modules import MODULES, orphan_slots
from regime_dash.text import markdown_literal
from regime_dash.ui import cache, state, widgets

KEY = "controllers"


def _control(spec, key: str) -> Any:
    """One widget for one config field, kept in the URL under the field's name: a toggle, a slider,
    or (for ranges over decades) a number box."""
    label = spec.name + (" (model)" if spec.model else "")
    if spec.kind == "bool":
        state.restore(key, spec.name, "bool", bool(spec.default))
        return st.toggle(label, help=spec.doc, key=key)
    kind, cast = ("int", int) if spec.kind == "int" else ("float", float)
    lo, hi = cast(spec.lo), cast(spec.hi)
    state.restore(key, spec.name, kind, cast(spec.default), valid=lambda v: lo <= v <= hi)
    if kind == "int":
        if hi - lo > 5000:
            return int(st.number_input(label, lo, hi, step=int(spec.step or 1), help=spec.doc, key=key))
        return st.slider(label, lo, hi, step=int(spec.step or 1), help=spec.doc, key=key)
    if lo > 0 and hi / lo > 1e3 or lo < 0 < hi and hi - lo > 1e3:
        return float(st.number_input(label, lo, hi, format="%g", help=spec.doc, key=key))
    step = float(spec.step) if spec.step else (hi - lo) / 200.0
    return st.slider(label, lo, hi, step=step, format="%g", help=spec.doc, key=key)


#: The URL parameters of a module's own controls besides its config fields.
MODULE_PARAMS = ("seed", "steps", "engine")


def _params_of(module: str) -> list[str]:
    return [*MODULE_PARAMS, *(s.name for s in MODULES[module].field_specs())]


def _checks_table(what_if: list[dict], baseline: list[dict]) -> pd.DataFrame:
    base = {c["id"]: c["status"] for c in baseline}
    return pd.DataFrame([{"check": c["id"], "status": c["status"], "baseline": base.get(c["id"], ""),
                          "violations": c["violations"], "first step": c["first_step"], "detail": c["detail"]}
                         for c in what_if])


st.title("Controllers")
st.caption("Try a controller module of the trainer (SP14, SP18, Pearl C, the regime observer) on a demo stream: "
           "pick one, then move its config sliders in the sidebar and see what changes.")
with st.expander("What the words here mean"):
    st.markdown(
        "- **controller module**: one of the trainer's feedback loops, replayed here from its spec on a "
        "synthetic demo stream.\n"
        "- **(model)** after a config field: the spec does not give this value; we chose it to make the "
        "module runnable, so results that depend on it are ours, not the spec's.\n"
        "- **baseline**: the same stream replayed with every field at its default; each metric shows the "
        "change from it.\n"
        "- **invariant check**: a rule the spec says must hold at every step (e.g. a counter resets when "
        "its flag drops); *fail* lists the first step that breaks it.\n"
        "- **slot**: a float32 cell of the ISV, the shared state vector the kernels read and write. "
        "An **orphan** slot is read by some kernel but written by none, so it stays at its bootstrap "
        "(start) value forever, usually a wiring bug.")
names = list(MODULES)
shown = state.restore(f"{KEY}.module", "module", "str", next((n for n in names if not MODULES[n].core), names[0]),
                      options=names)
# leaving a module takes its controls' parameters out of the URL (their values stay for a return)
name = st.selectbox("Controller module", names, format_func=lambda n: MODULES[n].title, key=f"{KEY}.module",
                    on_change=state.drop_params, args=(_params_of(shown),))
state.refuse_params(sorted({p for n in names for p in _params_of(n)} - set(_params_of(name))),
                    f"is no control of {MODULES[name].title}")
m = MODULES[name]
st.caption(m.doc.strip().split("\n\n")[0].replace("\n", " "))
if m.paths:  # the kernel paths a replay of this module can take (the module record lists them)
    with st.expander(f"Kernel paths ({len(m.paths)}): {', '.join(p for p, _ in m.paths)}"):
        st.markdown("\n".join(f"- **{path}**: {what}" for path, what in m.paths))

c1, c2, c3 = st.columns(3)
state.restore(f"{KEY}.{name}.seed", "seed", "int", 0, valid=lambda v: 0 <= v <= 2**31 - 1)
seed = int(c1.number_input("Demo stream seed", 0, 2**31 - 1, key=f"{KEY}.{name}.seed"))
state.restore(f"{KEY}.{name}.steps", "steps", "int", 0, valid=lambda v: 0 <= v <= 1_000_000)
steps_in = int(c2.number_input("Steps (0 = the demo's default)", 0, 1_000_000, step=100,
                               key=f"{KEY}.{name}.steps"))
steps = steps_in or None
from regime_dash.modules.base import cuda_available  # noqa: E402  (cheap; no cupy import)

engines = list(m.engines)
state.restore(f"{KEY}.{name}.engine", "engine", "str", engines[0], options=engines)
engine = c3.selectbox("Engine", engines, key=f"{KEY}.{name}.engine")
if engine == "cuda" and cuda_available() is not None:
    st.warning(f"The cuda engine cannot run here ({cuda_available()}); replaying on reference.")
    engine = "reference"

with st.sidebar:
    st.subheader(f"{m.title}: config")
    st.caption("What-if values; the baseline is the default config. '(model)' marks values the sources "
               "do not give.")
    values = {spec.name: _control(spec, f"{KEY}.{name}.cfg.{spec.name}") for spec in m.field_specs()}

try:
    config = m.config_type(**values)
except RegimeDashError as exc:
    st.error(f"Config rejected: {markdown_literal(exc)}")
    state.publish()
    st.stop()

try:
    base = cache.module_replay(name, seed, steps, m.config_type().as_dict(), engine)
    what_if = cache.module_replay(name, seed, steps, config.as_dict(), engine)
except RegimeDashError as exc:
    st.error(f"Replay failed: {markdown_literal(exc)}")
    state.publish()
    st.stop()

# only the open tab is built (a rerun when another is opened), and the checks table only when
# its expander is opened: a new page load then sends no table, whose script the browser would
# otherwise load and start before drawing the first chart
tab_run, tab_sweep, tab_slots = st.tabs(["Replay", "Sweep", "Slots"], key=f"{KEY}.tabs", on_change="rerun")
if tab_run.open:
    with tab_run:
        frame = what_if["frame"]
        st.caption(f"{len(frame):,} steps on {engine}, {what_if['seconds'] * 1000:.1f} ms.")
        metrics = list(what_if["summary"].items())
        cols = st.columns(4)
        for i, (k, v) in enumerate(metrics):
            b = base["summary"].get(k, float("nan"))
            delta = v - b if math.isfinite(v) and math.isfinite(b) and v != b else None
            cols[i % 4].metric(k.replace("_", " "), f"{v:.4g}", f"{delta:+.3g}" if delta is not None else None,
                               delta_color="off")
        failed = [c["id"] for c in what_if["checks"] if c["status"] == "fail"]
        (st.error if failed else st.success)(f"{len(failed)} of {len(what_if['checks'])} checks fail"
                                             + (f": {', '.join(failed)}" if failed else ""))
        for cid in (c for c in failed if c in m.demo_failures):
            st.info(f"{cid} fails {m.demo_failures[cid]}", icon="ℹ️")
        checks = widgets.lazy_expander("Every check, beside the baseline's", f"{KEY}.checks.open")
        if checks is not None:
            with checks:
                st.dataframe(_checks_table(what_if["checks"], base["checks"]), hide_index=True, key=f"{KEY}.checks")
        changed = config != m.config_type()
        for i, fig in enumerate(m.figures(frame, base["frame"] if changed else None)):
            widgets.plotly_chart(fig, f"{KEY}.fig.{i}")
        with st.expander("Download the replay"):
            widgets.download_view(f"{KEY}.download", lambda f=frame: f, f"regime-dash-{name}")

if tab_sweep.open:
    with tab_sweep:
        numeric = [s for s in m.field_specs() if s.kind != "bool"]
        s1, s2, s3, s4 = st.columns(4)
        field = s1.selectbox("Field", [s.name for s in numeric], key=f"{KEY}.{name}.sweep.field")
        spec = next(s for s in numeric if s.name == field)
        lo = s2.number_input("from", float(spec.lo), float(spec.hi), float(spec.lo), format="%g",
                             key=f"{KEY}.{name}.sweep.lo.{field}")
        hi = s3.number_input("to", float(spec.lo), float(spec.hi), float(spec.hi), format="%g",
                             key=f"{KEY}.{name}.sweep.hi.{field}")
        n = int(s4.number_input("values", 2, 50, 5, key=f"{KEY}.{name}.sweep.n"))
        run_key = f"{KEY}.{name}.sweep.run"
        # The button is True for one run only: the last sweep lives under the button's key + ".result",
        # so a later rerun (another metric, a slider) keeps its table until "Run sweep" is pressed again.
        result_key = f"{run_key}.result"
        if st.button("Run sweep", key=run_key):
            import numpy as np

            grid = np.linspace(lo, hi, n)
            grid = tuple(sorted({int(round(v)) for v in grid})) if spec.kind == "int" else tuple(float(v) for v in grid)
            try:
                table = cache.module_sweep(name, seed, steps, field, grid, config.as_dict(), engine)
            except RegimeDashError as exc:
                st.session_state.pop(result_key, None)
                st.error(f"Sweep rejected: {markdown_literal(exc)}")
            else:
                st.session_state[result_key] = {"field": field, "table": table, "config": config.as_dict()}
        last = st.session_state.get(result_key)
        if last is not None:
            swept, table = last["field"], last["table"]
            if last["config"] != config.as_dict() or swept != field:
                st.caption(f"The last sweep ({swept}), made with the config then set; press Run sweep to redo it.")
            st.dataframe(table, hide_index=True, key=f"{KEY}.sweep.table")
            with st.expander("Download the sweep table"):
                widgets.download_view(f"{KEY}.sweep.download", lambda t=table: t, f"regime-dash-{name}-sweep")
            metric = st.selectbox("Metric", [c for c in table.columns if c != swept],
                                  key=f"{KEY}.{name}.sweep.metric")
            import plotly.express as px

            widgets.plotly_chart(px.line(table, x=swept, y=metric, markers=True), f"{KEY}.sweep.chart")

if tab_slots.open:
    with tab_slots:
        table = pd.DataFrame([{"index": s.index, "name": s.name, "role": s.role, "bootstrap": s.bootstrap,
                               "policy": s.policy, "producer": s.producer, "consumers": ", ".join(s.consumers),
                               "doc": s.doc} for s in m.slots])
        if table.empty:
            st.info("This module keeps its state outside the ISV (host-side buffers).")
        else:
            orphans = orphan_slots(m.slots)
            table.insert(2, "orphan", table["name"].isin(orphans))
            if orphans:
                st.warning("Consumers but no producer (read, never written: stuck at the bootstrap): "
                           + ", ".join(orphans))
            st.dataframe(table, hide_index=True, key=f"{KEY}.slots")
state.publish()

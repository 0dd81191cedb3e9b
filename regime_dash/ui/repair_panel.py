"""The "Find a passing config" action of Replay and Explore: the repair search, its candidates, "apply".

:func:`repair_panel` (Replay) searches the config that would have passed on the page's
stream, around the what-if config (:func:`regime_dash.usecases.repair.repair_stream`), with a
progress bar; its candidates table has an "Apply" button per candidate that sets the
what-if sliders (the widgets of :func:`regime_dash.ui.widgets.config_controls` under
``whatif_key``) to it, so the chart and the verdict below show the run under it. The
search's settings (fields, trials, seed) are in the URL (``repair_fields``,
``repair_trials``, ``repair_seed``) like the rest of the view.

:func:`run_repair_panel` (Explore) judges a stored run first
(:func:`regime_dash.usecases.repair.repair_stored`): a failure config cannot help is named; a
run whose failures config may repair needs its input stream, which a diag does not
hold, so the panel says to replay the run's stream on the Replay page.

The result stays in ``st.session_state[key + '.result']`` beside what it was computed
for: reruns cost nothing, and a changed stream or what-if config asks for a new search.
"""
from __future__ import annotations

from typing import Any, Mapping

import streamlit as st

from regime_dash.core.config import SWITCHES, RegimeConfig
from regime_dash.errors import RegimeDashError
from regime_dash.text import markdown_literal
from regime_dash.ui import cache, state

#: Each stage's share of the progress bar.
STAGES = {"screen": (0.0, 0.15), "search": (0.15, 0.6), "prune": (0.6, 0.65), "verify": (0.65, 1.0)}
#: The trials a search from the page tries unless the URL says otherwise.
TRIALS = 128


def slider_values(config: RegimeConfig, whatif_key: str) -> dict[str, Any]:
    """``{widget key: value}`` that puts the what-if sliders under ``whatif_key`` at ``config``
    (a number clamped into its slider's domain, which the search's candidates lie in)."""
    out: dict[str, Any] = {}
    for name in SWITCHES:
        out[f"{whatif_key}.{name}"] = bool(getattr(config, name))
    for name in RegimeConfig.numeric_specs():
        lo, hi, _ = RegimeConfig.domain(name)
        out[f"{whatif_key}.{name}"] = float(min(max(getattr(config, name), lo), hi))
    return out


def _apply(values: Mapping[str, Any]) -> None:
    """The "Apply" button's callback: runs before the next run draws the sliders, which then show ``values``."""
    for k, v in values.items():
        st.session_state[k] = v


def _progress_bar():
    bar = st.progress(0.0, text="repair: starting")

    def report(stage: str, done: int, total: int) -> None:
        lo, hi = STAGES.get(stage, (0.0, 1.0))
        frac = lo + (hi - lo) * (done / total if total else 1.0)
        bar.progress(min(max(frac, 0.0), 1.0), text=f"repair: {stage} {done}/{total}")

    return bar, report


def _settings(key: str) -> dict[str, Any]:
    """The search's settings, kept in the URL: the fields (none: every field that moves), trials, seed."""
    names = RegimeConfig.field_names()
    cols = st.columns([3, 1, 1])
    state.restore(f"{key}.fields", "repair_fields", "list", [], options=names)
    fields = cols[0].multiselect("Fields to search (none: every field that moves)", names, key=f"{key}.fields")
    state.restore(f"{key}.trials", "repair_trials", "int", TRIALS, valid=lambda v: 1 <= v <= 100_000)
    trials = cols[1].number_input("Trials", 1, 100_000, step=16, key=f"{key}.trials")
    state.restore(f"{key}.seed", "repair_seed", "int", 0, valid=lambda v: v >= 0)
    seed = cols[2].number_input("Seed", 0, 2**31 - 1, step=1, key=f"{key}.seed")
    return {"fields": list(fields) or None, "trials": int(trials), "seed": int(seed)}


def repair_panel(key: str, source_key: str, stream: Any, base: RegimeConfig | None,
                 whatif_key: str = "replay.whatif") -> None:
    """Replay's "Find a passing config": the search around ``base`` (the what-if config) on the page's
    stream, then the candidates, each with an "Apply" button that sets the what-if sliders.

    Keys: ``{key}.fields``, ``{key}.trials``, ``{key}.seed`` (in the URL), ``{key}.run`` (the button),
    ``{key}.result``, ``{key}.apply.{rank}``.
    """
    from regime_dash.usecases.repair import repair_stream

    if base is None:
        st.info("The what-if config is rejected; fix it to search for a passing config.")
        return
    settings = _settings(key)
    ident = (source_key, tuple(base.as_dict().items()), tuple(settings["fields"] or ()), settings["trials"],
             settings["seed"])
    if st.button("Find a passing config", key=f"{key}.run", type="primary"):
        bar, report = _progress_bar()
        try:
            result = repair_stream(cache.full_stream(source_key, stream), base, progress=report, **settings)
        except RegimeDashError as exc:
            bar.empty()
            st.error(f"The search failed: {markdown_literal(exc)}")
            return
        bar.progress(1.0, text=f"repair: {result.status} in {result.seconds.get('total', 0.0):.1f} s")
        st.session_state[f"{key}.result"] = (ident, result)
    result = current(key, ident)
    if result is not None:
        show_result(key, result, whatif_key)


def current(key: str, ident: Any) -> Any:
    """The last search's result if it was made for ``ident``; else None, with a caption saying what to do."""
    made_for, result = st.session_state.get(f"{key}.result", (None, None))
    if result is not None and made_for == ident:
        return result
    st.caption("Press Find a passing config." if result is None else
               "The stream, the what-if config or the settings changed since the last search: press it again.")
    return None


def show_result(key: str, result: Any, whatif_key: str | None = None) -> None:
    """A repair's answer, its failures and its candidates (with "Apply" buttons where ``whatif_key`` is given)."""
    say = {"passing": st.success, "already_passes": st.success, "needs_stream": st.warning}.get(result.status,
                                                                                                  st.error)
    say(markdown_literal(result.message))
    for f in result.failures:
        st.markdown(f"- **{markdown_literal(f.id)}** ({f.kind}, {f.cause}): {markdown_literal(f.why)}")
    if not result.candidates:
        return
    st.dataframe(result.table(), hide_index=True, key=f"{key}.table")
    if whatif_key is None:
        return
    st.caption("Apply a candidate to the what-if sliders: the chart and the verdict show the run under it.")
    cols = st.columns(min(len(result.candidates), 5))
    for rank, c in enumerate(result.candidates, 1):
        cols[(rank - 1) % len(cols)].button(
            f"Apply #{rank}" + (" (passes)" if c.passing else ""), key=f"{key}.apply.{rank}",
            on_click=_apply, args=(slider_values(c.config, whatif_key),), help=c.changes_text())


def run_repair_panel(key: str, run_key: str, frame: Any) -> None:
    """Explore's "Find a passing config" for a stored run (``run_key`` names it): the run judged, a failure
    config cannot help named, and where config may help, what the search needs (the run's stream)."""
    from regime_dash.usecases.repair import repair_stored

    if st.button("Find a passing config", key=f"{key}.run"):
        try:
            st.session_state[f"{key}.result"] = (run_key, repair_stored(frame))
        except RegimeDashError as exc:
            st.error(f"The search failed: {markdown_literal(exc)}")
            return
    stored = st.session_state.get(f"{key}.result")
    if stored is None or stored[0] != run_key:
        return
    show_result(key, stored[1])
    if stored[1].status == "needs_stream":
        st.caption("Open the Replay page with the run's recorded stream (upload it there) and press "
                   "Find a passing config on its Repair tab: the search replays that stream.")


__all__ = ["TRIALS", "current", "repair_panel", "run_repair_panel", "show_result", "slider_values"]

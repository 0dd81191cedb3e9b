"""The verdict strip above Explore's charts: per run, checks by status, the first failure and the findings.

Each item is a button that moves the step window to where it happens (a step,
or a whole stretch such as a Kelly trap). The verdict is the one
:func:`regime_dash.analysis.verdict` gives, the same ``check`` prints.
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
import streamlit as st

from regime_dash.text import markdown_literal
from regime_dash.ui.widgets import jump_to_step

_ICON = {"fail": ":material/cancel:", "warn": ":material/warning:", "info": ":material/info:",
         "pass": ":material/check_circle:", "skip": ":material/block:"}


def _jump_span(key: str, a: int, b: int, lo: int, hi: int) -> None:
    """Callback: show the stretch ``[a, b]`` with a margin of a tenth of its length on each side."""
    pad = max(10, (b - a) // 10)
    st.session_state[key] = (max(lo, a - pad), min(hi, b + pad))


def _button(label: str, key: str, window: str, steps: list[int], spans: list, lo: int, hi: int) -> None:
    if spans:
        a, b = (int(v) for v in spans[0])
        st.button(label, key=key, on_click=_jump_span, args=(window, a, b, lo, hi))
    elif steps:
        st.button(label, key=key, on_click=jump_to_step, args=(window, int(steps[0]), lo, hi))
    else:
        st.markdown(label)


def verdict_strip(key: str, results: Mapping[str, Any], window: str, frames: Mapping[str, pd.DataFrame]) -> None:
    """One row per run: counts by status, the first failure and every finding, each a jump button.

    ``results`` holds each run's :class:`regime_dash.analysis.Report` (or anything with ``.verdict``).
    """
    for label, res in results.items():
        vd = res.verdict
        f = frames[label]
        lo, hi = int(f["step"].min()), int(f["step"].max())
        counts = vd.counts
        head = " · ".join(f"{_ICON[s]} {counts.get(s, 0)} {s}" for s in ("fail", "warn", "pass", "skip"))
        st.markdown(f"**{markdown_literal(label)}** — verdict **{vd.status.upper()}** — {head} — {len(vd.findings)} finding(s)")
        items: list[tuple[str, list[int], list]] = []
        first = vd.first_failure
        if first is not None:
            items.append((f"{_ICON['fail']} first failure: {first.id} @ {first.first_step}", first.steps,
                          first.spans))
        for c in vd.checks:
            if c.status == "warn":
                items.append((f"{_ICON['warn']} {c.id} @ {c.first_step}", c.steps, c.spans))
        for fd in vd.findings:
            where = f"{fd.spans[0][0]}–{fd.spans[0][1]}" if fd.spans else (str(fd.steps[0]) if fd.steps else "")
            items.append((f"{_ICON.get(fd.severity, '')} {fd.id} @ {where}", fd.steps, fd.spans))
        if not items:
            continue
        cols = st.columns(min(len(items), 4))
        for i, (text, steps, spans) in enumerate(items):
            with cols[i % len(cols)]:
                _button(text, f"{key}.{label}.{i}", window, list(steps), list(spans), lo, hi)
        for fd in vd.findings:
            if fd.severity != "info":
                st.caption(f"{fd.id}: {markdown_literal(fd.message)}")  # a message names columns and values

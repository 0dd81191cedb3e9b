"""Reusable dashboard widgets. Each one owns the session-state keys it is given.

Widgets read input and return values; they call no core code beyond what
they need to label themselves (the engine probe, the config field list).
"""
from __future__ import annotations

import io
from dataclasses import fields
from typing import Any, Mapping, Sequence

import pandas as pd
import streamlit as st

from regime_dash.config import SWITCHES, RegimeConfig

#: Slider domain of every numeric RegimeConfig field: (min, max, step).
#: The domains are ours (the spec gives defaults, not ranges): wide enough to
#: show each mechanism switched off or exaggerated, within RegimeConfig's checks.
FIELD_RANGES: dict[str, tuple[float, float, float]] = {
    "max_duration": (0.0, 5000.0, 10.0),
    "eps_min": (0.0, 1.0, 0.01),
    "eps_max": (0.0, 1.0, 0.01),
    "n_recovery": (0.0, 2000.0, 10.0),
    "tau_boost_factor": (1.0, 5.0, 0.05),
    "tau_boost_window": (0.0, 2000.0, 10.0),
    "tail_sigma_threshold": (0.5, 10.0, 0.1),
    "envelope_decay_alpha": (0.001, 1.0, 0.001),
    "popart_alpha": (0.0001, 0.1, 0.0001),
    "transition_steps": (0.0, 5000.0, 10.0),
    "transition_decay_steps": (0.0, 5000.0, 10.0),
    "safety_frac_defensive": (0.0, 1.0, 0.01),
    "safety_frac_normal": (0.0, 1.0, 0.01),
    "tau_min": (0.0, 1.0, 0.01),
    "kelly_cap": (0.05, 2.0, 0.05),
}
#: The spec's feature numbers of the switches.
SWITCH_LABELS = {"resurrection": "F2 Kelly resurrection", "envelope": "F4 PopArt σ envelope",
                 "tau_boost": "F5 IQN τ tail boost"}
ENGINE_CHOICES = ("auto", "reference", "fast", "cuda")


def numeric_fields() -> list[str]:
    """RegimeConfig's numeric fields (the ones with a slider), in declaration order."""
    return [f.name for f in fields(RegimeConfig) if f.name not in SWITCHES]


def config_controls(key: str, base: RegimeConfig | None = None) -> dict[str, Any]:
    """A slider for every numeric config field and a toggle for F2, F4 and F5.

    Returns the chosen values as a dict (not yet a :class:`RegimeConfig`, so
    the page can show a :class:`~regime_dash.errors.ConfigError` such as
    ε_min > ε_max instead of failing inside the widget). Keys are
    ``f"{key}.{field}"``.
    """
    base = base or RegimeConfig()
    out: dict[str, Any] = {}
    cols = st.columns(3)
    for name in SWITCHES:
        out[name] = cols[SWITCHES.index(name)].toggle(SWITCH_LABELS[name], value=getattr(base, name),
                                                       key=f"{key}.{name}")
    names = numeric_fields()
    cols = st.columns(3)
    for i, name in enumerate(names):
        lo, hi, step = FIELD_RANGES[name]
        value = float(min(max(getattr(base, name), lo), hi))
        out[name] = cols[i % 3].slider(name, min_value=lo, max_value=hi, value=value, step=step,
                                       key=f"{key}.{name}", format="%g")
    return out


def engine_picker(key: str, status: Mapping[str, str | None]) -> str:
    """Engine choice; engines that cannot run here are labelled with the reason."""
    def label(name: str) -> str:
        if name == "auto":
            ok = [n for n in ("fast", "cuda", "reference") if status.get(n) is None]
            return f"auto (→ {ok[0]})" if ok else "auto (no engine available)"
        reason = status.get(name, "unknown engine")
        return name if reason is None else f"{name} — unavailable: {reason[:80]}"

    return st.selectbox("Engine", ENGINE_CHOICES, format_func=label, key=key)


def run_picker(key: str, runs: pd.DataFrame, *, multi: bool = True, default: int = 1,
               label: str = "Runs") -> list[str]:
    """Pick stored runs by name; returns run ids in the order picked."""
    if runs.empty:
        return []
    ids = list(runs["run_id"])
    names = dict(zip(runs["run_id"], runs["name"]))
    fmt = lambda rid: f"{names.get(rid, rid)} · {rid[-6:]}"  # noqa: E731
    if multi:
        return list(st.multiselect(label, ids, default=ids[:default], format_func=fmt, key=key))
    picked = st.selectbox(label, ids, format_func=fmt, key=key)
    return [picked] if picked else []


def x_axis_picker(key: str, frames: Sequence[pd.DataFrame]) -> str:
    """``step`` or ``wall_time``; wall time only when every frame has it."""
    options = ["step"]
    if frames and all("wall_time" in f.columns and f["wall_time"].notna().any() for f in frames):
        options.append("wall_time")
    return st.radio("x axis", options, horizontal=True, key=key)


def smoothing_slider(key: str) -> float:
    """TensorBoard-style smoothing weight in [0, 0.999]."""
    return st.slider("Smoothing (debiased EMA; flags and counters stay raw)", 0.0, 0.999, 0.0,
                     step=0.001, format="%.3f", key=key)


def alias_editor(key: str) -> dict[str, tuple[str, ...]]:
    """Edit the user's alias table: rows of ``canonical`` and ``alternatives`` (comma separated).

    The table lives in ``st.session_state[key]``; returns ``{canonical: (alt, ...)}``.
    """
    from regime_dash.aliases import normalize_user_aliases

    if key not in st.session_state:
        st.session_state[key] = pd.DataFrame({"canonical": pd.Series(dtype=str),
                                              "alternatives": pd.Series(dtype=str)})
    edited = st.data_editor(st.session_state[key], num_rows="dynamic", key=f"{key}.editor",
                            column_config={"canonical": st.column_config.TextColumn(
                                               "canonical column", help="e.g. risk_stack.kelly.fraction"),
                                           "alternatives": st.column_config.TextColumn(
                                               "names in your file", help="comma separated")},
                            hide_index=True)
    user: dict[str, list[str]] = {}
    for _, row in edited.iterrows():
        canonical = str(row.get("canonical") or "").strip()
        alts = [a.strip() for a in str(row.get("alternatives") or "").split(",") if a.strip()]
        if canonical and alts:
            user.setdefault(canonical, []).extend(alts)
    return normalize_user_aliases(user)


def download_view(key: str, frame: pd.DataFrame, stem: str) -> None:
    """CSV and Parquet downloads of ``frame`` (the current view)."""
    c1, c2 = st.columns(2)
    c1.download_button("Download view as CSV", frame.to_csv(index=False).encode(), f"{stem}.csv",
                       "text/csv", key=f"{key}.csv")
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    c2.download_button("Download view as Parquet", buf.getvalue(), f"{stem}.parquet",
                       "application/vnd.apache.parquet", key=f"{key}.parquet")


def plotly_chart(fig, key: str, **kwargs):
    """``st.plotly_chart`` with the dashboard's defaults (full width, scroll zoom)."""
    return st.plotly_chart(fig, key=key, config={"scrollZoom": True, "displaylogo": False}, **kwargs)


# ---- ingest reports (Runs page) ---------------------------------------------------
_REPORTS = "runs.reports"


def ingest_reports() -> dict[str, Any]:
    """``{upload id: report}`` of this session's ingests (owned by the Runs page's report panel)."""
    return st.session_state.setdefault(_REPORTS, {})


def record_ingest(upload_id: str, name: str, result: Any) -> None:
    """Remember one ingest's result (or the error it raised) for :func:`ingest_report_panel`."""
    ingest_reports()[upload_id] = (name, result)


def ingest_report_panel() -> None:
    """One expander per ingest of this session: rows, rejected lines, columns and step range."""
    for upload_id, (name, result) in reversed(list(ingest_reports().items())):
        if isinstance(result, Exception):
            st.error(f"{name}: not ingested — {result}")
            continue
        rejected = list(getattr(result, "rejected", []) or [])
        dup = getattr(result, "duplicate_of", None)
        head = (f"{name}: {result.rows:,} rows, {len(rejected):,} rejected, "
                f"{len(result.columns):,} columns, steps {result.first_step}…{result.last_step}")
        with st.expander(head + (" (already stored)" if dup else ""), expanded=bool(rejected)):
            if dup:
                st.info(f"Same bytes as stored run {dup}; no new run was made.")
            if rejected:
                st.markdown(f"**Rejected lines** ({len(rejected):,})")
                st.dataframe(pd.DataFrame([dict(r) if isinstance(r, Mapping) else vars(r) for r in rejected]),
                             hide_index=True, key=f"{_REPORTS}.{upload_id}.rejects")
            st.markdown("**Columns**: " + ", ".join(f"`{c}`" for c in result.columns))


def delete_run_control(key: str, store, runs: pd.DataFrame) -> str | None:
    """Pick a run and delete it after a confirmation tick; returns the deleted id."""
    with st.expander("Delete a run"):
        names = dict(zip(runs["run_id"], runs["name"]))
        rid = st.selectbox("Run", list(runs["run_id"]), format_func=lambda r: f"{names[r]} · {r[-6:]}",
                           key=f"{key}.run")
        sure = st.checkbox("Yes, delete it from the store", key=f"{key}.sure")
        if st.button("Delete", disabled=not sure, key=f"{key}.go"):
            store.delete(rid)
            st.toast(f"deleted {names[rid]}")
            st.rerun()
    return None


# ---- Explore and Compare -----------------------------------------------------------
def page_path(file: str) -> str:
    """The path ``st.page_link`` needs for one of our pages (as navigation registers it)."""
    from regime_dash.ui.navigation import PAGES_DIR

    return str(PAGES_DIR / file)


def alias_key(aliases: Mapping[str, Sequence[str]]) -> tuple:
    """A hashable, order-independent form of a user alias table (for cache keys)."""
    return tuple(sorted((k, tuple(v)) for k, v in aliases.items()))


def run_labels(runs: pd.DataFrame, run_ids: Sequence[str]) -> dict[str, str]:
    """``{run_id: label}``: the run name, with the id's start where two names are equal."""
    names = dict(zip(runs["run_id"], runs["name"]))
    picked = [names.get(r, r) for r in run_ids]
    return {r: (n if picked.count(n) == 1 else f"{n} ({r[-6:]})") for r, n in zip(run_ids, picked)}


def window_key(prefix: str, run_ids: Sequence[str]) -> str:
    """Session key of the step-window slider for this set of runs (a new set gets a fresh window)."""
    import hashlib

    return f"{prefix}.{hashlib.sha1('|'.join(run_ids).encode()).hexdigest()[:12]}"


def window_slider(key: str, frames: Sequence[pd.DataFrame]) -> tuple[int, int]:
    """Step window ``(lo, hi)`` over the union of the frames' step ranges."""
    steps = [f["step"] for f in frames if len(f)]
    if not steps:
        return 0, 0
    lo = int(min(s.min() for s in steps))
    hi = int(max(s.max() for s in steps))
    if lo == hi:
        return lo, hi
    cur = st.session_state.get(key)
    if cur is None or not (lo <= cur[0] <= cur[1] <= hi):
        st.session_state[key] = (lo, hi)
    value = st.slider("Steps in view", lo, hi, key=key)
    return int(value[0]), int(value[1])


def jump_to_step(key: str, step: int, lo: int, hi: int) -> None:
    """Callback: centre the window of ``key`` on ``step`` (about 2 % of the run, at least 100 steps)."""
    half = max(50, (hi - lo) // 100)
    st.session_state[key] = (max(lo, int(step) - half), min(hi, int(step) + half))


def _tables(key: str, results: Mapping[str, Mapping], part: str) -> None:
    for label, res in results.items():
        tables = res[part]
        st.markdown(f"**{label}**")
        shown = False
        for name, table in tables.items():
            st.caption(f"{name.replace('_', ' ')}: {len(table)}")
            if len(table):
                st.dataframe(table, hide_index=True, key=f"{key}.{label}.{name}", height=min(35 * (len(table) + 1) + 3, 300))
            shown = True
        if not shown:
            st.caption("none")
        for name, why in res["skipped"].items():
            if (part == "episodes") == (name == "dead_zone"):
                st.caption(f"{name}: not found — {why}")


def episode_tables(key: str, results: Mapping[str, Mapping]) -> None:
    """Dead-zone episodes of each run (``results`` from :func:`regime_dash.ui.cache.analyse_run`)."""
    _tables(key, results, "episodes")


def event_tables(key: str, results: Mapping[str, Mapping]) -> None:
    """Tail events, timeouts, floor spans, transitions and boundaries of each run."""
    _tables(key, results, "events")


STATUS_ICON = {"pass": "✅", "fail": "❌", "skip": "⏭️"}


def invariant_report(key: str, results: Mapping[str, Mapping], window: str,
                     frames: Mapping[str, pd.DataFrame]) -> None:
    """The invariant checks of each run; each violation's step is a button that moves the window there."""
    for label, res in results.items():
        checks = res["checks"]
        counts = {s: sum(c["status"] == s for c in checks) for s in STATUS_ICON}
        st.markdown(f"**{label}** — {counts['pass']} pass, {counts['fail']} fail, {counts['skip']} skip")
        st.dataframe(pd.DataFrame([{"": STATUS_ICON[c["status"]], "check": c["id"], "status": c["status"],
                                    "violations": c["violations"], "first step": c["first_step"],
                                    "detail": c["detail"]} for c in checks]),
                     hide_index=True, key=f"{key}.{label}.table")
        f = frames[label]
        lo, hi = int(f["step"].min()), int(f["step"].max())
        for c in checks:
            if c["status"] != "fail":
                continue
            st.markdown(f"❌ `{c['id']}`: {c['violations']} violation(s) — jump to step:")
            cols = st.columns(min(len(c["steps"]), 8) or 1)
            for i, s in enumerate(c["steps"][:8]):
                cols[i].button(str(s), key=f"{key}.{label}.{c['id']}.{s}", on_click=jump_to_step,
                               args=(window, s, lo, hi))

"""Cached loaders of the dashboard: the store, run frames, replays and figures.

``st.cache_resource`` holds things that are shared and not copied (the store,
the engine probe, a prepared stream (its phase 1 held) and its replays, whose frames are too big to copy
on every hit); ``st.cache_data`` holds values (stored runs' frames, figures).
What is read from a stored run is keyed on its content version
(:func:`run_version`, one small file read): a followed run changes with each commit. Arguments whose name starts with ``_`` are not hashed; the key
that stands for them is passed beside them.
"""
from __future__ import annotations

import os
from typing import Any

import pandas as pd
import streamlit as st

from regime_dash.core.config import RegimeConfig
from regime_dash.core.streams import Stream

#: Environment variable naming the store directory (tests point it at a tmp dir).
STORE_ENV = "REGIME_DASH_STORE"
DEFAULT_STORE = "data/store"


def store_root() -> str:
    """The store directory: ``$REGIME_DASH_STORE`` or ``data/store``."""
    return os.environ.get(STORE_ENV) or DEFAULT_STORE


@st.cache_resource(show_spinner=False, max_entries=8)
def _store(root: str):
    from regime_dash.store.open import open_store

    return open_store(root)


def get_store():
    """The run store at :func:`store_root` (one instance per directory and process)."""
    return _store(store_root())


def run_version(root: str, run_id: str) -> str:
    """The stored run's content version (:meth:`regime_dash.store.run_store.RunStore.content_version`): every
    cache of what is read from a run keys on it, so a followed run's commits are read, and a page opened after
    the follow ended reads the whole run."""
    return _store(root).content_version(run_id)


#: Versions of one run a version-keyed cache keeps. A followed run gets a new version at every commit
#: (each second) and the pages ask for the newest only, so without this each commit would add a
#: whole-run entry until ``max_entries`` (the server grew by hundreds of MB over a live follow); two,
#: not one, so two tabs a commit apart do not evict each other's.
VERSIONS_KEPT = 2
#: Runs whose versions are tracked at once (the oldest forgotten first; its entries age out by count).
RUNS_TRACKED = 256


@st.cache_resource(show_spinner=False)
def _versions() -> dict[str, Any]:
    import threading

    return {"lock": threading.Lock(), "seen": {}}


def keep_recent(cached, run: tuple, args: tuple) -> None:
    """Note that ``cached(*args)`` (a cached function's entry of the run ``run``, at the version that ends
    ``args``) is asked for now, and clear ``cached``'s entries of that run's versions older than the newest
    :data:`VERSIONS_KEPT` (the cached functions' public ``clear(*args)``)."""
    box = _versions()
    with box["lock"]:
        key = (id(cached), run)
        seen = box["seen"].pop(key, [])
        box["seen"][key] = seen  # most recent last
        while len(box["seen"]) > RUNS_TRACKED:
            box["seen"].pop(next(iter(box["seen"])))
        if args in seen:
            return
        seen.append(args)
        stale, seen[:] = seen[:-VERSIONS_KEPT], seen[-VERSIONS_KEPT:]
    for old in stale:
        cached.clear(*old)


def load_run(root: str, run_id: str, aliases: tuple = (), version: str = "") -> pd.DataFrame:
    """A stored run as a frame with canonical column names (``aliases`` as ``((canonical, (alt, ...)), ...)``),
    cached on the run's :func:`run_version` (``version``, when the caller has read it; the newest
    :data:`VERSIONS_KEPT` versions of a run are kept).

    Rows without a whole-number step are left out (``attrs["rows_without_step"]`` counts them, the page
    says so); a file without a step field is drawn against its line order (``attrs["step_from_row"]``)."""
    args = (root, run_id, aliases, version or run_version(root, run_id))
    keep_recent(_load_run, args[:3], args)
    return _load_run(*args)


@st.cache_data(show_spinner=False, max_entries=32)
def _load_run(root: str, run_id: str, aliases: tuple, version: str) -> pd.DataFrame:
    from regime_dash.follow.live_frame import read_whole

    return read_whole(_store(root), run_id, dict(aliases) or None)  # slots as float32


@st.cache_resource(show_spinner=False)
def _live_frames() -> dict[str, Any]:
    import threading

    return {"lock": threading.Lock(), "held": {}}


#: Live runs held at once per process (a run no longer live is read the usual way, cached by value).
LIVE_HELD = 8


def live_run(root: str, run_id: str, aliases: tuple = (), version: str = "") -> pd.DataFrame:
    """A run a follower is writing, held across reruns and grown by each commit's rows only
    (:class:`regime_dash.follow.live_frame.LiveFrame`): a redraw each second costs the new rows, not the run.

    ``version`` is the run's commit (the store's ``follow_status()``): the store is
    read only when it changed. The frame returned is the one held: callers must not change it."""
    from regime_dash.follow.live_frame import LiveFrame

    box = _live_frames()
    key = f"{root}|{run_id}|{aliases!r}"
    with box["lock"]:
        held = box["held"].pop(key, None)
        if held is None:
            held = {"frame": LiveFrame(_store(root), run_id, dict(aliases) or None), "version": None}
        box["held"][key] = held  # most recent last: the oldest goes first
        while len(box["held"]) > LIVE_HELD:
            box["held"].pop(next(iter(box["held"])))
        if held["version"] != version:
            held["frame"].refresh()
            held["version"] = version
        return held["frame"].frame


def analyse_run(root: str, run_id: str, aliases: tuple = (), single_id: str | None = None):
    """:func:`regime_dash.analysis.diagnose` of a stored run: checks, episodes, events, summary (cached on
    the run's :func:`run_version`, and the single path's run's).

    ``single_id``: for a run of the fused controller path, the stored run of the single path on the
    same inputs (finding ``fused_mirror_drift``).
    """
    single = None if single_id is None else (single_id, run_version(root, single_id))
    args = (root, run_id, aliases, single, run_version(root, run_id))
    keep_recent(_analysed, args[:3], args)  # the twin's version is part of the run's: a new one is stale too
    return _analysed(*args)


@st.cache_data(show_spinner=False, max_entries=32)
def _analysed(root: str, run_id: str, aliases: tuple, single: tuple | None, version: str):
    from regime_dash.usecases.check import check_frame

    warm_rederivation()  # a failure of this verdict clicked on re-derives on the compiled loop
    twin = None if single is None else load_run(root, single[0], aliases, single[1])
    return check_frame(load_run(root, run_id, aliases, version), single=twin)


def explanation(root: str, run_id: str, aliases: tuple, item_id: str, step: int, _frame: pd.DataFrame,
                _verdict):
    """:func:`regime_dash.analysis.failures.explain` of the verdict item ``item_id`` of a stored run at
    ``step`` (``None`` when the run's verdict has no such item); ``_frame`` and ``_verdict`` are that
    run's :func:`load_run` and :func:`analyse_run` verdict, which the first five arguments and the run's
    :func:`run_version` name."""
    return _explanation(root, run_id, aliases, item_id, step, run_version(root, run_id), _frame, _verdict)


@st.cache_data(show_spinner=False, max_entries=64)
def _explanation(root: str, run_id: str, aliases: tuple, item_id: str, step: int, version: str,
                 _frame: pd.DataFrame, _verdict):
    from regime_dash.analysis.failures import explain, find_item

    item = find_item(_verdict, item_id)
    return None if item is None else explain(_frame, item, step)


@st.cache_resource(show_spinner=False)
def warm_rederivation() -> dict[str, Any]:
    """:func:`regime_dash.usecases.warmup.warm_rederivation`, once per process (the app calls it when it
    opens, and a verdict's computation again, which does nothing more): ``{"thread", "error"}``."""
    from regime_dash.usecases.warmup import warm_rederivation as start

    return start()


@st.cache_data(show_spinner=False, ttl=60)
def engine_status() -> dict[str, str | None]:
    """``{engine: None | why it cannot run}``; probed once a minute at most."""
    from regime_dash.engine import engine_status as probe

    return probe()


@st.cache_resource(show_spinner=False, max_entries=8)
def prepared(source_key: str, _stream, engine: str, layout_fingerprint: str = "", _layout=None):
    """``_stream`` (identified by ``source_key``) prepared for the page's replays, sweeps and sensitivities on
    ``engine`` (:func:`regime_dash.usecases.replay.prepare_source`): its phase 1 held and shared by every config
    and both controller paths; on the fast engine only its per-step inputs are read (an uploaded file is never
    loaded whole). Read only: not copied on a hit."""
    from regime_dash.usecases.replay import prepare_source

    return prepare_source(_stream if isinstance(_stream, Stream) else _PageFile(source_key, _stream), engine, _layout)


class _PageFile:
    """An uploaded stream file held light, as :func:`prepared` hands it over: its per-step fields and phase 1,
    and its whole stream, where an engine reads the [T, b] arrays, the page's one cached load
    (:func:`full_stream`, shared with a live run of it)."""

    def __init__(self, source_key: str, light):
        self.source_key, self.light = source_key, light
        self.inputs, self.stats = light.inputs, light.stats

    def load(self) -> Stream:
        return full_stream(self.source_key, self.light)


@st.cache_resource(show_spinner=False, max_entries=16)
def replay(source_key: str, _stream, config: dict[str, Any], engine: str, layout_fingerprint: str = "",
           _layout=None, controllers: str = "single") -> dict[str, Any]:
    """A replay of ``_stream`` (identified by ``source_key``) under ``config``, on the controller path
    ``controllers`` (:func:`regime_dash.usecases.replay.what_if` of :func:`prepared`).

    ``_layout`` is the slot layout (the default registry when None), named in
    the cache key by its fingerprint. Returns ``{"frame", "seconds", "engine"}``;
    its summary metrics are :func:`replay_summary` (separate, so a page can draw the
    chart before it pays for them). The cached dict itself, read only (callers must not
    change the frame): a value cache pickles a frame when it stores it and unpickles a copy
    on every hit, at 1,000,000 steps 0.4 s and 0.1–0.7 s, and a what-if move reads the
    baseline and the what-if (and each again for the summary metrics).
    """
    from regime_dash.usecases.replay import what_if

    traj = what_if(prepared(source_key, _stream, engine, layout_fingerprint, _layout), RegimeConfig(**config),
                   controllers)
    return {"frame": traj.frame, "seconds": traj.seconds, "engine": traj.engine}


@st.cache_resource(show_spinner="reading the whole stream file…", max_entries=1)
def _loaded(source_key: str, _source):
    return _source.load()


def full_stream(source_key: str, _stream):
    """The whole :class:`~regime_dash.core.streams.Stream` of a page's source: ``_stream`` itself, or a light file
    source's stream loaded from its file (cached, one at a time) for a live run, which plays the [T, b] arrays."""
    return _stream if isinstance(_stream, Stream) else _loaded(source_key, _stream)


def replay_summary(source_key: str, _stream, config: dict[str, Any], engine: str, layout_fingerprint: str = "",
                   _layout=None, controllers: str = "single") -> dict[str, float]:
    """:func:`regime_dash.engine.summary.summarize_frame` of :func:`replay` with the same arguments
    (the metrics a sweep reports; a step-by-step fold, several times the fast replay's own time)."""
    return _summary(source_key, config, engine, layout_fingerprint,
                    replay(source_key, _stream, config, engine, layout_fingerprint, _layout, controllers)["frame"],
                    controllers)


@st.cache_data(show_spinner=False, max_entries=16)
def mirror_drift(source_key: str, _stream, config: dict[str, Any], engine: str, layout_fingerprint: str = "",
                 _layout=None) -> list[dict]:
    """The finding ``fused_mirror_drift`` of the fused path's :func:`replay` against the single path's
    (both cached), as dicts; empty when they agree bit for bit."""
    from regime_dash.analysis.findings import fused_mirror_drift

    fused = replay(source_key, _stream, config, engine, layout_fingerprint, _layout, "fused")["frame"]
    single = replay(source_key, _stream, config, engine, layout_fingerprint, _layout, "single")["frame"]
    return [f.to_dict() for f in fused_mirror_drift(fused, single)]


@st.cache_data(show_spinner=False, max_entries=64)
def _summary(source_key: str, config: dict[str, Any], engine: str, layout_fingerprint: str,
             _frame: pd.DataFrame, controllers: str = "single") -> dict[str, float]:
    from regime_dash.engine.summary import summarize_frame

    return summarize_frame(_frame)


def signal_figure(key: str, _runs: dict, x: str, smoothing: float, x_range: tuple | None = None,
                  height: int = 1400, x_offsets: tuple = (), run_keys: tuple = (), points: int | None = None):
    """:func:`regime_dash.figures.signals.signal_panels` of ``_runs`` (identified by ``key``).

    ``x_offsets`` is ``((label, step), ...)``: each run drawn against its steps since ``step``.
    ``run_keys`` is ``((label, key), ...)``: a run named there has its traces cached on that
    key (and the figure's other arguments), so a figure that shares a run with one drawn
    before (a what-if chart's baseline) builds only the other runs' traces. ``points`` is the
    points per trace (default :data:`regime_dash.figures.signals.DEFAULT_POINTS`).
    The cache holds the figure's plotly JSON: a cached ``Figure`` object is pickled and
    re-validated on every hit (0.25 s for a two-run figure), its JSON dict is not.
    """
    import plotly.graph_objects as go

    spec = _signal_spec(key, _runs, x, smoothing, x_range, height, x_offsets, run_keys, points)
    return go.Figure(spec, _validate=False)


def signal_spec(key: str, _runs: dict, x: str, smoothing: float, height: int = 1400, x_offsets: tuple = (),
                run_keys: tuple = (), points: int | None = None, colours: tuple = ()) -> dict:
    """:func:`signal_figure` as its plotly JSON dict, for a page that draws it as it is
    (the in-place chart, :mod:`regime_dash.ui.plotly_react`, sends the dict as it is; a ``Figure``
    costs a JSON encoding of its own). ``colours`` is ``((label, colour), ...)``
    (default: :func:`regime_dash.figures.signals.run_colour` of each label)."""
    return _signal_spec(key, _runs, x, smoothing, None, height, x_offsets, run_keys, points, colours)


@st.cache_data(show_spinner=False, max_entries=32)
def _signal_spec(key: str, _runs: dict, x: str, smoothing: float, x_range: tuple | None,
                 height: int, x_offsets: tuple, run_keys: tuple = (), points: int | None = None,
                 colours: tuple = ()) -> dict:
    from regime_dash.figures.signals import DEFAULT_POINTS, run_traces, signal_panels, signal_spec

    keys = dict(run_keys)

    def traces_of(label, frame, colour, **kw) -> list[dict]:
        if label not in keys:
            return run_traces(label, frame, colour, **kw)
        return _run_traces(keys[label], frame, label, colour, tuple(sorted(kw.items())))

    kw = dict(x=x, smoothing=smoothing, height=height, n_out=points or DEFAULT_POINTS,
              x_offsets=dict(x_offsets) or None, traces_of=traces_of, colours=dict(colours) or None)
    if x_range is None:
        return signal_spec(_runs, **kw)
    return signal_panels(_runs, x_range=x_range, **kw).to_plotly_json()


@st.cache_data(show_spinner=False, max_entries=32)
def _run_traces(key: str, _frame: pd.DataFrame, label: str, colour: str, options: tuple) -> list[dict]:
    """:func:`regime_dash.figures.signals.run_traces` of the run ``key`` names (``options`` as ``((name, value), ...)``),
    with the run's memo of the traces the smoothing does not change (:func:`_trace_memo`)."""
    from regime_dash.figures.signals import run_traces

    kw = dict(options)
    fixed = tuple((k, v) for k, v in options if k != "smoothing")
    memo_args = (key, label, colour, fixed)
    keep_recent(_trace_memo, memo_args[1:], memo_args)  # a live run's key moves at every commit
    return run_traces(label, _frame, colour, **kw, memo=_trace_memo(*memo_args))


# few: a memo holds the run's columns whole (up to MEMO_ROWS rows, views that keep the frame's blocks
# alive), so a run drawn under one set of options keeps the memos of its newest VERSIONS_KEPT keys only
@st.cache_resource(show_spinner=False, max_entries=16)
def _trace_memo(key: str, label: str, colour: str, options: tuple) -> dict:
    """The memo :func:`regime_dash.figures.signals.run_traces` keeps for one run under every option but the
    smoothing (a resource, not a copied value: the figure code fills it in place)."""
    return {}


def runs_frame(store) -> pd.DataFrame:
    """The store's runs as a frame (newest first), one row per run; not cached (the list changes)."""
    rows = [dict(r) if isinstance(r, dict) else dict(vars(r)) for r in store.list_runs()]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=["run_id", "name"])
    return frame.reset_index(drop=True)


def sample_files() -> list:
    """The diag files under ``data/samples`` of the checkout (the one-click start)."""
    from regime_dash.sources.samples import SAMPLE_DIR as root

    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir()
                  if p.is_file() and (p.name.endswith(".jsonl") or p.name.endswith(".jsonl.gz")))


@st.cache_resource(show_spinner="building the scenario…", max_entries=16)
def scenario_stream(name: str, seed: int, steps: int | None, accounts: int | None):
    """:func:`regime_dash.sources.scenarios.make` (cached: presets are deterministic in their arguments).

    This and the other streams are cached as resources, read only: a value cache holds a
    pickled copy beside the one a page reads (a 1,000,000-step stream of 128 accounts is a GB)
    and unpickles it again on every rerun of the page."""
    from regime_dash.sources import scenarios

    return scenarios.make(name, seed=seed, steps=steps, accounts=accounts)


@st.cache_resource(show_spinner="running the simulator…", max_entries=8)
def simulator_stream(preset: str, seed: int, steps: int, config: dict[str, Any]):
    """The inputs a closed-loop live run of ``preset`` fed its pipeline (``config``), as a Stream."""
    from regime_dash.sources.simulator import simulate

    return simulate(preset, steps=steps, seed=seed, config=RegimeConfig(**config)).stream()


@st.cache_resource(show_spinner="reading the stream file…", max_entries=4)
def uploaded_stream(digest: str, _data: bytes, suffix: str):
    """A stream file's bytes (``.npz`` or ``.parquet``, named by ``digest``), checked, held light
    (:class:`regime_dash.engine.file_phase1.LightFile`: the per-step fields and phase 1, read block by
    block; :func:`full_stream` loads the rest when something needs it). The file stays in a temporary
    directory that lives as long as the cache entry."""
    import tempfile
    from pathlib import Path

    from regime_dash.engine import file_phase1

    tmp = tempfile.TemporaryDirectory(prefix="regime-dash-stream-")
    path = Path(tmp.name) / f"stream{suffix}"
    path.write_bytes(_data)
    try:
        return file_phase1.open_light(path, owner=tmp)
    except BaseException:
        tmp.cleanup()
        raise


def _pair(root: str, run_a: str, run_b: str) -> tuple[str, str]:
    """Two stored runs' :func:`run_version`, the key of what is cached of the pair."""
    return run_version(root, run_a), run_version(root, run_b)


def diff_runs(root: str, run_a: str, run_b: str, aliases: tuple = ()):
    """:func:`regime_dash.analysis.diff_runs` of two stored runs (canonical columns)."""
    return _diff_runs(root, run_a, run_b, aliases, _pair(root, run_a, run_b))


@st.cache_data(show_spinner=False, max_entries=16)
def _diff_runs(root: str, run_a: str, run_b: str, aliases: tuple, versions: tuple):
    from regime_dash.analysis import diff_runs as diff

    return diff(load_run(root, run_a, aliases, versions[0]), load_run(root, run_b, aliases, versions[1]))


def delta_fields(root: str, run_a: str, run_b: str, aliases: tuple = ()) -> dict[str, int | None]:
    """``{column: first differing step or None}`` of every numeric field two stored runs share
    (:func:`regime_dash.analysis.diff.field_deltas`), the differing ones first, by that step."""
    return _delta_fields(root, run_a, run_b, aliases, _pair(root, run_a, run_b))


@st.cache_data(show_spinner=False, max_entries=16)
def _delta_fields(root: str, run_a: str, run_b: str, aliases: tuple, versions: tuple) -> dict[str, int | None]:
    from regime_dash.analysis.diff import field_deltas

    deltas = field_deltas(load_run(root, run_a, aliases, versions[0]), load_run(root, run_b, aliases, versions[1]))
    order = sorted(deltas, key=lambda c: (deltas[c].first_step is None, deltas[c].first_step or 0, c))
    return {c: deltas[c].first_step for c in order}


def difference_spec(root: str, run_a: str, run_b: str, fields: tuple, names: tuple, aliases: tuple = ()) -> dict:
    """:func:`regime_dash.figures.compare.difference_figure` of ``fields`` of two stored runs
    (``names``: what the hover calls A and B), their first differing step marked."""
    return _difference_spec(root, run_a, run_b, fields, names, aliases, _pair(root, run_a, run_b))


@st.cache_data(show_spinner=False, max_entries=16)
def _difference_spec(root: str, run_a: str, run_b: str, fields: tuple, names: tuple, aliases: tuple,
                     versions: tuple) -> dict:
    from regime_dash.analysis.diff import field_deltas
    from regime_dash.figures.compare import difference_figure

    deltas = field_deltas(load_run(root, run_a, aliases, versions[0]), load_run(root, run_b, aliases, versions[1]),
                          list(fields))
    return difference_figure(deltas, names, _diff_runs(root, run_a, run_b, aliases, versions).first_step)


@st.cache_data(show_spinner=False, max_entries=64)
def logged_config(root: str, run_id: str, rows: int | None = None) -> dict[str, Any]:
    """:func:`regime_dash.runs.run_table.logged_config` of a stored run (``rows`` is part of the key only:
    a followed run's config is read again as it grows)."""
    from regime_dash.runs.run_table import logged_config as read

    return read(_store(root), run_id)


@st.cache_data(show_spinner=False, max_entries=16)
def group_spec(key: str, _frames: dict, groups: tuple, columns: tuple, band: str, smoothing: float) -> dict:
    """:func:`regime_dash.figures.compare.group_figure` of ``_frames`` (named by ``key``), grouped by
    ``groups`` (``((label, group), ...)``)."""
    from regime_dash.figures.compare import group_figure

    return group_figure(_frames, dict(groups), list(columns), band=band, smoothing=smoothing)


@st.cache_data(show_spinner="sweeping…", max_entries=4)
def sweep(source_key: str, _stream, grid: dict[str, list[float]], engine: str,
          base: dict[str, Any] | None = None, layout_fingerprint: str = "", _layout=None) -> dict[str, Any]:
    """:func:`regime_dash.usecases.sweep.sweep_prepared` of ``_stream`` over ``grid`` on top of ``base``, from
    :func:`prepared` (on the fast engine, the light inputs and their phase 1).

    Returns ``{"table", "seconds", "engine"}``; the table has one row per
    config: every config field, then the summary metrics.
    """
    from regime_dash.usecases.sweep import engine_for_sweep, sweep_prepared

    ready = prepared(source_key, _stream, engine_for_sweep(engine), layout_fingerprint, _layout)
    result = sweep_prepared(ready, grid, RegimeConfig(**base) if base else None)
    return {"table": result.table, "seconds": result.seconds, "engine": result.engine}


# ---- controller modules (Controllers page) -------------------------------------------
@st.cache_data(show_spinner=False, max_entries=16)
def module_demo_stream(name: str, seed: int, steps: int | None):
    """The demo stream of controller module ``name`` (its own generator, ``seed``, ``steps`` or its default)."""
    from regime_dash.modules import MODULES

    return MODULES[name].demo_stream(seed, steps)


@st.cache_data(show_spinner="Replaying…", max_entries=32)
def module_replay(name: str, seed: int, steps: int | None, config: dict[str, Any], engine: str) -> dict[str, Any]:
    """Module ``name`` replayed on its demo stream under ``config``.

    Returns ``{"frame", "seconds", "checks", "summary"}``: ``checks`` are the
    run's one verdict as ``check`` gives it, less the core checks that cannot
    apply to this module's frame.
    """
    import time

    from regime_dash.analysis.verdict import verdict
    from regime_dash.modules import MODULES

    m = MODULES[name]
    t0 = time.perf_counter()
    frame = m.replay(module_demo_stream(name, seed, steps), m.config_type(**config), engine)
    seconds = time.perf_counter() - t0
    checks = [c.to_dict() for c in verdict(frame).checks if c.id in m.check_ids or c.status != "skip"]
    return {"frame": frame, "seconds": seconds, "checks": checks, "summary": m.summary(frame)}


@st.cache_data(show_spinner="Sweeping…", max_entries=8)
def module_sweep(name: str, seed: int, steps: int | None, field: str, values: tuple, base: dict[str, Any],
                 engine: str) -> pd.DataFrame:
    """Module ``name``'s summary over ``values`` of ``field``, on top of the config ``base``."""
    from regime_dash.modules import MODULES
    from regime_dash.modules.integration import sweep_module

    m = MODULES[name]
    return sweep_module(m, module_demo_stream(name, seed, steps), {field: list(values)}, engine,
                        base=m.config_type(**base))


@st.cache_data(show_spinner=False, max_entries=32)
def custom_spec(key: str, _runs: dict, panels: str, x: str, smoothing: float, x_offsets: tuple = (),
                x_range: tuple | None = None, colours: tuple = ()) -> dict:
    """:func:`regime_dash.figures.custom.custom_spec` of ``_runs`` (identified by ``key``) for the panel
    set of URL text ``panels`` (:func:`regime_dash.diag.panel_set.encode`), as its plotly JSON dict."""
    from regime_dash.figures.custom import custom_spec as spec
    from regime_dash.diag.panel_set import decode

    return spec(_runs, decode(panels), x=x, smoothing=smoothing, x_offsets=dict(x_offsets) or None,
                x_range=x_range, colours=dict(colours) or None)

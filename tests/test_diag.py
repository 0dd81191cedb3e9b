from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import regime_dash as rd
from regime_dash.diag import catalogue as diag
from regime_dash.errors import ParseError
from tests.helpers import stream

SPEC_GROUPS = {
    "dead_zone": {"flag", "duration", "timeout_flag", "max_duration"},
    "transition": {"remaining", "steps_config", "decay_steps_config"},
    "tail": {"recency", "session_pnl_variance_ema", "sigma_threshold", "welford_count"},
    "kelly_eps_recovery": {"factor", "live", "min", "max", "n_recovery"},
    "popart_envelope": {"max_abs_reward_ema", "decay_alpha"},
    "iqn_tau_boost": {"factor", "n_window"},
}


def _frame(rng):
    t, b = 40, 16
    worst = np.minimum.accumulate(rng.normal(-1, 5, t)).astype(np.float32)
    boundary = np.zeros(t, bool)
    boundary[25] = True
    return rd.replay(stream(t, b, rewards=rng.normal(size=(t, b)).astype(np.float32),
                            session_pnl_worst=worst, boundary=boundary, kelly_analytic=rng.normal(size=t)))


def test_jsonl_has_the_spec_structure(tmp_path, rng):
    path = diag.write_jsonl(_frame(rng), tmp_path / "diag.jsonl")
    first = json.loads(path.read_text().splitlines()[0])
    regime = first["risk_stack"]["regime"]
    assert {k: set(v) for k, v in regime.items()} == SPEC_GROUPS
    assert set(first["risk_stack"]) == {"kelly", "positions", "session_pnl", "popart", "iqn", "regime", "config"}
    assert set(first["risk_stack"]["config"]) == set(diag.CONFIG_COLUMNS)  # F2/F4/F5 ran or not, and the config
    assert first["step"] == 0 and first["phase"] == "train" and first["fold"] == 0


def test_jsonl_round_trip_is_exact(tmp_path, rng):
    frame = _frame(rng)
    back = diag.read_jsonl(diag.write_jsonl(frame, tmp_path / "diag.jsonl"))
    assert list(back.columns) == list(frame.columns)
    pd.testing.assert_frame_equal(back, frame, check_exact=True)


def test_nan_survives_round_trip(tmp_path, rng):
    frame = _frame(rng)
    frame.loc[3, "risk_stack.popart.var"] = np.nan
    back = diag.read_jsonl(diag.write_jsonl(frame, tmp_path / "d.jsonl"))
    assert np.isnan(back.loc[3, "risk_stack.popart.var"])
    assert "NaN" in (tmp_path / "d.jsonl").read_text()


def test_fold_and_phase_alternate_at_boundaries():
    fold, phase = diag.fold_and_phase(np.array([0, 0, 1, 0, 1, 0, 0], bool))
    assert list(phase) == ["train", "train", "eval", "eval", "train", "train", "train"]
    assert list(fold) == [0, 0, 0, 0, 1, 1, 1]


def _folds_by_loop(boundary):
    """Fold and phase step by step: a boundary past the first step ends a segment (the reference)."""
    seg, folds, phases = 0, [], []
    for i, b in enumerate(boundary):
        seg += bool(b) and i > 0
        folds.append(seg // 2)
        phases.append("train" if seg % 2 == 0 else "eval")
    return folds, phases


def test_a_frame_s_fold_and_phase_follow_its_boundaries(rng):
    for boundary in (rng.random(5000) < 0.01, np.r_[True, rng.random(4999) < 0.3], np.zeros(50, bool),
                     np.ones(40, bool)):
        snap = np.zeros((len(boundary), len(diag.SNAPSHOT_SLOTS)), np.float32)
        frame = diag.frame_from_snapshot(snap, np.zeros(len(boundary), np.int32), 4, np.arange(len(boundary)),
                                         boundary)
        folds, phases = _folds_by_loop(boundary)
        assert frame["fold"].dtype == np.int32 and frame["fold"].tolist() == folds
        assert frame["phase"].tolist() == phases
        fold, phase = diag.fold_and_phase(boundary)
        assert fold.tolist() == folds and list(phase) == phases


def test_a_frame_s_constant_columns_hold_their_values_and_change_alone(rng):
    """The config columns (and ``b_size``, ``fold``) are rows of shared blocks: each holds its value,
    and a write to one changes no other column."""
    from regime_dash import RegimeConfig

    config = RegimeConfig(popart_alpha=0.02, kelly_cap=0.3)
    boundary = rng.random(800) < 0.05
    snap = np.zeros((800, len(diag.SNAPSHOT_SLOTS)), np.float32)
    frame = diag.frame_from_snapshot(snap, np.zeros(800, np.int32), 5, np.arange(800), boundary, config,
                                     fused=True)
    for name, col in diag.CONFIG_COLUMNS.items():
        values = frame[col].to_numpy()
        assert values.dtype == np.float32 and (values == diag.config_value(name, getattr(config, name))).all()
    assert (frame[diag.FUSED_COLUMN] == 1).all() and (frame[diag.B_SIZE] == 5).all()
    before = frame.copy()
    kelly_cap = diag.CONFIG_COLUMNS["kelly_cap"]
    frame.iloc[10:, frame.columns.get_loc(kelly_cap)] = np.float32(0.5)
    frame.loc[3, diag.B_SIZE] = 7
    changed = {c for c in frame.columns if not frame[c].equals(before[c])}
    assert changed == {kelly_cap, diag.B_SIZE}
    assert frame[diag.B_SIZE].tolist() == [5] * 3 + [7] + [5] * 796 and frame["fold"].equals(before["fold"])


def test_flatten_unflatten_inverse():
    obj = {"a": {"b": 1, "c": {"d": 2.5}}, "e": "x"}
    assert diag.flatten(obj) == {"a.b": 1, "a.c.d": 2.5, "e": "x"}
    assert diag.unflatten(diag.flatten(obj)) == obj


def test_strict_reader_names_the_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"step": 0}\n[1, 2]\n')
    with pytest.raises(ParseError, match=r"bad.jsonl:2: JSON list, not an object") as exc:
        diag.read_jsonl(p)
    assert exc.value.line == 2


def test_one_column_catalogue_serves_the_analysis_and_the_summary():
    from regime_dash.diag import catalogue as diag
    from regime_dash.analysis import view
    from regime_dash.engine import summary

    columns = [c for c, _ in diag.DIAG_FIELDS]
    assert len(set(columns)) == len(columns)
    # the analysis reads the catalogue's names, not copies of them
    for name in ("KELLY", "FLAG", "RECENCY", "SIGMA", "ENVELOPE", "LIVE", "BOOST_WINDOW"):
        assert getattr(view, name) is getattr(diag, name)
        assert getattr(diag, name) in columns
    # the summary's snapshot positions are those of the catalogue's columns
    assert diag.SNAPSHOT_COLUMNS[summary.POS_KELLY] == diag.KELLY
    assert diag.SNAPSHOT_COLUMNS[summary.POS_EPS_LIVE] == diag.LIVE
    assert diag.SNAPSHOT_COLUMNS[summary.POS_ENVELOPE] == diag.ENVELOPE


@pytest.mark.parametrize("steps", [0, 1, 7, 2047, 2048, 2049, 6145])
def test_a_snapshot_becomes_contiguous_float32_columns_bit_for_bit(steps):
    """The tiled transpose of frame_from_snapshot over sizes around its tile: every column the
    snapshot's own bits (NaN payloads and -0.0 included), each contiguous, none a view of ``snap``."""
    rng = np.random.default_rng(steps)
    snap = rng.standard_normal((steps, len(diag.SNAPSHOT_COLUMNS))).astype(np.float32)
    if steps:
        snap[steps // 2, 0], snap[-1, -1] = np.float32("nan"), np.float32(-0.0)
    frame = diag.frame_from_snapshot(snap, np.zeros(steps, np.int32), 4, np.arange(steps), np.zeros(steps, bool))
    for j, col in enumerate(diag.SNAPSHOT_COLUMNS):
        values = frame[col].to_numpy()
        assert values.dtype == np.float32 and values.flags.c_contiguous
        assert np.array_equal(values.view(np.uint32), snap[:, j].view(np.uint32)), col
        assert not np.shares_memory(values, snap)


def test_a_column_major_snapshot_gives_its_own_columns_uncopied():
    """The CPU fast scan's snapshot is [T, n] in Fortran order: the frame takes its columns as they are."""
    rng = np.random.default_rng(3)
    snap = np.asfortranarray(rng.standard_normal((5000, len(diag.SNAPSHOT_COLUMNS))).astype(np.float32))
    snap[7, 2] = np.float32(-0.0)
    frame = diag.frame_from_snapshot(snap, np.zeros(5000, np.int32), 4, np.arange(5000), np.zeros(5000, bool))
    for j, col in enumerate(diag.SNAPSHOT_COLUMNS):
        values = frame[col].to_numpy()
        assert values.dtype == np.float32 and values.flags.c_contiguous
        assert np.array_equal(values.view(np.uint32), snap[:, j].view(np.uint32)), col
        assert np.shares_memory(values, snap[:, j]), col

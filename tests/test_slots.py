from __future__ import annotations

import numpy as np
import pytest

from regime_dash.errors import SlotLayoutError
from regime_dash.core.slots import DEFAULT_LAYOUT as L, TABLE_COLUMNS, SlotLayout, fnv1a64, import_rust, read_table

# the spec's new slots: index, bootstrap (the spec's bootstrap list) and the policy of its
# "Regime observer reset policy" (None where it names none)
SPEC_NEW = {
    "RL_REGIME_DEAD_ZONE_FLAG_INDEX": (696, 0.0, "clear"),
    "RL_REGIME_DEAD_ZONE_DURATION_INDEX": (697, 0.0, "clear"),
    "RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX": (698, 0.0, "clear"),
    "RL_REGIME_RECOVERY_FACTOR_INDEX": (699, 1.0, "re-bootstrap"),
    "RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX": (700, 0.0, None),
    "RL_REGIME_TAIL_EVENT_RECENCY_INDEX": (701, 1.0e6, "re-bootstrap"),
    "RL_REGIME_SESSION_PNL_VAR_M2_INDEX": (702, 0.0, "keep"),
    "RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX": (703, 0.0, "keep"),
    "RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX": (704, 0.0, "keep"),
    "RL_REGIME_PREV_WORST_PNL_INDEX": (705, 0.0, "align"),
    "RL_KELLY_EPS_RECOVERY_LIVE_INDEX": (706, 0.5, "re-bootstrap"),
    "RL_KELLY_EPS_RECOVERY_MIN_INDEX": (707, 0.05, None),
    "RL_KELLY_EPS_RECOVERY_MAX_INDEX": (708, 0.5, None),
    "RL_KELLY_EPS_RECOVERY_N_RECOVERY_INDEX": (709, 100.0, None),
    "RL_REGIME_DEAD_ZONE_MAX_DURATION_INDEX": (710, 1000.0, None),
    "RL_IQN_TAU_TAIL_BOOST_FACTOR_INDEX": (711, 1.5, None),
    "RL_IQN_TAU_TAIL_BOOST_N_WINDOW_INDEX": (712, 100.0, None),
    "RL_REGIME_TAIL_SIGMA_THRESHOLD_INDEX": (713, 3.0, None),
    "RL_POPART_MAX_ABS_REWARD_EMA_INDEX": (714, 0.0, "clear"),
    "RL_POPART_MAX_DECAY_ALPHA_INDEX": (715, 0.01, None),
}
# the spec's bootstraps of the slots it does not number
BOOT_LOCAL = {"RL_KELLY_FRACTION_INDEX": 1.0, "POPART_MEAN_INDEX": 0.0, "POPART_VAR_INDEX": 1.0}
LOCAL = ["RL_KELLY_FRACTION_INDEX", "RL_COOLDOWN_REMAINING_STEPS_INDEX", "RL_SESSION_PNL_WORST_INDEX",
         "RL_KELLY_SAFETY_FRAC_INDEX", "RL_IQN_ACTION_TAU_MIN_INDEX", "POPART_MEAN_INDEX",
         "POPART_VAR_INDEX", "POPART_SIGMA_INDEX"]


def test_spec_new_slots_at_696_to_715():
    for name, (index, _boot, _policy) in SPEC_NEW.items():
        assert L.index(name) == index
    assert sorted(s.index for s in L if 696 <= s.index < 716) == list(range(696, 716))


def test_v9_renamed_slots_and_targets():
    assert L.index("RL_REGIME_TRANSITION_REMAINING_INDEX") == 685
    assert L.index("RL_REGIME_TRANSITION_STEPS_CONFIG_INDEX") == 686
    assert L.index("RL_REGIME_TRANSITION_DECAY_STEPS_CONFIG_INDEX") == 687
    assert sorted(s.index for s in L if 688 <= s.index <= 695) == list(range(688, 696))


def test_unnumbered_slots_are_local_below_685():
    for name in LOCAL:
        assert L[name].local and L[name].index < 685
    assert not any(s.local for s in L if s.index >= 685)


def test_model_switch_slots_are_local_config_below_the_local_block_and_off_at_bootstrap():
    from regime_dash.core.config import FIELD_SLOTS, MODEL_SWITCHES

    slots = [L[FIELD_SLOTS[name]] for name in MODEL_SWITCHES]
    assert sorted(s.index for s in slots) == [663, 664]
    for s in slots:
        assert s.local and s.role == "config" and s.policy == "keep" and s.bootstrap == 0.0
        assert s.name.startswith("RL_REGIME_MODEL_") and s.doc.startswith("model switch (not in the spec)")


def test_bootstraps_and_policies_follow_the_spec():
    for name, (_index, value, policy) in SPEC_NEW.items():
        assert L[name].bootstrap == value, name
        assert policy is None or L[name].policy == policy, name
    for name, value in BOOT_LOCAL.items():
        assert L[name].bootstrap == value, name
    assert L["RL_REGIME_PREV_WORST_PNL_INDEX"].align_to == "RL_SESSION_PNL_WORST_INDEX"
    assert all(s.role in ("signal", "state", "config", "input") and s.doc for s in L)


def test_reset_plan_writes_clears_and_rebootstraps_before_aligns():
    idx, code, src = L.reset_plan()
    assert len(idx) == len([s for s in L if s.policy != "keep"])
    first_align = list(code).index(3)
    assert (code[first_align:] == 3).all()
    prev = list(idx).index(705)
    assert src[prev] == L.index("RL_SESSION_PNL_WORST_INDEX")


def test_fnv1a64_known_vectors():
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


def test_fingerprint_is_over_sorted_name_index_lines():
    text = "".join(sorted(f"{s.name}={s.index}\n" for s in L))
    assert L.fingerprint() == fnv1a64(text.encode())
    moved = L.with_indices({"RL_KELLY_FRACTION_INDEX": 10})
    assert moved.fingerprint() != L.fingerprint()
    assert SlotLayout(tuple(reversed(L.slots))).fingerprint() == L.fingerprint()


def test_defines_name_every_slot():
    d = L.defines()
    assert "-DRL_REGIME_DEAD_ZONE_FLAG_INDEX=696" in d
    assert "-DRL_SLOTS_END=716" in d
    assert len([x for x in d if x.endswith("_INDEX=" + x.split("=")[1])]) == len(L)


def test_bootstrap_vector_applies_overrides():
    v = L.bootstrap_vector({"RL_REGIME_DEAD_ZONE_MAX_DURATION_INDEX": 5})
    assert v.dtype == np.float32 and v.shape == (716,)
    assert v[701] == np.float32(1e6) and v[710] == 5.0


def test_report_finds_overlaps_and_gaps():
    assert L.report().ok and L.report().gaps == []
    bad = L.with_indices({"RL_KELLY_FRACTION_INDEX": 696, "RL_KELLY_CAP_INDEX": 600})
    rep = bad.report()
    assert rep.overlaps == {696: ["RL_REGIME_DEAD_ZONE_FLAG_INDEX", "RL_KELLY_FRACTION_INDEX"]}
    # 661..664 are the mirror and model switches, 665 is where RL_KELLY_FRACTION_INDEX was
    assert rep.gaps == [(601, 661), (665, 666), (669, 670)]
    with pytest.raises(SlotLayoutError, match="696"):
        bad.defines()


RUST = """
// isv_slots.rs (excerpt)
pub const RL_KELLY_FRACTION_INDEX: usize = 280;
pub const RL_REGIME_DEAD_ZONE_FLAG_INDEX:           usize = 696;  // 0/1
pub const SOMETHING_ELSE_INDEX: usize = 12;
pub const RL_SLOTS_END: usize = 716;
const NOT_PUB: usize = 3;
pub const POPART_SIGMA_INDEX: usize = 1_2_0;
pub fn helper() -> usize { 4 }
"""


def test_import_rust_replaces_by_name_and_reports():
    imp = import_rust(RUST)
    assert imp.layout.index("RL_KELLY_FRACTION_INDEX") == 280
    assert imp.layout.index("POPART_SIGMA_INDEX") == 120
    assert imp.replaced == {"RL_KELLY_FRACTION_INDEX": (665, 280), "POPART_SIGMA_INDEX": (678, 120)}
    assert imp.unknown == ["SOMETHING_ELSE_INDEX"]
    assert "RL_REGIME_DEAD_ZONE_DURATION_INDEX" in imp.missing
    assert "RL_REGIME_DEAD_ZONE_FLAG_INDEX" not in imp.missing
    assert imp.layout.fingerprint() != L.fingerprint()


def test_import_rust_errors_name_the_problem():
    with pytest.raises(SlotLayoutError, match="no `pub const"):
        import_rust("fn main() {}\n")
    with pytest.raises(SlotLayoutError, match="RL_KELLY_FRACTION_INDEX defined twice"):
        import_rust("pub const RL_KELLY_FRACTION_INDEX: usize = 1;\npub const RL_KELLY_FRACTION_INDEX: usize = 2;\n")


def test_read_table_reads_a_row_and_skips_comments(tmp_path):
    table = tmp_path / "slots.csv"
    table.write_text("# a comment\n" + ",".join(TABLE_COLUMNS) + "\n# a section\n"
                     'X_INDEX,7,state,1.5,align,p,a|b,Y_INDEX,true,"x, y"\n\n', encoding="utf-8")
    (x,) = read_table(table)
    assert (x.name, x.index, x.role, x.bootstrap, x.policy) == ("X_INDEX", 7, "state", 1.5, "align")
    assert (x.producer, x.consumers, x.align_to, x.local, x.doc) == ("p", ("a", "b"), "Y_INDEX", True, "x, y")


@pytest.mark.parametrize("row, match", [
    ("X_INDEX,seven,state,0.0,keep,,,,false,d", r"slots.csv:3: index 'seven' is not a number"),
    ("X_INDEX,7,state,zero,keep,,,,false,d", r"slots.csv:3: bootstrap 'zero' is not a number"),
    ("X_INDEX,7,state,0.0,keep,,,,yes,d", r"slots.csv:3: local 'yes' is not true or false"),
    ("X_INDEX,7,state,0.0,keep,,,,false", r"slots.csv:3: 9 cells, not 10"),
])
def test_read_table_errors_name_the_file_line_column_and_value(tmp_path, row, match):
    table = tmp_path / "slots.csv"
    table.write_text("# comment\n" + ",".join(TABLE_COLUMNS) + "\n" + row + "\n", encoding="utf-8")
    with pytest.raises(SlotLayoutError, match=match):
        read_table(table)


def test_read_table_rejects_a_wrong_header(tmp_path):
    table = tmp_path / "slots.csv"
    table.write_text("name,index\n", encoding="utf-8")
    with pytest.raises(SlotLayoutError, match="the header is") as err:
        read_table(table)
    assert err.value.field == "header"


def test_replay_runs_on_an_imported_layout():
    import regime_dash as rd
    from tests.helpers import stream

    s = stream(5, 4, kelly_analytic=-1.0)
    a = rd.replay(s, isv={"RL_KELLY_FRACTION_INDEX": 0.0})
    b = rd.replay(s, isv={"RL_KELLY_FRACTION_INDEX": 0.0}, layout=import_rust(RUST).layout)
    cols = [c for c in a.columns if c != "phase"]
    assert a[cols].equals(b[cols])
    assert a.attrs["layout_fingerprint"] != b.attrs["layout_fingerprint"]

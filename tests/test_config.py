from __future__ import annotations

import pytest

from regime_dash.config import FIELD_SLOTS, RegimeConfig, field_names, parse_setting
from regime_dash.errors import ConfigError
from regime_dash.slots import DEFAULT_LAYOUT


def test_defaults_are_the_spec_bootstraps():
    c = RegimeConfig()
    for name, slot in FIELD_SLOTS.items():
        assert float(getattr(c, name)) == DEFAULT_LAYOUT[slot].bootstrap, name
    assert (c.max_duration, c.eps_min, c.eps_max, c.n_recovery) == (1000, 0.05, 0.5, 100)
    assert (c.tau_boost_factor, c.tau_boost_window, c.tail_sigma_threshold) == (1.5, 100, 3.0)
    assert (c.envelope_decay_alpha, c.popart_alpha) == (0.01, 0.001)
    assert c.resurrection and c.envelope and c.tau_boost


def test_every_config_slot_is_a_field():
    config_slots = {s.name for s in DEFAULT_LAYOUT if s.role == "config" and not s.name.startswith("RL_V9_TARGET_")}
    assert config_slots == set(FIELD_SLOTS.values())


def test_isv_round_trip():
    c = RegimeConfig(max_duration=250, eps_max=0.4, resurrection=False)
    isv = c.to_isv()
    assert isv["RL_KELLY_EPS_RECOVERY_LIVE_INDEX"] == 0.4
    assert RegimeConfig.from_isv(isv) == c


@pytest.mark.parametrize("kw, match", [
    ({"eps_min": 0.6, "eps_max": 0.5}, r"eps_min=0\.6 is greater than eps_max=0\.5"),
    ({"popart_alpha": 0.0}, r"popart_alpha=0\.0 is outside \(0, 1\]"),
    ({"envelope_decay_alpha": 1.5}, r"envelope_decay_alpha=1\.5"),
    ({"max_duration": -1}, r"max_duration=-1\.0"),
    ({"n_recovery": 2.5}, r"n_recovery=2\.5"),
    ({"max_duration": float("nan")}, r"max_duration must be a finite number, got nan"),
    ({"resurrection": "yes"}, r"resurrection must be a boolean, got 'yes'"),
])
def test_validation_names_the_values(kw, match):
    with pytest.raises(ConfigError, match=match) as exc:
        RegimeConfig(**kw)
    assert exc.value.field in kw


def test_settings_parse_and_errors_list_valid_fields():
    c = RegimeConfig().with_settings(["resurrection=false", "max_duration=500"])
    assert c.resurrection is False and c.max_duration == 500
    with pytest.raises(ConfigError) as exc:
        parse_setting("max_durration=5")
    assert "max_durration" in str(exc.value) and "max_duration" in str(exc.value)
    assert all(f in str(exc.value) for f in field_names())
    with pytest.raises(ConfigError, match="'maybe' is not a boolean"):
        parse_setting("envelope=maybe")
    with pytest.raises(ConfigError, match="'x' is not a number"):
        parse_setting("eps_min=x")

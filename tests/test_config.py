from __future__ import annotations

import pytest

from regime_dash.core.config import FIELD_SLOTS, RegimeConfig, field_names, parse_setting
from regime_dash.errors import ConfigError
from regime_dash.core.slots import DEFAULT_LAYOUT


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


def test_one_declaration_gives_every_slider_domain():
    from regime_dash.modules import MODULES

    specs = RegimeConfig.field_specs()
    assert [s.name for s in specs] == field_names()
    # the Replay page (RegimeConfig's specs) and the Controllers page (the module's specs) offer the same domains
    assert MODULES["regime_observer"].field_specs() == specs
    by = {s.name: s for s in specs}
    assert all(s.lo is not None and s.hi is not None and s.step for s in specs if s.kind != "bool")
    # the widest of the two tables that were once kept apart, each end a value RegimeConfig accepts
    assert by["max_duration"].hi == 10_000 and by["popart_alpha"].hi == 1.0
    assert by["kelly_cap"].hi == 5.0
    assert by["transition_steps"].model and not by["max_duration"].model
    assert by["max_duration"].kind == "int" and by["max_duration"].default == 1000
    assert by["resurrection"].kind == "bool" and by["resurrection"].doc.startswith("F2")
    # the checks, not the slider ends, bound a config: a longer timeout is still a valid what-if
    assert RegimeConfig(max_duration=50_000).max_duration == 50_000.0


def test_grid_parser_is_strict_and_names_the_field():
    from regime_dash.core.config import parse_grid

    assert parse_grid(["max_duration=10,20", "envelope=off"]) == {"max_duration": [10, 20], "envelope": [False]}
    with pytest.raises(ConfigError, match="twice") as exc:
        parse_grid(["eps_min=0.1", "eps_min=0.2"])
    assert exc.value.field == "eps_min"
    with pytest.raises(ConfigError, match="empty value") as exc:
        parse_grid(["eps_min=0.1,,0.2"])
    assert exc.value.field == "eps_min"
    with pytest.raises(ConfigError, match="'x' is not a number") as exc:
        parse_grid(["eps_min=0.1,x"])
    assert (exc.value.field, exc.value.value) == ("eps_min", "x")


def test_domain_is_the_declared_slider_range_and_names_a_bad_field():
    from regime_dash.errors import ConfigError

    spec = RegimeConfig.numeric_specs()["max_duration"]
    assert RegimeConfig.domain("max_duration") == (float(spec.lo), float(spec.hi), float(spec.step))
    assert "resurrection" not in RegimeConfig.numeric_specs()  # a switch has no range
    for bad in ("resurrection", "no_such_field"):
        with pytest.raises(ConfigError, match=bad):
            RegimeConfig.domain(bad)

"""The "Find a passing config" panel (``regime_dash.ui.repair_panel``) under streamlit's AppTest:
the search from the page's settings (in the URL), its candidates, and "Apply" setting the what-if sliders."""
from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from regime_dash.core.config import SWITCHES, RegimeConfig  # noqa: E402
from regime_dash.ui.repair_panel import slider_values  # noqa: E402


def _page():
    from regime_dash.core.config import RegimeConfig
    from regime_dash.sources import scenarios
    from regime_dash.ui import state, widgets
    from regime_dash.ui.repair_panel import repair_panel

    stream = scenarios.make("kelly_trap_run8", steps=2000, accounts=8)
    values = widgets.config_controls("replay.whatif", columns=1, in_url=True)
    repair_panel("replay.repair", "scenario:kelly_trap_run8:2000:8", stream, RegimeConfig(**values))
    state.publish()


def test_slider_values_name_every_what_if_slider():
    values = slider_values(RegimeConfig(max_duration=0.0, resurrection=False), "replay.whatif")
    assert values["replay.whatif.max_duration"] == 0.0 and values["replay.whatif.resurrection"] is False
    assert set(values) == {f"replay.whatif.{n}" for n in (*SWITCHES, *RegimeConfig.numeric_specs())}


@pytest.mark.slow
def test_find_a_passing_config_then_apply_it_to_the_sliders():
    at = AppTest.from_function(_page, default_timeout=300)
    at.query_params.update({"repair_fields": "max_duration,resurrection", "repair_trials": "8", "repair_seed": "4"})
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.multiselect(key="replay.repair.fields").value == ["max_duration", "resurrection"]
    at.button(key="replay.repair.run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.success and "verified passing config" in at.success[0].value
    (table,) = [d.value for d in at.dataframe]
    best = at.session_state["replay.repair.result"][1].candidates[0]
    assert bool(table["passing"].iloc[0]) and best.passing and table["changes"].iloc[0] == best.changes_text()
    at.button(key="replay.repair.apply.1").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.slider(key="replay.whatif.max_duration").value == best.config.max_duration
    assert at.toggle(key="replay.whatif.resurrection").value == best.config.resurrection
    # the sliders now hold the candidate: the search ran around another config, so it asks for a new one
    assert any("press it again" in c.value for c in at.caption)
    for name, (_, new) in best.changes.items():  # the applied fields are in the URL, as every slider is
        assert name in at.query_params

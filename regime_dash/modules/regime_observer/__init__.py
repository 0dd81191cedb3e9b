"""The regime observer (the spec's risk stack) exposed through the controller-module protocol.

An adapter only: replay is :func:`regime_dash.engine.replay`, the config is
:class:`regime_dash.core.config.RegimeConfig`, the stream :class:`regime_dash.core.streams.Stream`,
the columns :data:`regime_dash.diag.catalogue.DIAG_FIELDS`, the invariants
:func:`regime_dash.analysis.run_checks`, the figure :func:`regime_dash.figures.signals.signal_panels`,
the demo stream the ``kelly_trap_run8`` scenario and the slots the registry's
:data:`~regime_dash.core.slots.DEFAULT_LAYOUT`. Nothing of the core moves or changes.
``core=True``: ``check`` runs these invariants already.
"""
from __future__ import annotations

import pandas as pd

from regime_dash.diag import catalogue as diag
from regime_dash.analysis.invariants import CHECK_IDS
from regime_dash.core.config import RegimeConfig
from regime_dash.engine import ENGINES
from regime_dash.engine.controllers import PATH_DOCS
from regime_dash.engine import replay as core_replay
from regime_dash.errors import ValidationError
from regime_dash.engine import cuda as _cuda_engine_files  # noqa: F401  (its FILES list; no cupy import)
from regime_dash.modules.base import ControllerModule, FieldSpec
from regime_dash.core.slots import DEFAULT_LAYOUT
from regime_dash.core.streams import Stream

DEMO_SCENARIO = "kelly_trap_run8"
#: The scenario of a demo too short for Run #8's trap (which needs 1737 trapped steps and a lead-in).
SHORT_DEMO_SCENARIO = "tail_shock"
SHORT_DEMO_ACCOUNTS = 256

def field_specs() -> list[FieldSpec]:
    """Slider specs of every RegimeConfig field, in declaration order (its own declaration's)."""
    return RegimeConfig.field_specs()


def _replay(stream: Stream, config: RegimeConfig, engine: str) -> pd.DataFrame:
    return core_replay(stream, config, engine=engine)


def _invariants(frame: pd.DataFrame, options=None) -> list:
    from regime_dash.analysis import run_checks

    return run_checks(frame, options=options)


def _figures(frame: pd.DataFrame, baseline: pd.DataFrame | None = None) -> list:
    from regime_dash.figures.signals import signal_panels

    runs = {"replay": frame}
    if baseline is not None:
        runs["baseline"] = baseline
    return [signal_panels(runs)]


def _summary(frame: pd.DataFrame) -> dict[str, float]:
    from regime_dash.engine.summary import summarize_frame

    return summarize_frame(frame)


def _demo(seed: int = 0, steps: int | None = None) -> Stream:
    """Run #8's Kelly trap; a shorter demo is the tail-shock scenario (256 accounts)."""
    from regime_dash.sources import scenarios

    try:
        return scenarios.make(DEMO_SCENARIO, seed=seed, steps=steps)
    except ValidationError as exc:
        if exc.field != "steps" or isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise
        return scenarios.make(SHORT_DEMO_SCENARIO, seed=seed, steps=steps, accounts=SHORT_DEMO_ACCOUNTS)


MODULE = ControllerModule(
    name="regime_observer",
    title="Regime observer (spec risk stack)",
    doc=__doc__,
    kernels=tuple(_cuda_engine_files.FILES),
    stream_type=Stream,
    config_type=RegimeConfig,
    slots=DEFAULT_LAYOUT.slots,
    columns=tuple(col for col, _ in diag.DIAG_FIELDS),
    check_columns=(diag.R + "dead_zone.flag", diag.R + "tail.recency"),
    replay_fn=_replay,
    invariants_fn=_invariants,
    figures_fn=_figures,
    demo_stream_fn=_demo,
    engines=tuple(ENGINES),
    field_specs_fn=field_specs,
    core=True,
    summary_fn=_summary,
    check_ids=tuple(CHECK_IDS),
    paths=tuple(PATH_DOCS.items()),
    demo_failures={
        "kelly_trap": "on purpose: the demo is the spec's Run #8, scripted so that no account opens again and "
                      "every account stays flat for its last 1,737 steps. With F2 (resurrection) on, the dead "
                      "zone cycles, DURATION never reaches max_duration and the timeout never fires, so the trap "
                      "is not excused (see the timeout_unreachable finding). Turn on duration_across_cycles to "
                      "see the timeout fire.",
    },
)

__all__ = ["MODULE", "field_specs"]

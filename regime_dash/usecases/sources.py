"""Where a replay's inputs come from: a scenario preset, a recorded stream file, or a closed-loop live run."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from regime_dash.errors import ValidationError

if TYPE_CHECKING:
    from regime_dash.core.config import RegimeConfig
    from regime_dash.core.streams import Stream


@dataclass(frozen=True)
class StreamSource:
    """One of ``scenario`` (a preset of :mod:`regime_dash.sources.scenarios`), ``stream`` (a ``.npz`` or
    ``.parquet`` stream file) or ``simulate`` (a preset of :mod:`regime_dash.sources.market` run closed loop),
    cut to ``steps`` × ``accounts`` (the preset's, or the whole file, where None), ``seed`` for the presets."""

    scenario: str | None = None
    stream: str | None = None
    simulate: str | None = None
    steps: int | None = None
    accounts: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        given = [k for k in ("scenario", "stream", "simulate") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValidationError(f"a stream source is one of a scenario, a stream file or a simulator preset, "
                                  f"got {given or 'none'}", field="source", value=given)

    @property
    def name(self) -> str:
        """What the source is called in a report: the preset's name, or the file's path."""
        return str(self.scenario or self.simulate or self.stream)

    @property
    def label(self) -> str:
        """``scenario:NAME``, ``simulate:NAME`` or ``stream:FILE``: the source as a live run names it."""
        if self.scenario is not None:
            return f"scenario:{self.scenario}"
        if self.simulate is not None:
            return f"simulate:{self.simulate}"
        return f"stream:{Path(self.stream).name}"

    def load(self, config: RegimeConfig | None = None) -> Stream:
        """The stream: the preset made, the file read and cut, or the inputs a closed-loop live run of the
        simulator preset fed its pipeline (run under ``config``, the spec's defaults if None)."""
        if self.simulate is not None:
            from regime_dash.sources.simulator import simulate

            return simulate(self.simulate, steps=self.steps, accounts=self.accounts, seed=self.seed,
                            config=config).stream()
        from regime_dash.sources import scenarios

        if self.scenario is not None:
            return scenarios.make(self.scenario, seed=self.seed, steps=self.steps, accounts=self.accounts)
        return scenarios.recorded(steps=self.steps, accounts=self.accounts, path=self.stream)


__all__ = ["StreamSource"]

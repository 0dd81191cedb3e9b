"""The checks that live above the analysis layer, registered with it by name.

:func:`regime_dash.analysis.verdict.verdict` runs the spec's checks (:mod:`.invariants`)
and then those of every provider named in :data:`PROVIDERS`: today the controller
modules' invariants. The analysis layer never imports the controller modules (they
import it); it names their provider as plain data, the way a plug-in entry point does,
and loads it when a verdict asks. So every verdict gets the module checks, whichever
shell computes it and whatever that shell imported first; a provider that is named here
but cannot be loaded raises instead of being skipped.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:  # the annotations only
    import pandas as pd

    from regime_dash.analysis.invariants import CheckOptions, CheckResult

#: ``"module:attribute"`` of each :class:`CheckProvider`, loaded on first use.
PROVIDERS: tuple[str, ...] = ("regime_dash.modules.integration:MODULE_CHECKS",)


@dataclass(frozen=True)
class CheckProvider:
    """Checks run on a frame after the spec's own.

    Attributes
    ----------
    name
        Who provides them (in error messages).
    check_ids
        Every check id the provider can run.
    results
        ``results(frame, ids, options)``: the CheckResults of the checks that apply to
        ``frame`` (only ``ids`` when not ``None``) under the shared options.
    coverage
        ``coverage(frame)``: coverage entries (:mod:`regime_dash.analysis.coverage`) of the fields
        its checks own, which replace the core's entries of the same fields; ``None`` for none.
    """

    name: str
    check_ids: Callable[[], list[str]]
    results: Callable[["pd.DataFrame", "list[str] | None", "CheckOptions"], "list[CheckResult]"]
    coverage: "Callable[[pd.DataFrame], list[dict]] | None" = None


def load(entry: str) -> CheckProvider:
    """The provider an entry of :data:`PROVIDERS` names."""
    module, _, attr = entry.partition(":")
    try:
        provider: Any = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"check provider {entry!r} (regime_dash.analysis.registry.PROVIDERS) cannot be loaded: "
                          f"{exc}") from exc
    if not isinstance(provider, CheckProvider):
        raise TypeError(f"check provider {entry!r} is a {type(provider).__name__}, not a CheckProvider")
    return provider


def providers() -> list[CheckProvider]:
    """Every provider of :data:`PROVIDERS`, loaded (the imports are cached by Python)."""
    return [load(entry) for entry in PROVIDERS]


def split_ids(ids: Sequence[str] | None, provided: Sequence[CheckProvider]
              ) -> tuple[list[str] | None, list[list[str] | None]]:
    """(the spec's check ids, each provider's ids) of a ``--only`` list; all ``None`` for all checks."""
    if ids is None:
        return None, [None for _ in provided]
    own = [set(p.check_ids()) for p in provided]
    taken = set().union(*own)
    return [i for i in ids if i not in taken], [[i for i in ids if i in mine] for mine in own]

"""The checks that live above the analysis layer, registered with it as entry points.

:func:`regime_dash.analysis.verdict.verdict` runs the spec's checks (:mod:`.invariants`)
and then those of every provider registered in the entry-point group :data:`GROUP`
(``[project.entry-points."regime_dash.checks"]`` in pyproject.toml): today the controller
modules' invariants. The analysis layer never imports the controller modules (they
import it); the installed package's metadata names their provider, and it is loaded when
a verdict asks. So every verdict gets the module checks, whichever shell computes it and
whatever that shell imported first; a provider that is registered but cannot be loaded
raises instead of being skipped, and so does a package whose metadata registers none
(a checkout used without ``pip install -e .``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:  # the annotations only
    import pandas as pd

    from regime_dash.analysis.invariants import CheckOptions, CheckResult

#: The entry-point group of the check providers.
GROUP = "regime_dash.checks"


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


def load(entry: EntryPoint) -> CheckProvider:
    """The provider an entry point of :data:`GROUP` names."""
    try:
        provider: Any = entry.load()
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"check provider {entry.name!r} ({entry.value}, entry-point group {GROUP!r}) cannot be "
                          f"loaded: {exc}") from exc
    if not isinstance(provider, CheckProvider):
        raise TypeError(f"check provider {entry.value!r} is a {type(provider).__name__}, not a CheckProvider")
    return provider


@lru_cache(maxsize=1)
def _entries() -> tuple[EntryPoint, ...]:
    found = tuple(sorted(entry_points(group=GROUP), key=lambda e: e.name))
    if not found:
        raise ImportError(f"no check provider is registered in the entry-point group {GROUP!r}: the regime-dash "
                          "package's metadata is missing; install the checkout with `python3 -m pip install -e .`")
    return found


def providers() -> list[CheckProvider]:
    """Every provider registered in :data:`GROUP`, loaded (the imports are cached by Python)."""
    return [load(entry) for entry in _entries()]


def split_ids(ids: Sequence[str] | None, provided: Sequence[CheckProvider]
              ) -> tuple[list[str] | None, list[list[str] | None]]:
    """(the spec's check ids, each provider's ids) of a ``--only`` list; all ``None`` for all checks."""
    if ids is None:
        return None, [None for _ in provided]
    own = [set(p.check_ids()) for p in provided]
    taken = set().union(*own)
    return [i for i in ids if i not in taken], [[i for i in ids if i in mine] for mine in own]

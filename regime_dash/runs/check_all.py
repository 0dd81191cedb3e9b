"""``check_all``: every run of a store checked through one scheduler, one summary table.

A team reviewing hundreds of cluster runs wants one row per run: its id, how
many checks passed, failed and were skipped, the first failure (check id and
step), and what was found (dead-zone episodes, tail events, timeouts, ...).
:func:`check_all` maps a per-run check function over the run ids, in-process
or on dask workers (``scheduler=``, as :func:`regime_dash.runs.sweeps`; see
:mod:`regime_dash.runs.scheduler`), and folds each run's report document (the
``check --json`` dict) into a row with :func:`summary_row`. A run that cannot be
read or checked gets a row with status ``error`` and the message, instead of
stopping the others; a stored run that is not a diag (one an older version
stored: :mod:`regime_dash.ingest.diag_rows`) gets the status ``not a diag`` and
the reason, never ``ok``.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from regime_dash.errors import NotDiagError, RegimeDashError

#: The summary table's columns.
COLUMNS: tuple[str, ...] = ("run", "status", "pass", "fail", "skip", "first_failure", "findings")

#: The status of a stored run that is not a diag (``check RUN`` exits 2 for it).
NOT_DIAG = "not a diag"

#: ``check(run_id) -> report dict`` (``{"checks": [{"id", "status", "first_step", ...}], "episodes": ..., "events": ...}``).
CheckFn = Callable[[str], Mapping[str, Any]]


def summary_row(run: str, doc: Mapping[str, Any]) -> dict[str, Any]:
    """One table row from a run's check report document.

    ``status`` is ``fail`` if any check failed, else ``ok``; ``first_failure`` is
    the failed check whose first violating step comes first (``id @ step``);
    ``findings`` counts the episodes and events the report lists.
    """
    checks = list(doc.get("checks", []))
    counts = {k: sum(1 for c in checks if c.get("status") == k) for k in ("pass", "fail", "skip")}
    failed = [c for c in checks if c.get("status") == "fail"]
    first = ""
    if failed:
        c = min(failed, key=lambda c: (c.get("first_step") is None, c.get("first_step") or 0))
        first = c["id"] + ("" if c.get("first_step") is None else f" @ step {c['first_step']}")
    found = {**doc.get("episodes", {}), **doc.get("events", {})}
    findings = ", ".join(f"{len(v)} {k}" for k, v in found.items() if v)
    # a finding of severity fail fails the run as it fails `check` (the verdict's status says so)
    bad = failed or doc.get("status") == "fail"
    return {"run": run, "status": "fail" if bad else "ok", **counts, "first_failure": first,
            "findings": findings}


def _one(run: str, check: CheckFn) -> dict[str, Any]:
    try:
        return summary_row(run, check(run))
    except NotDiagError as exc:
        return {"run": run, "status": NOT_DIAG, "pass": 0, "fail": 0, "skip": 0,
                "first_failure": str(exc), "findings": ""}
    except RegimeDashError as exc:  # a bad run is a row, not the end of the table
        return {"run": run, "status": "error", "pass": 0, "fail": 0, "skip": 0,
                "first_failure": f"{type(exc).__name__}: {exc}", "findings": ""}


def _shard(runs: Sequence[str], check: CheckFn) -> list[dict[str, Any]]:
    return [_one(r, check) for r in runs]


def check_all(runs: Sequence[str], check: CheckFn, *, scheduler: Any = None,
              progress: Callable[[int, int], None] | None = None, verbose: bool = False) -> pd.DataFrame:
    """Check every run with ``check`` and return the summary table (:data:`COLUMNS`), in ``runs`` order.

    Parameters
    ----------
    runs
        Run ids.
    check
        The per-run check: ``check(run_id)`` returns the run's report document.
        With a scheduler it runs on the workers, so it must be picklable (a
        module-level function or a ``functools.partial`` of one) and read what
        the workers can reach.
    scheduler
        ``None`` (in-process), ``"local"``, a scheduler address or a client.
    progress
        ``progress(done, total)`` after each run (in-process) or shard.
    verbose
        A local cluster's workers log at dask's INFO level (default: errors only).
    """
    from regime_dash.runs import scheduler as distributed

    runs = list(runs)
    if not runs:
        return pd.DataFrame(columns=list(COLUMNS))
    with distributed.connect(scheduler, verbose=verbose) as client:
        if client is None:
            rows = []
            for k, run in enumerate(runs):
                rows.append(_one(run, check))
                if progress is not None:
                    progress(k + 1, len(runs))
        else:
            # a few shards per worker: runs differ in size, so smaller pieces balance the load
            parts = 4 * distributed.worker_count(client)
            shards = [runs[a:b] for a, b in distributed.shard_bounds(len(runs), parts)]
            rows = [r for part in distributed.map_shards(_shard, shards, client, shared=(check,),
                                                          progress=progress) for r in part]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def store_check(run_id: str, store: Any = None, options: Mapping[str, Any] | None = None,
                aliases: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The default per-run check: run ``run_id`` of the store at ``store`` (a path, a URI or a store's
    ``root``, which a worker process can be sent) through ``diagnose``.

    Returns the ``check --json`` document (core checks and the controller modules' checks).
    Raises :class:`~regime_dash.errors.NotDiagError` when the run is not a diag.
    """
    from regime_dash.diag.aliases import canonical_frame
    from regime_dash.analysis import CheckOptions, diagnose
    from regime_dash.ingest.diag_rows import frame_reason, require_diag

    frame = stored_frame(run_id, store)  # as `check RUN` loads it
    frame = canonical_frame(frame, dict(aliases) if aliases else None)
    require_diag(run_id, frame_reason(frame))
    # the one verdict (core, module checks and findings), as `check RUN` gives it
    return diagnose(frame, None, CheckOptions(**dict(options or {}))).to_dict()


def stored_frame(run_id: str, store: str | None = None):
    """A stored run's frame as ``check RUN`` reads it: in the file's order (each row's line in the attrs of
    :func:`~regime_dash.analysis.structure.lines.file_ordered`), the slots as float32, and which values the
    file left out (``attrs[NULL_ROWS_ATTR]``: a null and a NaN read alike in pandas)."""
    from regime_dash.analysis.structure.lines import file_ordered
    from regime_dash.analysis.view import NULL_ROWS_ATTR, null_rows
    from regime_dash.store.open import open_store

    table = open_store(store).load_table(run_id, narrow=True)
    nulls = null_rows(table)
    frame = table.to_pandas(split_blocks=True, self_destruct=True)  # each Arrow column freed once converted
    frame.attrs[NULL_ROWS_ATTR] = nulls
    return file_ordered(frame)


__all__ = ["COLUMNS", "NOT_DIAG", "check_all", "store_check", "stored_frame", "summary_row"]

"""Check a run against the spec, compare two runs, check a whole store: what ``check`` and ``diff`` do,
and what the Explore page's verdict is.

A target is a file (``.parquet`` frame, or a diag ``.jsonl``, plain or gzip, read by
:mod:`regime_dash.ingest`, which sets bad lines aside) or, when no such file exists, a run in
the run store: its id, or the name given at ingest when one run has it (:func:`load_target`).
:func:`check_target` gives one run's verdict (:func:`regime_dash.analysis.diagnose`);
:func:`check_store` every run's summary row; :func:`diff_targets` two runs step by step.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:  # the annotations only: pandas loads when a run is read
    import pandas as pd


def user_aliases(path: str | None) -> dict | None:
    """The alias table extension in the JSON file ``path`` (None: none), or a ValidationError naming it."""
    from regime_dash.diag.aliases import parse_alias_json
    from regime_dash.errors import ValidationError

    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"cannot read alias file {path!r}: {exc.strerror}", field="aliases",
                              value=path) from None
    return parse_alias_json(text)


def load_target(target: str, store: Any = None,
                aliases: dict | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a run: a file when ``target`` is one, else a run id or unique run name in the
    store (:func:`regime_dash.store.run_store.resolve_target`).

    Returns the frame (raw column names) and a small ``source`` dict for the report. A
    diag.jsonl is read as the store reads it: its JSON object lines without a diag field
    are rejected (:mod:`regime_dash.ingest.diag_rows`), and ``source["not_diag"]`` says why
    the file is not a diag (``None`` when it is one).
    """
    from regime_dash.store.open import open_store
    from regime_dash.store.run_store import resolve_target

    store = open_store(store)
    kind, ref = resolve_target(target, store)
    if kind == "file":
        path = Path(ref)
        if path.suffix == ".parquet":
            return _parquet_target(path, target)
        return _diag_target(path, aliases)
    from regime_dash.runs.check_all import stored_frame

    return stored_frame(ref, store), {"run_id": ref}  # the slots as float32, as a replay or a Parquet run has them


def _parquet_target(path: Path, target: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    import pyarrow.parquet as pq

    from regime_dash.analysis.view import NULL_ROWS_ATTR, null_rows
    from regime_dash.errors import IngestError

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as exc:
        raise IngestError(f"cannot read {target!r} as Parquet: {exc}", path=target) from None
    nulls = null_rows(table)  # pandas turns null and NaN alike into NaN
    frame = _frame_of(table)
    frame.attrs[NULL_ROWS_ATTR] = nulls
    return frame, {"file": path.name}


def _diag_target(path: Path, aliases: dict | None) -> tuple[pd.DataFrame, dict[str, Any]]:
    from regime_dash import ingest
    from regime_dash.analysis.structure.lines import file_ordered
    from regime_dash.analysis.view import NULL_ROWS_ATTR, null_rows

    table, report = ingest.parse(path, diag_only=True, aliases=aliases)
    nulls = null_rows(table)
    frame = _frame_of(table)
    frame.attrs[NULL_ROWS_ATTR] = nulls
    frame = file_ordered(frame)  # each row's own line: rejected lines make them differ from its place
    return frame, {"file": path.name, "rejected_lines": report.rejected_count,
                   "not_diag": ingest.report_reason(report, aliases)}


def _frame_of(table) -> pd.DataFrame:
    """``table`` as pandas as the store loads a run: a block per column, each Arrow column freed once
    converted (``table`` is used up), so the run is not held twice."""
    return table.to_pandas(split_blocks=True, self_destruct=True)


def require_diag(frame: pd.DataFrame, target: str, source: dict) -> None:
    """Raise :class:`~regime_dash.errors.NotDiagError` naming ``target`` unless it is a diag
    (:mod:`regime_dash.ingest.diag_rows`, the one definition ingest and the store use)."""
    from regime_dash.ingest.diag_rows import frame_reason, require_diag as refuse

    reason = source["not_diag"] if "not_diag" in source else frame_reason(frame)
    refuse(target, reason)


def diag_frame(target: str, store: str | None, aliases: dict | None) -> tuple[pd.DataFrame, dict]:
    """The run ``target`` names, its columns under their canonical names, refused unless it is a diag."""
    from regime_dash.diag.aliases import canonical_frame

    frame, source = load_target(target, store, aliases)
    frame = canonical_frame(frame, aliases)
    require_diag(frame, target, source)
    source.pop("not_diag", None)
    return frame, source


def check_options(**given: Any):
    """:class:`~regime_dash.analysis.CheckOptions` of the ``given`` values that are not None."""
    from regime_dash.analysis import CheckOptions

    return CheckOptions(**{k: v for k, v in given.items() if v is not None})


@dataclass(frozen=True)
class Checked:
    """One run checked: the report of the writer judged, where the run came from, and the verdict of each
    other writer of the file (empty where one wrote it)."""

    report: Any
    source: dict
    other_writers: dict = field(default_factory=dict)


def check_target(target: str, *, store: Any = None, aliases: dict | None = None,
                 only: Sequence[str] | None = None, options: Any = None, single: str | None = None,
                 notices: IO[str] | None = None, writer: str | None = None,
                 split_writers: bool = False) -> Checked:
    """The verdict of the run ``target`` names (core, module checks and findings: one verdict, of one writer's
    rows: ``writer``, else the first in the file), ``only`` those check ids if given; ``single``: the single
    path's run for a fused one; ``split_writers``: tell writers apart by the continuity of their state where no
    field names them. Every other writer is judged too, as a run of its own.

    ``notices`` is told before a long run's re-derivation loads its compiled loop (a compile, the first time).
    """
    from regime_dash.analysis import diagnose

    frame, source = diag_frame(target, store, aliases)
    twin = None if single is None else diag_frame(single, store, aliases)[0]
    note = rederivation_notice(len(frame))
    if note is not None and notices is not None:
        print(note, file=notices, flush=True)
    report = diagnose(frame, only, options, twin, writer=writer, split_writers=split_writers)
    st = report.verdict.structure
    others = {w: diagnose(frame, only, options, twin, writer=w, split_writers=split_writers).verdict
              for w in (st.writers if st is not None else ()) if w != st.writer}
    return Checked(report, source, others)


def rederivation_notice(rows: int) -> str | None:
    """What to say before a run of ``rows`` rows re-derives on the compiled loop that is not loaded yet."""
    from regime_dash.engine import rederive

    if rows >= rederive.PYTHON_ROWS and rederive.HAVE_NUMBA and not rederive.is_compiled():
        return (f"re-deriving {rows:,} rows: loading the compiled re-derivation loop (the first time in a "
                "checkout it compiles, about 10 s)")
    return None


def check_frame(frame: pd.DataFrame, single: pd.DataFrame | None = None):
    """The verdict of a run already read (:func:`regime_dash.analysis.diagnose`); ``single``: the single path's
    frame for a fused run."""
    from regime_dash.analysis import diagnose

    return diagnose(frame, single=single)


def check_store(store: Any, *, scheduler: Any = None, options: dict | None = None,
                aliases: dict | None = None, progress: Callable[[int, int], None] | None = None,
                verbose: bool = False) -> pd.DataFrame:
    """Every run of the store checked (through ``scheduler``: None, ``"local"``, an address), one summary row
    each (:func:`regime_dash.runs.check_all.check_all`); ``progress(done, total)`` as runs are checked;
    ``verbose``: a local cluster's workers log at dask's INFO level."""
    import functools

    from regime_dash.runs.check_all import check_all, store_check
    from regime_dash.store.open import open_store

    runs_store = open_store(store)
    runs = [r["run_id"] for r in runs_store.list_runs()]
    check = functools.partial(store_check, store=runs_store.root, options=options or {}, aliases=aliases)
    return check_all(runs, check, scheduler=scheduler, progress=progress, verbose=verbose)


def check_all_exit_code(statuses) -> int:
    """``check --all``'s exit status: 2 when a run could not be read (damaged, deleted meanwhile) or is
    not a diag (as ``check RUN`` exits for it), else 1 when a run failed, else 0."""
    from regime_dash.runs.check_all import NOT_DIAG

    statuses = list(statuses)
    if NOT_DIAG in statuses or "error" in statuses:
        return 2
    return 0 if all(s == "ok" for s in statuses) else 1


def diff_targets(a: str, b: str, *, store: Any = None, aliases: dict | None = None,
                 columns: Sequence[str] | None = None) -> tuple[Any, bool | None]:
    """``(diff, same bytes)``: two runs compared step by step (:func:`regime_dash.analysis.diff_runs`), and
    whether the two files are byte-identical (None unless both are files)."""
    from regime_dash.analysis import diff_runs

    fa, _ = diag_frame(a, store, aliases)
    fb, _ = diag_frame(b, store, aliases)
    result = diff_runs(fa, fb, columns)
    pa_, pb_ = Path(a), Path(b)
    return result, (_sha256(pa_) == _sha256(pb_) if pa_.is_file() and pb_.is_file() else None)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


__all__ = ["check_all_exit_code", "check_frame", "check_options", "check_store", "check_target", "diag_frame",
           "diff_targets", "load_target", "rederivation_notice", "require_diag", "user_aliases"]

"""Follow a growing diag into the store, and a followed run's verdict: what ``ingest --follow`` and
``check --follow`` do (:mod:`regime_dash.follow.follower` holds the follower itself)."""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator, Sequence


def follow_set(store: str | None, paths: Sequence[str], name: str | None = None, *, pattern: str = "*.jsonl",
               commit_every: float = 2.0, on_truncate: str = "segment", dashboard: str | None = None,
               max_line_mb: float | None = None, follow_symlinks: bool = False):
    """The :class:`~regime_dash.follow.follower.FollowSet` of ``paths`` (files, or folders of ``pattern``
    files) into the store, one run each; ``max_line_mb`` bounds a line (as it does a whole-file ingest's);
    ``follow_symlinks`` follows a path that is a symbolic link.

    Raises
    ------
    ValidationError
        ``commit_every`` is not seconds > 0.
    """
    from regime_dash.errors import ValidationError
    from regime_dash.follow.follower import FollowSet
    from regime_dash.store.open import open_store

    if commit_every is None or not commit_every > 0:
        raise ValidationError(f"--commit-every must be > 0 seconds, got {commit_every!r}",
                              field="commit_every", value=commit_every)
    if max_line_mb is not None and not max_line_mb > 0:
        raise ValidationError(f"--max-line-mb must be > 0, got {max_line_mb!r}", field="max_line_mb",
                              value=max_line_mb)
    kw = {} if max_line_mb is None else {"max_line_bytes": max(1, int(max_line_mb * 2**20))}
    runs = open_store(store, **kw)
    if kw:  # a store the caller opened takes the line limit too
        runs.max_line_bytes = kw["max_line_bytes"]
    return FollowSet(runs, paths, name, pattern=pattern, commit_every=commit_every,
                     on_truncate=on_truncate, dashboard=dashboard, follow_symlinks=follow_symlinks)


def check_webhook(url: str | None) -> None:
    """Refuse an alert webhook URL that is not http(s) (:class:`~regime_dash.errors.ValidationError`, naming it)
    before a follow starts; ``None`` is no webhook."""
    from regime_dash.follow.alerts import webhook_url

    if url is not None:
        webhook_url(url)


def follow_files(fset: Any, *, until_idle: float | None = None, on_commit: Callable[[Any], None] = lambda c: None,
                 on_alert: str | None = None, alert_webhook: str | None = None,
                 warn: Callable[[str], None] = lambda line: None,
                 should_stop: Callable[[], bool] = lambda: False) -> str:
    """Follow ``fset`` until it ends (``until_idle`` seconds without a new line, a stop, ``should_stop()``,
    Ctrl-C); returns why.

    Each commit goes to ``on_commit``; each alert it raises is sent to the hook command ``on_alert`` and the
    webhook ``alert_webhook`` in the background (``warn`` hears of a delivery that failed).
    """
    from regime_dash.follow.alerts import Dispatch
    from regime_dash.follow.follower import follow

    dispatch = Dispatch(on_alert, alert_webhook, warn=warn)

    def committed(c: Any) -> None:
        for a in c.alerts:
            dispatch.send(a.to_dict())
        on_commit(c)

    try:
        return follow(fset, until_idle=until_idle, on_commit=committed, should_stop=should_stop)
    finally:
        dispatch.close()


class RunFollow:
    """The verdict of a run being followed, commit by commit (:class:`~regime_dash.follow.follower.RunWatch`:
    each commit costs its own rows)."""

    def __init__(self, store: Any, target: str, options: Any = None):
        from regime_dash.follow.follower import RunWatch
        from regime_dash.store.open import open_store

        runs = open_store(store)
        self.run_id = runs.resolve(target)
        self.watch = RunWatch(runs, self.run_id, options)

    def verdicts(self, poll_every: float = 0.5, until_idle: float | None = None) -> Iterator[tuple[Any, int, Any]]:
        """``(verdict, rows, last step)`` at each commit, until the follower ends or ``until_idle`` seconds pass
        without a commit."""
        last_news, ended = time.monotonic(), False
        while True:
            got = self.watch.poll()
            if got is not None:
                last_news = time.monotonic()
                yield got, self.watch.verdict.rows, self.watch.verdict.last_step
                continue
            if ended:
                return
            if not self.watch.following():
                ended = True  # one more read: the rows of a last commit made just before the end
                continue
            if until_idle is not None and time.monotonic() - last_news >= until_idle:
                return
            time.sleep(poll_every)

    def unfinished(self) -> str | None:
        """Why the verdict does not cover the whole file, once its follower has stopped: it stopped without
        ending its follow (killed, or it crashed), or ended before the file's end without its
        ``--until-idle`` end. ``None`` when the follow ended with every line read, or still runs."""
        from regime_dash.follow.follower import END_KEY
        from regime_dash.store.append import FOLLOW_KEY

        meta = self.watch.store.meta(self.run_id)
        return follow_gap(meta.get(FOLLOW_KEY), meta.get(END_KEY), self.watch.following())


def follow_gap(follow: dict | None, end: dict | None, following: bool) -> str | None:
    """:meth:`RunFollow.unfinished` from the run's follow record, its end record and whether a follower
    still writes it."""
    if not follow or following:
        return None  # a run ingested whole, or a follow still going (the gate's own --until-idle ended it)
    if follow.get("active"):
        return (f"the follower (pid {follow.get('pid')} on {follow.get('host')}) stopped without ending its "
                f"follow (killed or crashed): the verdict covers the {follow.get('rows')} rows committed up to "
                f"line {follow.get('lines')} only; restart the follower to read the rest")
    if end is None or end.get("idle") or end.get("at_end"):
        return None  # ended at its --until-idle end or with every line read (or by a version that kept no record)
    unread = "" if end.get("size") is None else f" ({end['size'] - end.get('offset', 0)} bytes not read)"
    return (f"the follow ended before the file's end ({end.get('why')}){unread}: the verdict covers only "
            f"the lines read; restart the follower to read the rest")


__all__ = ["RunFollow", "check_webhook", "follow_files", "follow_gap", "follow_set"]

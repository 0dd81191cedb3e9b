"""Where a followed run's alerts go: a command run with the alert on stdin, and a webhook.

Both run beside the follow, never in its way: a command runs in a thread of its own, in a
process group of its own (at most ``timeout`` seconds, then the group is killed: the
processes it started go with it), and the webhook has one sender thread with a bounded
queue, a timeout per attempt and a bounded number of retries with backoff. The webhook's
URL is checked when the dispatch is made (http or https, with a host). An alert that
cannot be delivered is reported through ``warn`` (naming the URL or the command, and why)
and dropped: the follow goes on, and the sender goes on to the next alert whatever went
wrong. :meth:`Dispatch.close` waits a bounded time for what is in flight, then kills the
hooks still running with their groups and reports every alert the webhook did not deliver.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable

from regime_dash.errors import ValidationError
from regime_dash.text import clip

__all__ = ["Dispatch", "post_json", "run_hook", "webhook_url"]

#: Seconds a hook command may run.
HOOK_TIMEOUT = 30.0
#: Seconds one webhook attempt may take, attempts per alert, alerts queued at most.
WEBHOOK_TIMEOUT, WEBHOOK_ATTEMPTS, WEBHOOK_QUEUE = 5.0, 3, 1000
#: The URL schemes a webhook may have: anything else (``file:``, ``ftp:``) is no webhook.
WEBHOOK_SCHEMES = ("http", "https")
_POLL_S = 0.02  # how often a hook's thread looks whether its command has exited


def webhook_url(url: str) -> str:
    """``url`` when it is an http or https URL with a host.

    Raises
    ------
    ValidationError
        Any other URL (no scheme, ``file://``, ``ftp://``, no host, a bad port), naming it.
    """
    why = None
    try:
        parts = urllib.parse.urlsplit(str(url))
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as e:
        why = str(e)
    else:
        if parts.scheme.lower() not in WEBHOOK_SCHEMES:
            why = "not an http:// or https:// URL"
        elif not parts.hostname:
            why = "no host"
        elif any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in str(url)):
            why = "it holds a space or a control character"
    if why is not None:
        raise ValidationError(f"--alert-webhook {clip(repr(url), 200)} is not a webhook URL ({why}): give an "
                              f"http:// or https:// URL", field="alert_webhook", value=url)
    return str(url)


def _kill_group(pgid: int) -> None:
    """SIGKILL the process group ``pgid`` (its leader not yet reaped, so the id is still ours)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(pid: int, deadline: float) -> bool:
    """Wait until the child ``pid`` exits (left unreaped: its group id stays ours) or ``deadline``."""
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)


def run_hook(cmd: str, payload: dict[str, Any], timeout: float = HOOK_TIMEOUT,
             started: Callable[[subprocess.Popen], None] = lambda proc: None,
             ended: Callable[[subprocess.Popen], None] = lambda proc: None) -> tuple[int | None, str]:
    """Run ``cmd`` (a shell command line) with ``payload`` as JSON on stdin, in a process group of its
    own; (exit status or None, stderr's last 500 characters).

    Once the command exits, or at ``timeout`` seconds, its group is killed: a process it left behind
    dies with it. ``started`` and ``ended`` hear of the process (:meth:`Dispatch.close` kills the groups
    of hooks still running; ``ended`` is called before the process is reaped).
    """
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stderr:
        stdin.write(json.dumps(payload).encode())  # a file, not a pipe: a hook that never reads blocks nothing
        stdin.seek(0)
        try:
            proc = subprocess.Popen(cmd, shell=True, stdin=stdin, stdout=subprocess.DEVNULL, stderr=stderr,
                                    start_new_session=True)
        except OSError as e:
            return None, str(e)
        started(proc)
        try:
            done = _exited(proc.pid, time.monotonic() + timeout)
            _kill_group(proc.pid)
        finally:
            ended(proc)
            proc.wait()
        stderr.seek(max(0, stderr.seek(0, os.SEEK_END) - 2000))
        err = stderr.read().decode("utf-8", "replace")[-500:]
    if not done:
        return None, f"timed out after {timeout:g} s (its process group was killed)"
    return proc.returncode, err


def post_json(url: str, payload: dict[str, Any], timeout: float = WEBHOOK_TIMEOUT) -> int:
    """POST ``payload`` as JSON to the http(s) ``url``; the HTTP status (raises ``OSError`` /
    ``urllib.error.URLError`` / ``http.client.HTTPException``; :class:`ValidationError` for a URL
    that is not http(s))."""
    req = urllib.request.Request(webhook_url(url), data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "regime-dash"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - an http(s) URL, checked above
        return resp.status


def _reason(e: BaseException) -> str:
    """Why an attempt failed, in words: a timeout says so."""
    inner = getattr(e, "reason", None)
    if isinstance(e, TimeoutError) or isinstance(inner, TimeoutError):
        return "timed out"
    text = str(inner if inner is not None else e) or type(e).__name__
    return text if isinstance(e, OSError) else f"{type(e).__name__}: {text}"


class Dispatch:
    """Sends each alert to a hook command and/or a webhook without blocking the caller.

    Parameters
    ----------
    command
        Shell command line run once per alert with the alert's JSON on stdin.
    webhook
        URL the alert's JSON is POSTed to (http or https: else :class:`ValidationError`).
    warn
        Called with a line when a delivery fails (the CLI prints it to stderr).
    """

    def __init__(self, command: str | None = None, webhook: str | None = None, *,
                 warn: Callable[[str], None] = lambda line: None, hook_timeout: float = HOOK_TIMEOUT,
                 webhook_timeout: float = WEBHOOK_TIMEOUT, attempts: int = WEBHOOK_ATTEMPTS,
                 backoff: float = 1.0):
        self.command, self.webhook, self.warn = command, webhook_url(webhook) if webhook else None, warn
        self.hook_timeout, self.webhook_timeout = hook_timeout, webhook_timeout
        self.attempts, self.backoff = max(1, int(attempts)), backoff
        self._threads: list[threading.Thread] = []
        self._hooks: set[subprocess.Popen] = set()  # hooks running, their leaders not yet reaped
        self._queue: queue.Queue = queue.Queue(maxsize=WEBHOOK_QUEUE)
        self._sender: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._sending: dict[str, Any] | None = None  # the alert the sender is on
        self._reported: dict[int, dict] = {}  # alerts reported undelivered, by id (kept: their ids stay theirs)
        self.delivered = {"hook": 0, "webhook": 0}
        self.failed = {"hook": 0, "webhook": 0}

    def send(self, payload: dict[str, Any]) -> None:
        """Hand one alert over; returns at once."""
        if self.command:
            t = threading.Thread(target=self._hook, args=(payload,), name="alert-hook", daemon=True)
            t.start()
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
        if self.webhook:
            if self._sender is None:
                self._sender = threading.Thread(target=self._send_loop, name="alert-webhook", daemon=True)
                self._sender.start()
            try:
                self._queue.put_nowait(payload)
            except queue.Full:
                self._undelivered(payload, f"{WEBHOOK_QUEUE} alerts waiting")

    def _hook(self, payload: dict[str, Any]) -> None:
        try:
            code, err = run_hook(self.command, payload, self.hook_timeout, self._hook_started, self._hook_ended)
        except Exception as e:  # noqa: BLE001 - a hook's failure is reported, never the thread's end unsaid
            code, err = None, _reason(e)
        if code == 0:
            self.delivered["hook"] += 1
        else:
            self.failed["hook"] += 1
            self.warn(f"alert hook {self.command!r} for {payload.get('check')}: "
                      f"{'exit ' + str(code) if code is not None else ''} {err.strip()}".rstrip())

    def _hook_started(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._hooks.add(proc)
            closing = self._closing.is_set()
        if closing:  # started as the follow ended: it goes at once
            _kill_group(proc.pid)

    def _hook_ended(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._hooks.discard(proc)

    def _send_loop(self) -> None:
        while True:
            payload = self._queue.get()
            if payload is None:
                return
            with self._lock:
                self._sending = payload
            try:
                self._post(payload)
            except Exception as e:  # noqa: BLE001 - the sender outlives any one alert's failure
                self._undelivered(payload, _reason(e))
            finally:
                with self._lock:
                    self._sending = None
                self._queue.task_done()

    def _post(self, payload: dict[str, Any]) -> None:
        why = ""
        for attempt in range(self.attempts):
            try:
                status = post_json(self.webhook, payload, self.webhook_timeout)
                if 200 <= status < 300:
                    with self._lock:  # delivered: no longer "being sent" for close's report
                        self.delivered["webhook"] += 1
                        self._sending = None
                    return
                why = f"HTTP {status}"
            except Exception as e:  # noqa: BLE001 - a timeout, a refusal, a reply that is not HTTP: all reported
                why = _reason(e)
            if attempt + 1 < self.attempts and self._closing.wait(self.backoff * 2 ** attempt):
                break  # the follow ended: no more retries
        self._undelivered(payload, f"not delivered after {attempt + 1} attempt(s) ({why})")

    def _undelivered(self, payload: dict[str, Any], why: str) -> None:
        """Report ``payload`` not delivered by the webhook, once."""
        with self._lock:
            if id(payload) in self._reported:
                return
            self._reported[id(payload)] = payload
            self.failed["webhook"] += 1
        self.warn(f"alert webhook {self.webhook}: {payload.get('check')} {why}")

    def close(self, wait: float = 10.0) -> None:
        """Wait at most ``wait`` seconds for alerts in flight; then kill the hooks still running with their
        process groups, and report each alert the webhook has not delivered (queued, or being sent)."""
        end = time.monotonic() + wait
        if self._sender is not None:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                pass
        for t in [*self._threads, *([self._sender] if self._sender is not None else [])]:
            t.join(max(0.0, end - time.monotonic()))
        with self._lock:
            self._closing.set()
            for proc in self._hooks:
                _kill_group(proc.pid)
            left = [self._sending] if self._sending is not None else []
        while True:
            try:
                payload = self._queue.get_nowait()
            except queue.Empty:
                break
            if payload is not None:
                left.append(payload)
        for payload in left:
            self._undelivered(payload, f"not delivered: the follow ended while it was still being sent "
                                       f"(each attempt up to {self.webhook_timeout:g} s)")
        for t in self._threads:
            t.join(1.0)  # their groups are dead: the threads report and end

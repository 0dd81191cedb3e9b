"""Where a followed run's alerts go: a command run with the alert on stdin, and a webhook.

Both run beside the follow, never in its way: a command runs in a thread of its own
(at most ``timeout`` seconds, then it is killed), and the webhook has one sender
thread with a bounded queue, a timeout per attempt and a bounded number of retries
with backoff. An alert that cannot be delivered is reported through ``warn`` and
dropped: the follow goes on. :meth:`Dispatch.close` waits a bounded time for what
is in flight.
"""
from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable

__all__ = ["Dispatch", "post_json", "run_hook"]

#: Seconds a hook command may run.
HOOK_TIMEOUT = 30.0
#: Seconds one webhook attempt may take, attempts per alert, alerts queued at most.
WEBHOOK_TIMEOUT, WEBHOOK_ATTEMPTS, WEBHOOK_QUEUE = 5.0, 3, 1000


def run_hook(cmd: str, payload: dict[str, Any], timeout: float = HOOK_TIMEOUT) -> tuple[int | None, str]:
    """Run ``cmd`` (a shell command line) with ``payload`` as JSON on stdin; (exit status or None, stderr)."""
    try:
        done = subprocess.run(cmd, shell=True, input=json.dumps(payload).encode(), capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:g} s"
    except OSError as e:
        return None, str(e)
    return done.returncode, done.stderr.decode("utf-8", "replace")[-500:]


def post_json(url: str, payload: dict[str, Any], timeout: float = WEBHOOK_TIMEOUT) -> int:
    """POST ``payload`` as JSON; the HTTP status (raises ``OSError`` / ``urllib.error.URLError``)."""
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "regime-dash"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the user's own URL
        return resp.status


class Dispatch:
    """Sends each alert to a hook command and/or a webhook without blocking the caller.

    Parameters
    ----------
    command
        Shell command line run once per alert with the alert's JSON on stdin.
    webhook
        URL the alert's JSON is POSTed to.
    warn
        Called with a line when a delivery fails (the CLI prints it to stderr).
    """

    def __init__(self, command: str | None = None, webhook: str | None = None, *,
                 warn: Callable[[str], None] = lambda line: None, hook_timeout: float = HOOK_TIMEOUT,
                 webhook_timeout: float = WEBHOOK_TIMEOUT, attempts: int = WEBHOOK_ATTEMPTS,
                 backoff: float = 1.0):
        self.command, self.webhook, self.warn = command, webhook, warn
        self.hook_timeout, self.webhook_timeout = hook_timeout, webhook_timeout
        self.attempts, self.backoff = max(1, int(attempts)), backoff
        self._threads: list[threading.Thread] = []
        self._queue: queue.Queue = queue.Queue(maxsize=WEBHOOK_QUEUE)
        self._sender: threading.Thread | None = None
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
                self.failed["webhook"] += 1
                self.warn(f"alert webhook: {WEBHOOK_QUEUE} alerts waiting; alert {payload.get('check')} dropped")

    def _hook(self, payload: dict[str, Any]) -> None:
        code, err = run_hook(self.command, payload, self.hook_timeout)
        if code == 0:
            self.delivered["hook"] += 1
        else:
            self.failed["hook"] += 1
            self.warn(f"alert hook {self.command!r} for {payload.get('check')}: "
                      f"{'exit ' + str(code) if code is not None else ''} {err.strip()}".rstrip())

    def _send_loop(self) -> None:
        while True:
            payload = self._queue.get()
            if payload is None:
                return
            self._post(payload)
            self._queue.task_done()

    def _post(self, payload: dict[str, Any]) -> None:
        why = ""
        for attempt in range(self.attempts):
            try:
                status = post_json(self.webhook, payload, self.webhook_timeout)
                if 200 <= status < 300:
                    self.delivered["webhook"] += 1
                    return
                why = f"HTTP {status}"
            except (OSError, urllib.error.URLError) as e:  # a timeout is an OSError too
                why = str(getattr(e, "reason", e))
            if attempt + 1 < self.attempts:
                time.sleep(self.backoff * 2 ** attempt)
        self.failed["webhook"] += 1
        self.warn(f"alert webhook {self.webhook}: {payload.get('check')} not delivered after "
                  f"{self.attempts} attempt(s) ({why})")

    def close(self, wait: float = 10.0) -> None:
        """Wait at most ``wait`` seconds for alerts in flight, then return (their threads are daemons)."""
        end = time.monotonic() + wait
        for t in self._threads:
            t.join(max(0.0, end - time.monotonic()))
        if self._sender is not None:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                pass
            self._sender.join(max(0.0, end - time.monotonic()))

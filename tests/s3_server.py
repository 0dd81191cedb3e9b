"""A real S3-compatible server on 127.0.0.1 for the store tests: moto's standalone server, started as
a subprocess (``moto_server``), reached over HTTP by delta-rs's own object store, as a team's store
on S3 is. A test gets a fresh bucket; the server lives for the session."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid

import pytest

ACCESS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _command(port: int) -> list[str]:
    exe = shutil.which("moto_server")
    if exe:
        return [exe, "-H", "127.0.0.1", "-p", str(port)]
    return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]


class S3Server:
    """The running server: its endpoint, and the environment or storage options that reach it."""

    def __init__(self, port: int, proc: subprocess.Popen):
        self.port, self.proc = port, proc
        self.endpoint = f"http://127.0.0.1:{port}"

    def env(self) -> dict[str, str]:
        """What a process needs in its environment to reach the server (as a user sets it for a real S3)."""
        return {**ACCESS, "AWS_ENDPOINT_URL": self.endpoint}

    def options(self) -> dict[str, str]:
        return self.env()

    def bucket(self) -> str:
        import boto3

        name = f"store-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=self.endpoint, **{k.lower(): v for k, v in ACCESS.items()
                                                          if k != "AWS_REGION"},
                     region_name=ACCESS["AWS_REGION"]).create_bucket(Bucket=name)
        return name


def _start() -> S3Server:
    pytest.importorskip("moto.server", reason="moto[server] is not installed (requirements-test.txt)")
    pytest.importorskip("boto3")
    port = _free_port()
    proc = subprocess.Popen(_command(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"moto_server exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return S3Server(port, proc)
        time.sleep(0.1)
    proc.kill()
    pytest.fail("moto_server did not start within 30 s")


@pytest.fixture(scope="session")
def s3_server():
    server = _start()
    try:
        yield server
    finally:
        server.proc.terminate()
        try:
            server.proc.wait(10)
        except subprocess.TimeoutExpired:
            server.proc.kill()


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process: this checkout first on the path, plus ``extra``."""
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env

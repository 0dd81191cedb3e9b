"""``regime-dash app [--port N] [--store DIR] [--store-format F] [-- STREAMLIT OPTIONS]``: start the dashboard.

It runs ``streamlit run`` on the package's own entry script (``ui/launch/app.py``,
found through importlib.resources, so an installed package needs no checkout), with
the server options of the checkout's ``.streamlit/config.toml``: streamlit reads that
file only from the current directory, and an installed app is started from anywhere.
Options after ``--`` go to streamlit and win over these.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

from regime_dash.cli import help_of
from regime_dash.cli.store_args import add_store_format_argument
from regime_dash.errors import RegimeDashError

#: The package's streamlit entry script, relative to the package.
ENTRY = ("ui", "launch", "app.py")
#: The server options of ``.streamlit/config.toml`` (a test checks they agree), as ``--section.key``.
SERVER_OPTIONS: dict[str, str] = {
    "server.address": "127.0.0.1",
    "server.maxUploadSize": "2048",
    "server.enableXsrfProtection": "true",
    "server.headless": "true",
    "browser.gatherUsageStats": "false",
    "client.showErrorDetails": "type",
    "global.minCachedMessageSize": "1e+18",  # no message sent as a reference (config.toml says why)
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("app", help=help_of("app"),
                       description="Start the dashboard (streamlit) on 127.0.0.1; Ctrl-C stops it.")
    p.add_argument("--port", type=int, default=None, metavar="N", help="port to serve on (default: streamlit's, 8501)")
    p.add_argument("--store", metavar="STORE", default=None,
                   help="the run store: a folder or a Delta store's URI (default: $REGIME_DASH_STORE or "
                   "./data/store); the object store's credentials come from the environment")
    add_store_format_argument(p)
    p.add_argument("streamlit_args", nargs=argparse.REMAINDER, metavar="-- STREAMLIT OPTIONS",
                   help="more `streamlit run` options, after `--` (e.g. -- --server.address 0.0.0.0)")
    p.set_defaults(func=run_app)


def entry_script() -> Path:
    """The entry script's path on disk (a real file: streamlit runs it by path)."""
    return Path(str(resources.files("regime_dash").joinpath(*ENTRY)))


def streamlit_command(port: int | None = None, extra: list[str] | None = None) -> list[str]:
    """The ``python -m streamlit run`` command line: the entry, the config options, ``extra`` last."""
    extra = [a for a in (extra or []) if a != "--"]
    given = {a.split("=", 1)[0].lstrip("-") for a in extra if a.startswith("--")}
    cmd = [sys.executable, "-m", "streamlit", "run", str(entry_script())]
    options = dict(SERVER_OPTIONS, **({"server.port": str(port)} if port is not None else {}))
    for key, value in options.items():
        if key not in given:
            cmd += [f"--{key}", value]
    return cmd + extra


def run_app(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("streamlit") is None:
        raise RegimeDashError("the dashboard needs streamlit, which is not installed here "
                              "(pip install -r requirements.txt, or pip install regime-dash)")
    if not entry_script().is_file():
        raise RegimeDashError(f"the app's entry script {entry_script()} is missing: the package install is broken")
    if args.store:
        from regime_dash.store.location import parse_location

        parse_location(args.store)  # an unknown scheme is said here, not in the browser
    env = dict(os.environ, **({"REGIME_DASH_STORE": args.store} if args.store else {}))
    if args.store_format:
        from regime_dash.store.open import FORMAT_ENV_VAR, store_format

        env[FORMAT_ENV_VAR] = store_format(args.store_format)  # a bad format is said here too
    cmd = streamlit_command(args.port, args.streamlit_args)
    if os.name == "posix":
        sys.stdout.flush()
        os.execve(sys.executable, cmd, env)  # the server becomes this process: signals reach it directly
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 130

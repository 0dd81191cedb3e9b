"""``regime-dash <command>`` (or ``python -m regime_dash <command>``): the command-line shell.

Each command lives in a module under ``regime_dash/cli/`` that exposes
``register(subparsers)``, which adds its parser (or parsers) and sets ``func`` to a
handler ``func(args) -> int`` (the process exit code). Adding a command is adding its
line to :data:`COMMANDS`; nothing else here changes.

Start-up stays lean: the parser registers only the module of the command being run.
Every other command is listed by its name and its one-line help from :data:`COMMANDS`,
so ``--help`` imports no command module at all, and no command module imports pandas,
numba or pyarrow before its handler runs.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from typing import Sequence, TextIO

#: command -> (its module under regime_dash/cli, its one line in ``--help``), in ``--help``'s order.
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("ingest", "store diag.jsonl files (plain or .gz) as runs"),
    "runs": ("runs", "list the runs in the store"),
    "rm": ("runs", "delete a run from the store, or remove an alias of one"),
    "restore": ("team_store", "bring back a removed run (a Delta store, within its retention window)"),
    "store": ("team_store", "store upkeep: migrate a folder store into a Delta store, vacuum old versions"),
    "tag": ("labels", "add tags to a run"),
    "untag": ("labels", "remove tags from a run"),
    "note": ("labels", "set a run's note"),
    "rename": ("labels", "give a run a new name (its id stays)"),
    "check": ("check", "check a run against the spec's invariants and success criteria"),
    "diff": ("check", "compare two runs step by step (F3 byte-identical check)"),
    "doctor": ("doctor", "list what is damaged or stray in the run store (--repair moves it aside)"),
    "replay": ("replay", "replay a stream, a scenario preset or a closed-loop live run; write its diag"),
    "sweep": ("sweep", "replay a stream under a grid of configs; one summary row per config"),
    "sensitivity": ("sensitivity", "sweep every config field around a base config: what moves which metric"),
    "repair": ("repair", "search the config that would have passed a run's checks, verified by full replays"),
    "bench": ("bench", "run a benchmark (ingest, ...) and print its figures"),
    "modules": ("modules", "list, replay and sweep the controller modules (SP14, SP18, Pearl C, ...)"),
    "app": ("app", "start the dashboard (streamlit) in the browser"),
}


def help_of(command: str) -> str:
    """The one-line help of ``command`` (a key of :data:`COMMANDS`), for its module's parser."""
    return COMMANDS[command][1]


def _chosen(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first word, when that is a command."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in COMMANDS else None


def _prog() -> str:
    """The name the CLI was started by: ``regime-dash`` (the console script) or ``python -m regime_dash``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "regime-dash" if name.startswith("regime-dash") else "python -m regime_dash"


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv`` (default ``sys.argv[1:]``): the chosen command's module registers
    its parsers in full, every other command is its name and help line."""
    parser = Parser(
        prog=_prog(),
        description="Diagnose the regime-observer risk stack: ingest diag.jsonl runs, "
        "replay the kernel pipeline, check runs against the spec.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chosen = _chosen(sys.argv[1:] if argv is None else argv)
    wanted = None if chosen is None else COMMANDS[chosen][0]
    for name, (module, line) in COMMANDS.items():
        if module != wanted:
            sub.add_parser(name, help=line)
        elif name == next(n for n, (m, _) in COMMANDS.items() if m == module):
            importlib.import_module(f"regime_dash.cli.{module}").register(sub)  # all of its commands
    return parser


def say(text: object = "", *, file: TextIO | None = None, flush: bool = False) -> None:
    """Print ``text`` as one line (or several) of the CLI's output, its control characters escaped.

    File names, keys, run names and values from files reach most lines; printed raw, an ESC
    sequence in one moves the cursor, recolours or clears the terminal. Every line a command
    prints goes through here (``tests/test_hostile_store.py`` checks that ``cli/`` has no other
    ``print``); JSON goes through :func:`say_json`. ``text``'s own newlines and tabs stay (a report
    of several lines): a value put in it (a name, a path, a reason) is escaped first with
    :func:`regime_dash.text.terminal_safe`, newlines and all, so it cannot start a line of its own.
    """
    from regime_dash.text import terminal_safe

    stream = sys.stdout if file is None else file
    stream.write(terminal_safe(str(text), lines=True) + "\n")
    if flush:
        stream.flush()


def error_text(exc: BaseException) -> str:
    """An error's message as one line, its values' newlines escaped (a path or a name in it cannot
    start a line); a lazy stream check's problems (:class:`~regime_dash.errors.StreamErrors`) one a line."""
    from regime_dash.text import terminal_safe

    problems = getattr(exc, "errors", None)
    if isinstance(problems, list) and problems:
        return (f"{len(problems)} problem(s) in the stream:"
                + "".join(f"\n  - {terminal_safe(e)}" for e in problems))
    return terminal_safe(exc)


def say_json(doc: object, *, flush: bool = False, **dumps: object) -> None:
    """Print ``doc`` as JSON (``dumps``: :func:`json.dumps`'s options). JSON writes every control
    character as ``\\u00XX`` but DEL, which is written so here: no raw one reaches the terminal,
    and the text stays JSON."""
    import json

    sys.stdout.write(json.dumps(doc, **dumps).replace("\x7f", "\\u007f") + "\n")
    if flush:
        sys.stdout.flush()


class Parser(argparse.ArgumentParser):
    """argparse's parser, its error messages (which echo the argument given) printed escaped."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        from regime_dash.text import terminal_safe

        say(f"{self.prog}: error: {terminal_safe(message)}", file=sys.stderr)
        sys.exit(2)


def script(argv: list[str] | None = None) -> int:
    """The ``regime-dash`` command and ``python -m regime_dash``: :func:`main`, its objects then frozen
    (``gc.freeze``) so the interpreter's exit frees them without its final collections walking every
    object pandas, pyarrow and numba made (0.2-0.3 s of every command). The command's files are closed
    by then; the standard streams are flushed at exit all the same."""
    code = main(argv)
    gc.freeze()
    if argv is None and "deltalake" in sys.modules:
        # delta-rs's runtime threads can abort the interpreter's finalization (SIGABRT, "terminate called
        # without an active exception") after the command's work is done: its output flushed, the process
        # (this is its entry: no argv given) ends here; a caller in-process gets the code back
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def was_interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C in disguise: Python 3.11 wraps an exception raised in ``__set_name__`` (as
    a KeyboardInterrupt can be, landing while a module defines its dataclasses) in a RuntimeError."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def main(argv: list[str] | None = None) -> int:
    from regime_dash.errors import RegimeDashError

    try:
        args = build_parser(argv).parse_args(argv)
        return int(args.func(args) or 0)
    except RegimeDashError as exc:
        say(f"error: {error_text(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C is the user's word, not a bug: no traceback
        say("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: its traceback, escaped (it may quote a file's key or name)
        if was_interrupted(exc):
            say("interrupted", file=sys.stderr)
            return 130
        import traceback  # only for a bug: its import is ~7 ms of every command's start

        say(traceback.format_exc().rstrip("\n"), file=sys.stderr)
        return 1

"""The options every command that reads or writes the store takes: ``--store`` (a folder or a URI),
``--storage-option KEY=VALUE`` (repeatable) and ``--store-format`` (a new local store's format)."""
from __future__ import annotations

import argparse
from typing import Any

__all__ = ["STORE_HELP", "add_store_arguments", "add_store_format_argument", "open_from"]

STORE_HELP = ("the run store: a folder, or a Delta store's URI (s3://, gs://, az://, file://) "
              "(default: $REGIME_DASH_STORE or ./data/store)")


def add_store_arguments(p: argparse.ArgumentParser, help: str = STORE_HELP) -> None:
    """Add ``--store``, ``--storage-option`` and ``--store-format`` to the parser ``p``."""
    p.add_argument("--store", metavar="STORE", default=None, help=help)
    p.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE", dest="storage_option",
                   help="an option of the object store, beyond the cloud's environment variables "
                   "(e.g. AWS_ENDPOINT_URL=http://127.0.0.1:9000; repeat: each one)")
    add_store_format_argument(p)


def add_store_format_argument(p: argparse.ArgumentParser) -> None:
    """Add ``--store-format`` (a new local store's format) to the parser ``p``."""
    p.add_argument("--store-format", metavar="FORMAT", default=None,
                   help="a new local store's format: folder or delta (default: $REGIME_DASH_STORE_FORMAT, "
                   "else folder; an existing store keeps its own; a URI is always a Delta store)")


def open_from(args: argparse.Namespace, **kw: Any):
    """The store ``args`` name (:func:`regime_dash.store.open.open_store`); ``kw``: the store's keywords."""
    from regime_dash.store.open import open_store

    return open_store(args.store, args.storage_option or None, store_format_asked=args.store_format, **kw)

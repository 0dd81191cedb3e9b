"""Where a store lives: a local folder, or a URI on object storage, and how to reach it.

``--store`` and ``REGIME_DASH_STORE`` take either

- a local path (relative or absolute; the default is ``data/store`` under the working
  directory), or ``file:///an/absolute/path``;
- ``s3://bucket/prefix`` (also ``s3a://``), ``gs://bucket/prefix``, ``az://container/prefix``
  (also ``abfs://`` and ``abfss://``).

Anything of the form ``scheme://...`` is a URI: an unknown scheme is refused with its name,
never taken for a folder (``s3:/team/runs`` would otherwise be made in the working directory).

Credentials and endpoints come the way delta-rs (and so the clouds' own tools) take them: its
object stores read the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ``GOOGLE_APPLICATION_CREDENTIALS``,
``AZURE_STORAGE_ACCOUNT_NAME``, ``AZURE_STORAGE_ACCOUNT_KEY``, ...); ``--storage-option
KEY=VALUE`` adds or overrides one option (delta-rs's key names). One convenience only: an
``http://`` endpoint (a local S3-compatible server) turns on ``AWS_ALLOW_HTTP``, which the object
store refuses plain HTTP without. Nothing unsafe is ever set here: a team store on S3 relies on
S3's conditional writes, which delta-rs uses by default (see :mod:`regime_dash.store.delta`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping
from urllib.parse import unquote, urlsplit

from regime_dash.errors import StoreError, ValidationError

__all__ = ["ENV_VAR", "REMOTE_SCHEMES", "StoreLocation", "default_location", "is_uri", "parse_location",
           "parse_storage_options"]

#: The environment variable naming the default store (a path or a URI).
ENV_VAR = "REGIME_DASH_STORE"

#: URI schemes of object stores delta-rs writes, by the family of options each takes.
REMOTE_SCHEMES: dict[str, str] = {"s3": "aws", "s3a": "aws", "gs": "google", "az": "azure",
                                  "abfs": "azure", "abfss": "azure"}

_URI_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.S)
_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
#: Options whose values a store's description never shows.
_SECRET = re.compile(r"SECRET|TOKEN|PASSWORD|KEY$|ACCOUNT_KEY|SAS|CREDENTIAL", re.I)


@dataclass(frozen=True)
class StoreLocation:
    """A parsed store location.

    Attributes
    ----------
    uri
        What delta-rs is handed: an absolute local path, or the URI as given (no trailing ``/``).
    scheme
        ``None`` for a local store, else the URI's scheme in lower case.
    storage_options
        Options for delta-rs's object store, beyond what it reads from the environment.
    """

    uri: str
    scheme: str | None = None
    storage_options: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.scheme is None

    @property
    def path(self) -> Path:
        """The local folder (only for a local store)."""
        if not self.is_local:
            raise StoreError(f"store {self.uri!r} is on object storage, not a local folder", path=self.uri)
        return Path(self.uri)

    def join(self, *names: str) -> str:
        """The URI (or local path) of ``names`` under the store."""
        tail = "/".join(n.strip("/") for n in names if n)
        return f"{self.uri}/{tail}" if tail else self.uri

    def options(self) -> dict[str, str]:
        """The storage options as a plain dict (a fresh one: delta-rs may keep it)."""
        return dict(self.storage_options)

    def describe(self) -> str:
        """The location with its explicit options, secrets masked (for messages and logs)."""
        shown = {k: ("***" if _SECRET.search(k) else v) for k, v in sorted(self.storage_options.items())}
        return self.uri if not shown else f"{self.uri} ({', '.join(f'{k}={v}' for k, v in shown.items())})"

    def __str__(self) -> str:
        return self.uri


def is_uri(where: object) -> bool:
    """Whether ``where`` is written as a URI (``scheme://...``), whatever the scheme."""
    return isinstance(where, str) and _URI_RE.match(where) is not None


def parse_storage_options(items: Iterable[str] | Mapping[str, str] | None) -> dict[str, str]:
    """``KEY=VALUE`` texts (``--storage-option``, repeatable) as a dict; a mapping is checked as is.

    Raises
    ------
    ValidationError
        An item without ``=``, or a key that is not a name (letters, digits, ``_.-``).
    """
    if items is None:
        return {}
    pairs = list(items.items()) if isinstance(items, Mapping) else []
    if not isinstance(items, Mapping):
        for item in items:
            key, sep, value = str(item).partition("=")
            if not sep:
                raise ValidationError(f"storage option {str(item)[:80]!r} is not KEY=VALUE", field="storage_option",
                                      value=str(item)[:80])
            pairs.append((key.strip(), value))
    out: dict[str, str] = {}
    for key, value in pairs:
        if not _KEY_RE.match(str(key)):
            raise ValidationError(f"storage option key {str(key)[:80]!r} is not a name (letters, digits, _.-)",
                                  field="storage_option", value=str(key)[:80])
        out[str(key)] = str(value)
    return out


def _with_http(scheme: str, options: dict[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """An ``http://`` S3 endpoint allowed (the object store refuses plain HTTP unless told)."""
    if REMOTE_SCHEMES.get(scheme) != "aws":
        return options
    endpoint = next((options[k] for k in options if k.upper() in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "ENDPOINT_URL",
                                                                "ENDPOINT")), env.get("AWS_ENDPOINT_URL", ""))
    has_flag = any(k.upper() in ("AWS_ALLOW_HTTP", "ALLOW_HTTP") for k in options) or "AWS_ALLOW_HTTP" in env
    if str(endpoint).lower().startswith("http://") and not has_flag:
        options = {**options, "AWS_ALLOW_HTTP": "true"}
    return options


def parse_location(where: str | os.PathLike | StoreLocation | None = None,
                   storage_options: Iterable[str] | Mapping[str, str] | None = None,
                   env: Mapping[str, str] | None = None) -> StoreLocation:
    """The store ``where`` names (default: ``$REGIME_DASH_STORE``, else ``data/store``).

    Parameters
    ----------
    where
        A local path, a ``file://`` URI or an object store URI (see the module doc).
    storage_options
        ``KEY=VALUE`` texts or a mapping: options for delta-rs's object store.
    env
        The environment to read (default: ``os.environ``).

    Raises
    ------
    StoreError
        A URI of a scheme no store supports (naming it), a URI without a bucket, or a
        ``file://`` URI that is not a local absolute path.
    """
    env = os.environ if env is None else env
    options = parse_storage_options(storage_options)
    if isinstance(where, StoreLocation):
        return StoreLocation(where.uri, where.scheme, {**where.storage_options, **options})
    if where is None or (isinstance(where, str) and not where.strip()):
        where = env.get(ENV_VAR) or str(Path.cwd() / "data" / "store")
    text = os.fspath(where)
    m = _URI_RE.match(text)
    if m is None:
        if options:
            raise StoreError(f"storage options ({', '.join(sorted(options))}) are for object storage; "
                             f"{text!r} is a local folder", path=text)
        return StoreLocation(str(Path(text).expanduser().absolute()))
    scheme, rest = m.group(1).lower(), m.group(2)
    if scheme == "file":
        return _file_location(text, options)
    if scheme not in REMOTE_SCHEMES:
        known = ", ".join(f"{s}://" for s in ("file", *REMOTE_SCHEMES))
        raise StoreError(f"store {text!r}: unknown scheme {scheme!r} (a store is a local folder or one of "
                         f"{known})", path=text)
    if not rest.split("/", 1)[0]:
        raise StoreError(f"store {text!r} names no bucket or container", path=text)
    return StoreLocation(f"{scheme}://{rest.rstrip('/')}", scheme, _with_http(scheme, options, env))


def _file_location(text: str, options: dict[str, str]) -> StoreLocation:
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise StoreError(f"store {text!r}: a file:// URI names a local absolute path (file:///path), "
                         f"not host {parts.netloc!r}", path=text)
    path = unquote(parts.path)
    if not path.startswith("/"):
        raise StoreError(f"store {text!r}: a file:// URI needs an absolute path", path=text)
    if options:
        raise StoreError(f"storage options ({', '.join(sorted(options))}) are for object storage; "
                         f"{text!r} is a local folder", path=text)
    return StoreLocation(str(Path(path)))


def default_location() -> StoreLocation:
    """The store of ``$REGIME_DASH_STORE`` (a path or a URI), else ``data/store`` under the cwd."""
    return parse_location(None)

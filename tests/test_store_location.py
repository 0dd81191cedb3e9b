"""Where a store lives: local paths and URIs, storage options, the errors for what is neither."""
from __future__ import annotations

from pathlib import Path

import pytest

from regime_dash.errors import StoreError, ValidationError
from regime_dash.store.location import ENV_VAR, parse_location, parse_storage_options


def test_a_local_path_is_made_absolute_and_the_default_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    loc = parse_location("runs/store")
    assert loc.is_local and loc.uri == str(tmp_path / "runs" / "store") and loc.path == tmp_path / "runs" / "store"
    assert parse_location(None, env={}).uri == str(tmp_path / "data" / "store")
    assert parse_location(None, env={ENV_VAR: "s3://team/runs"}).scheme == "s3"
    assert parse_location("file:///srv/runs%20a").uri == str(Path("/srv/runs a"))


@pytest.mark.parametrize("uri,scheme", [("s3://team/runs/", "s3"), ("S3://team/runs", "s3"), ("s3a://b/p", "s3a"),
                                        ("gs://bucket/runs", "gs"), ("az://container/runs", "az"),
                                        ("abfss://c@acct.dfs.core.windows.net/runs", "abfss")])
def test_object_store_uris_are_never_local_paths(uri, scheme):
    loc = parse_location(uri, env={})
    assert loc.scheme == scheme and not loc.is_local and not loc.uri.endswith("/")
    assert loc.uri.split("://", 1)[1] == uri.split("://", 1)[1].rstrip("/")
    with pytest.raises(StoreError, match="object storage"):
        loc.path  # noqa: B018 - the property raises


@pytest.mark.parametrize("uri", ["hdfs://namenode/runs", "http://host/runs", "ftp://x/y", "s4://team/runs"])
def test_an_unknown_scheme_is_an_error_naming_it(uri, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scheme = uri.split("://")[0]
    with pytest.raises(StoreError, match=f"unknown scheme '{scheme}'"):
        parse_location(uri)
    assert list(tmp_path.iterdir()) == []  # no folder named after the URI was made


@pytest.mark.parametrize("bad,match", [("s3://", "names no bucket"), ("file://host/x", "not host 'host'"),
                                       ("file://relative", "not host 'relative'")])
def test_malformed_uris_are_refused(bad, match):
    with pytest.raises(StoreError, match=match):
        parse_location(bad, env={})


def test_storage_options_parse_and_an_http_endpoint_is_allowed():
    opts = parse_storage_options(["AWS_ENDPOINT_URL=http://127.0.0.1:9000", "AWS_REGION=eu-west-1", "x.y=a=b"])
    assert opts == {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1", "x.y": "a=b"}
    loc = parse_location("s3://team/runs", ["AWS_ENDPOINT_URL=http://127.0.0.1:9000",
                                            "AWS_SECRET_ACCESS_KEY=hush"], env={})
    assert loc.options()["AWS_ALLOW_HTTP"] == "true"
    assert "hush" not in loc.describe() and "AWS_SECRET_ACCESS_KEY=***" in loc.describe()
    from_env = parse_location("s3://team/runs", env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
    assert from_env.options() == {"AWS_ALLOW_HTTP": "true"}
    https = parse_location("s3://team/runs", ["AWS_ENDPOINT_URL=https://s3.example"], env={})
    assert "AWS_ALLOW_HTTP" not in https.options()  # nothing is loosened for a real endpoint
    assert "AWS_S3_ALLOW_UNSAFE_RENAME" not in https.options()


@pytest.mark.parametrize("bad", ["NOEQUALS", "=value", "bad key=1"])
def test_a_bad_storage_option_is_an_error_naming_it(bad):
    with pytest.raises(ValidationError, match="storage option"):
        parse_storage_options([bad])


def test_storage_options_for_a_local_store_are_refused(tmp_path):
    with pytest.raises(StoreError, match="are for object storage"):
        parse_location(str(tmp_path), ["AWS_REGION=x"])

"""Names, redaction and tracking-URI checks (no MLflow store needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapterfleet.registry import (
    REDACTED,
    RegistryError,
    adapter_model_name,
    check_tracking_uri,
    default_artifact_location,
    default_tracking_uri,
    fusion_model_name,
    parse_model_name,
    redact,
    safe_uri,
)


def test_model_names_round_trip() -> None:
    assert adapter_model_name("af", "rte") == "af.adapter.rte"
    assert fusion_model_name("team.af", "rte") == "team.af.fusion.rte"
    assert parse_model_name("team.af.fusion.rte") == ("team.af", "fusion", "rte")
    assert parse_model_name("af.adapter.glue.mrpc") == ("af", "adapter", "glue.mrpc")
    assert parse_model_name("something-else") is None
    for bad in ("", "a/b", "a:b", "a b", "it's"):
        with pytest.raises(ValueError):
            adapter_model_name("af", bad)


def test_redact_secret_keys_and_uri_credentials() -> None:
    out = redact(
        {
            "lr": 0.001,
            "hf_token": "hf_abc",
            "DB_PASSWORD": "pw",
            "api_key": "k",
            "aws_secret_access_key": "s",
            "credentials_file": "/x",
            "db_url": "postgresql://bob:pw@db:5432/x",
            "plain_url": "http://host:5000/x",
            "author": "ann",
        }
    )
    assert out["lr"] == "0.001"
    assert out["plain_url"] == "http://host:5000/x"
    assert out["author"] == "ann"
    secret = ("hf_token", "DB_PASSWORD", "api_key", "aws_secret_access_key")
    for key in (*secret, "credentials_file", "db_url"):
        assert out[key] == REDACTED, key
    assert safe_uri("https://bob:pw@host/x") == "https://***@host/x"


def test_default_uri_and_sqlite_check_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "a" / "b"
    uri = default_tracking_uri(home)
    assert uri == f"sqlite:///{home}/mlflow.db"
    assert default_artifact_location(uri) == (home / "mlartifacts").as_uri()
    check_tracking_uri(uri)  # the folder can be made: the check makes nothing
    assert not (tmp_path / "a").exists()


def test_sqlite_check_fails_when_folder_cannot_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    uri = f"sqlite:///{blocker}/sub/mlflow.db"
    with pytest.raises(RegistryError) as err:
        check_tracking_uri(uri)
    message = str(err.value)
    assert uri in message and "cannot create the store's folder" in message
    assert "\n" not in message


def test_http_check_on_closed_port_is_fast_and_clear() -> None:
    import socket
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uri = f"http://user:secret@127.0.0.1:{port}"
    start = time.monotonic()
    with pytest.raises(RegistryError) as err:
        check_tracking_uri(uri, timeout=2)
    assert time.monotonic() - start < 3
    message = str(err.value)
    assert f"127.0.0.1:{port}" in message and "no answer" in message
    assert "mlflow server" in message
    assert "secret" not in message
    assert message.endswith("or fix the tracking URI"), message


def test_a_dead_server_named_by_the_environment_says_where_to_fix_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A config without tracking_uri takes $MLFLOW_TRACKING_URI; "fix the tracking URI" named
    no place, and the config had none to fix."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uri = f"http://user:secret@127.0.0.1:{port}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    with pytest.raises(RegistryError) as err:
        check_tracking_uri(uri, timeout=2)
    assert str(err.value).endswith("or fix the tracking URI (it comes from $MLFLOW_TRACKING_URI)")


def test_a_version_and_a_run_show_short_in_a_notebook() -> None:
    # A notebook's `summary` printed 12,257 characters: every version's tags, settings JSON too.
    from adapterfleet.registry import ModelVersionInfo
    from adapterfleet.registry.results import RunData

    tags = {"settings": '{"max_length": 128}' * 200, "metric": "accuracy"}
    info = ModelVersionInfo("demo.adapter.rte", 3, "runs:/r/adapter", "r", ("best",), tags)
    assert repr(info) == (
        "ModelVersionInfo(name='demo.adapter.rte', version=3, source='runs:/r/adapter', "
        "run_id='r', aliases=('best',), created_ms=None)"
    )
    run = RunData("r", 1, tags, {"train.learning_rate": "0.001"}, {"best_dev_accuracy": 0.75})
    assert repr(run) == "RunData(run_id='r', start_time=1, metrics={'best_dev_accuracy': 0.75})"

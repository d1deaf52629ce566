"""A tracking URI that carries its login (`http://user:password@host`) against a real
`mlflow server --app-name basic-auth` (issue #22, item 1): it works, because the login moves into
MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD where the URI is resolved, and the password
is never printed, logged or stored: not by our lines, not by MLflow's own (`View run ... at:
<uri>` prints the URI it was given), not in the experiment's tags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from mlflow import MlflowClient

from adapterfleet.config import load_config
from adapterfleet.masking import mask, masked_setting
from adapterfleet.registry import (
    RegistryError,
    ensure_experiment,
    open_trial_run,
    pull,
    register_version,
)
from adapterfleet.registry.descriptions import COMMAND_ENV, command_line
from adapterfleet.registry.tags import TAG_OVERRIDES

pytestmark = pytest.mark.integration
pytest.importorskip("flask_wtf", reason="the basic-auth app needs mlflow[auth] (make install)")

ADMIN = "admin"
CONFIG = """name: {name}
data_root: .
storage: {storage}
tasks:
  a: {{train: t.tsv, dev: t.tsv, text_fields: [sentence], label_names: ["0", "1"]}}
adapters: {{reduction_factors: [16]}}
"""


def _login_uri(uri: str, password: str, user: str = ADMIN) -> str:
    return uri.replace("http://", f"http://{user}:{password}@")


def _config(tmp_path: Path, name: str) -> Path:
    (tmp_path / "t.tsv").write_text("sentence\tlabel\na b\t0\nc d\t1\n")
    path = tmp_path / "pipe.yaml"
    path.write_text(CONFIG.format(name=name, storage=tmp_path / "runs"))
    return path


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    env.update(HF_HUB_OFFLINE="1", MLFLOW_DISABLE_TELEMETRY="true", HOME=str(cwd))
    return subprocess.run(
        [sys.executable, "-m", "adapterfleet.cli.app", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=300,
    )  # fmt: skip


@pytest.fixture
def clean_login(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's login variables empty now and restored after (the URI's login lands there)."""
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_URI"):
        monkeypatch.setenv(name, "")


def test_a_login_in_the_uri_registers_and_pulls_and_is_never_printed(
    auth_server: tuple[str, str],
    clean_login: None,
    tmp_path: Path,
    new_name: Callable[[str], str],
    make_adapter: Callable[..., Path],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri, password = auth_server
    # MLflow's `View run ... at` links are off by default (registry.store.get_client); a user
    # who turns them on still never sees the password in them
    monkeypatch.setenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "false")
    name = new_name("login-uri")
    config = load_config(_config(tmp_path, name), [f"tracking_uri={_login_uri(uri, password)}"])
    assert config.tracking_uri == uri  # the login left the URI ...
    assert os.environ["MLFLOW_TRACKING_PASSWORD"] == password  # ... for MLflow's variables
    experiment = ensure_experiment(config.tracking_uri, config.name)
    run = open_trial_run(config.tracking_uri, experiment, None, new_name("trial"))
    folder = make_adapter(tmp_path / "adapter")
    run.log_artifacts(folder, "adapter")
    run.end()
    model = f"{name}.adapter.a"
    register_version(
        config.tracking_uri, model, run.run_id, "adapter", folder / "adapter.safetensors"
    )
    pulled = pull(config.tracking_uri, model, tmp_path / "pulled")
    assert (pulled / "adapter.safetensors").is_file()
    out, err = capfd.readouterr()
    assert f"at: {uri}/#/experiments/{experiment}" in out + err  # MLflow's `View run ...`
    assert password not in out + err


def test_the_cli_masks_the_login_and_refuses_before_creating_the_experiment(
    auth_server: tuple[str, str], tmp_path: Path, new_name: Callable[[str], str]
) -> None:
    uri, password = auth_server
    name = new_name("login-cli")
    config = _config(tmp_path, name)
    login = f"tracking_uri={_login_uri(uri, password)}"
    listed = _cli("adapters", "-c", str(config), "-o", login, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    ui = _cli("ui", "-c", str(config), "-o", login, cwd=tmp_path)
    assert ui.returncode == 0 and f"the tracking store {uri} is a server" in ui.stdout, ui.stderr
    # a pipeline refused for its resources: its validating line names the store, masked, and
    # the refusal comes before the experiment exists
    refused = _cli("run", str(config), "-o", login, "-o", "resources.cpu=512", cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"validating (1 task, tracking {uri})" in refused.stdout
    assert refused.stderr.startswith("error: resources: a trial needs cpu=512")
    for result in (listed, ui, refused):
        assert password not in result.stdout + result.stderr
        assert "Traceback" not in result.stderr
    os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = ADMIN, password
    try:
        assert MlflowClient(uri).get_experiment_by_name(name) is None
    finally:
        del os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"]


def test_a_wrong_or_contradicted_login_in_the_uri_is_one_clear_line(
    auth_server: tuple[str, str], tmp_path: Path, new_name: Callable[[str], str]
) -> None:
    uri, password = auth_server
    config = _config(tmp_path, new_name("login-bad"))
    wrong = password[::-1] + "!"
    bad = _cli(
        "adapters", "-c", str(config), "-o", f"tracking_uri={_login_uri(uri, wrong)}", cwd=tmp_path
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"error: tracking URI {uri}: the server asks for a login (HTTP 401) and the credentials "
        f"of user '{ADMIN}' were refused; set MLFLOW_TRACKING_USERNAME and "
        "MLFLOW_TRACKING_PASSWORD to a login it knows (a user:password@ in the tracking URI is "
        "moved there)"
    ]
    env_user = {"MLFLOW_TRACKING_USERNAME": "someone-else"}
    contradicted = subprocess.run(
        [sys.executable, "-m", "adapterfleet.cli.app", "adapters", "-c", str(config),
         "-o", f"tracking_uri={_login_uri(uri, password)}"],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, **env_user}, timeout=300,
    )  # fmt: skip
    assert contradicted.returncode == 2
    assert "carries a login that MLFLOW_TRACKING_USERNAME contradicts" in contradicted.stderr
    for result in (bad, contradicted):
        assert password not in result.stderr + result.stdout and wrong not in result.stderr


def test_overrides_and_the_command_line_are_stored_masked(
    auth_server: tuple[str, str],
    clean_login: None,
    tmp_path: Path,
    new_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adapterfleet.orchestration.pipeline_tags import pipeline_tags

    uri, password = auth_server
    overrides = [f"tracking_uri={_login_uri(uri, password)}", "tasks.a.hf_token=hf_abcdef123456"]
    config = load_config(_config(tmp_path, new_name("login-tags")), overrides[:1])
    tags = pipeline_tags(config, overrides)
    ensure_experiment(config.tracking_uri, config.name, tags=tags)
    stored = MlflowClient(uri).get_experiment_by_name(config.name).tags
    assert json.loads(stored[TAG_OVERRIDES]) == [
        f"tracking_uri={uri.replace('http://', 'http://***@')}",
        "tasks.a.hf_token=***",
    ]
    assert all(password not in v and "hf_abcdef" not in v for v in stored.values())
    command = f"adapterfleet run p.yaml -o {overrides[0]} --set {overrides[1]}"
    monkeypatch.setenv(COMMAND_ENV, command)
    assert password not in command_line() and "hf_abcdef" not in command_line()
    assert masked_setting("adapters.training.lr=0.1") == "adapters.training.lr=0.1"
    assert mask(f"see {_login_uri(uri, password)}/x") == f"see {uri.replace('//', '//***@')}/x"


def test_a_notebooks_second_config_may_carry_another_login(monkeypatch) -> None:
    """A notebook loaded a config whose URI carried alice's login, then one with bob's: the
    second was refused as contradicting MLFLOW_TRACKING_USERNAME, which the user never set
    (the first config had). A login the user set in the environment is still not overridden."""
    from adapterfleet.registry.store import use_login

    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    assert use_login("http://alice:s1@127.0.0.1:9") == "http://127.0.0.1:9"
    assert use_login("http://bob:s2@127.0.0.1:9") == "http://127.0.0.1:9"
    assert (os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"]) == (
        "bob",
        "s2",
    )
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "carol")  # the user's own
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3")
    with pytest.raises(RegistryError, match="MLFLOW_TRACKING_USERNAME contradicts"):
        use_login("http://bob:s2@127.0.0.1:9")

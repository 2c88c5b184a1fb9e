"""The tracking server with logins (`workflow/tracking_server.sh start` with PUT_TRACKING_AUTH=1, here on loopback;
beyond it, logins are the default and their absence refused): the admin's password made once into a 0600 file and
never printed, a request without a login refused (401) and nothing written, runs logged with the login, a wrong
password one line from `put`, a lab member's account by `add-user` (docs/mlflow.md, "Logins")."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from base64 import b64encode
from pathlib import Path

import pytest

from tests.compare_results import per_image, write_result
from tests.helpers import BIN, ROOT

SCRIPT = ROOT / "workflow" / "tracking_server.sh"
postgres = pytest.mark.skipif(not glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                              reason="PostgreSQL is not installed (workflow/tracking_server.sh install, as root)")


def script(folder: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PUT_TRACKING_DIR": str(folder), "PUT_TRACKING_HOST": "127.0.0.1",
           "MLFLOW": str(BIN / "mlflow"), **extra}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300)


def request(uri: str, path: str, body: dict | None = None, login: tuple[str, str] | None = None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"}
    if login:
        headers["Authorization"] = "Basic " + b64encode(":".join(login).encode()).decode()
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(uri + path, data, headers), timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture(scope="module")
def server():
    """The script's server on a free loopback port, with logins; stopped by its pids whatever the outcome. Its
    folder is reachable by the postgres user (the script runs PostgreSQL as it when root)."""
    pytest.importorskip("mlflow")
    try:
        import flask_wtf  # noqa: F401
    except ImportError:
        pytest.fail("Flask-WTF is missing (pyproject.toml's dependency, MLflow's basic-auth app): pip install -e .")
    folder = Path(tempfile.mkdtemp(prefix="put-logins-"))
    folder.chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        started = script(folder, "start", PUT_TRACKING_AUTH="1", PUT_TRACKING_PORT=str(port))
        assert started.returncode == 0, started.stdout + started.stderr + (folder / "log" / "mlflow.log").read_text()
        yield {"folder": folder, "started": started, "uri": f"http://127.0.0.1:{port}",
               "password": (folder / "admin-password").read_text().strip()}
    finally:
        script(folder, "stop")
        shutil.rmtree(folder, ignore_errors=True)


@postgres
def test_a_request_without_a_login_is_refused_and_writes_nothing(server):
    folder, started, uri, password = server["folder"], server["started"], server["uri"], server["password"]
    assert f"export MLFLOW_TRACKING_URI={uri}" in started.stdout
    assert "export MLFLOW_TRACKING_USERNAME=admin" in started.stdout
    assert f'export MLFLOW_TRACKING_PASSWORD="$(cat {folder / "admin-password"})"' in started.stdout
    logs = started.stdout + started.stderr + "".join(p.read_text() for p in (folder / "log").iterdir())
    assert password not in logs and len(password) >= 24
    for name in ("admin-password", "secret-key", "basic_auth.ini"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600, name
    assert request(uri, "/api/2.0/mlflow/experiments/create", {"name": "intruder"})[0] == 401
    assert request(uri, "/api/2.0/mlflow/experiments/search", {"max_results": 10})[0] == 401
    assert request(uri, "/api/2.0/mlflow/experiments/create", {"name": "intruder"}, ("admin", "wrong" * 5))[0] == 401
    status, body = request(uri, "/api/2.0/mlflow/experiments/search", {"max_results": 100}, ("admin", password))
    assert status == 200 and "intruder" not in body


def put_compare(workspace: Path, uri: str, user: str, password: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PUT_TRACKING": "1", "MLFLOW_TRACKING_URI": uri,
           "MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": password,
           "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    return subprocess.run([sys.executable, "-m", "put", "compare", ":put", ":tok", "--preset", "demo", "--mlflow"],
                          cwd=workspace, capture_output=True, text=True, env=env, timeout=300)


@postgres
def test_put_logs_with_the_login_and_a_wrong_password_is_one_line(server, tmp_path, monkeypatch):
    """A stage's run (the DAG's tracker) and `put compare --mlflow` with the admin's login; the password in no tag or
    parameter; with a wrong one, `put compare --mlflow` fails in one line naming the server and what to set."""
    from mlflow.tracking import MlflowClient

    from put.tracking.base import tracked
    from put.tracking.factory import stage_tracker

    uri, password = server["uri"], server["password"]
    for name, value in (("PUT_TRACKING", "1"), ("MLFLOW_TRACKING_URI", uri), ("MLFLOW_TRACKING_USERNAME", "admin"),
                        ("MLFLOW_TRACKING_PASSWORD", password)):
        monkeypatch.setenv(name, value)
    with tracked(stage_tracker("demo", "put", "evaluate", "logins")) as tracker:
        tracker.log_metrics({"k50/10-60/psnr": 20.0}, step=0)
    write_result(tmp_path, "put", per_image())
    write_result(tmp_path, "tok", per_image(shift=0.3, seed=2), variant="tok")
    done = put_compare(tmp_path, uri, "admin", password)
    assert done.returncode == 0, done.stderr
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("put-demo").experiment_id], max_results=100)
    stage = [r for r in runs if r.data.tags.get("put.dag_id") == "logins" and r.data.tags.get("put.level") == "stage"]
    assert len(stage) == 1 and stage[0].info.status == "FINISHED" and stage[0].data.metrics["k50/10-60/psnr"] == 20
    assert re.search(r"logged to MLflow: run (\w+)", done.stderr)
    for run in runs:
        assert not any(password in value for value in [*run.data.tags.values(), *run.data.params.values()])

    refused = put_compare(tmp_path, uri, "admin", "not-the-password")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr, \
        refused.stderr
    assert refused.stderr.startswith(f"put compare: error: MLflow at {uri} refused the login (401) as admin: set "
                                     "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"), refused.stderr


@postgres
def test_a_lab_member_gets_an_account_of_their_own(server, tmp_path):
    """`add-user NAME` with PASSWORD_FILE: the password into that 0600 file, never printed; the account logs in."""
    folder, uri = server["folder"], server["uri"]
    added = script(folder, "add-user", "ada", PASSWORD_FILE=str(tmp_path / "ada-password"))
    assert added.returncode == 0, added.stdout + added.stderr
    password = (tmp_path / "ada-password").read_text().strip()
    assert stat.S_IMODE((tmp_path / "ada-password").stat().st_mode) == 0o600
    assert password not in added.stdout + added.stderr
    assert request(uri, "/api/2.0/mlflow/experiments/search", {"max_results": 10}, ("ada", password))[0] == 200
    assert script(folder, "add-user", "ada", PASSWORD_FILE=str(tmp_path / "again")).returncode != 0


def test_beyond_loopback_a_server_without_logins_is_refused(tmp_path):
    refused = script(tmp_path, "start-mlflow", PUT_TRACKING_HOST="10.255.255.1", PUT_TRACKING_AUTH="0")
    assert refused.returncode != 0 and "beyond loopback the server has logins" in refused.stderr, refused.stderr
    assert not (tmp_path / "mlflow.pid").exists()


def test_a_refused_login_is_one_line_from_put(monkeypatch):
    """MLflow's 401 and 403 (its error codes) as the package's error; any other error is left alone."""
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import PERMISSION_DENIED, RESOURCE_DOES_NOT_EXIST, UNAUTHENTICATED

    from put.errors import ServiceError
    from put.tracking.login import login_refused

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://10.1.2.3:5000")
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    refused = login_refused(MlflowException("failed with error code 401 != 200", error_code=UNAUTHENTICATED))
    assert isinstance(refused, ServiceError) and "\n" not in str(refused)
    assert str(refused).startswith("MLflow at http://10.1.2.3:5000 refused the login (401) with no login "
                                   "(MLFLOW_TRACKING_USERNAME unset): set MLFLOW_TRACKING_USERNAME")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ada")
    denied = login_refused(MlflowException("403", error_code=PERMISSION_DENIED))
    assert "refused the account's access (403) as ada" in str(denied)
    assert login_refused(MlflowException("no such run", error_code=RESOURCE_DOES_NOT_EXIST)) is None
    assert login_refused(ValueError("x")) is None

"""A lab's sweeps on a one-stage DVC pipeline whose stage logs to MLflow as the DAG's do: a sweep queued with
`dvc exp run --queue` and run by `dvc queue start -j 2` (each experiment in DVC's temporary copy) logs every run
into the workspace's store, tagged with its experiment; `put compare` over the sweep is one family; the
experiments reach a colleague's clone through `dvc exp push`/`pull` (a bare git remote and a path DVC remote)
and compare there the same (docs/dvc-snakemake.md, "Sweeps"). The demo's own sweep: tests/test_dag.py (slow)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from put.config.paths import METRICS_FILE, metrics_images_file, metrics_info_file, path_of
from put.tracking.workspace import BASELINE_TAG, EXPERIMENT_TAG, temporary_copy
from tests.compare_results import PROTOCOL, STAGE_SCRIPT
from tests.helpers import BIN, ROOT

SWEEP = "sweep"  # `dvc exp run --queue -n sweep` of a choice() names the experiments sweep-1, sweep-2
TRACKING = """
from put.tracking.base import tracked
from put.tracking.factory import stage_tracker

with tracked(stage_tracker("demo", "put", "evaluate", f"k{top_k}")) as tracker:  # a DAG configuration per K
    tracker.log_metrics({"k50/10-60/psnr": float(top_k)}, step=0)
Path("samples.txt").write_text(f"samples of top_k {top_k}\\n")  # a cached output: it travels by the DVC remote
"""


def env(tracking: bool = True) -> dict[str, str]:
    """Tracking on, to the default store (MLFLOW_TRACKING_URI unset), as a user's shell is."""
    found = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
             "PUT_TRACKING": "1" if tracking else "0"}
    for name in ("MLFLOW_TRACKING_URI", "PUT_MLFLOW_SPOOL", "DVC_ROOT", "DVC_EXP_NAME", "DVC_EXP_BASELINE_REV"):
        found.pop(name, None)
    return found


def run(where: Path, *command: str, timeout: int = 300, tracking: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(list(command), cwd=where, capture_output=True, text=True, env=env(tracking),
                          timeout=timeout)
    assert done.returncode == 0, f"{command}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done


def dvc(where: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return run(where, str(BIN / "dvc"), *args, timeout=timeout)


def git(where: Path, *args: str) -> str:
    return run(where, "git", "-c", "user.name=put-test", "-c", "user.email=put-test@localhost", *args).stdout


def compare(where: Path, *results: str) -> pd.DataFrame:
    done = run(where, sys.executable, "-m", "put", "compare", *results, "--preset", "demo", "--format", "csv")
    return pd.read_csv(io.StringIO(done.stdout))


def wait_for_queue(repo: Path, timeout_s: float = 600) -> str:
    """`dvc queue status` once nothing is queued or running (DVC's workers run the experiments in the background)."""
    end = time.monotonic() + timeout_s
    while True:
        status = dvc(repo, "queue", "status").stdout
        if not any(word in status for word in ("Queued", "Running")) or time.monotonic() > end:
            return status
        time.sleep(2)


def stage_runs(repo: Path) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{repo / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("put-demo")
    assert experiment is not None, "no experiment put-demo in the workspace's store"
    return client.search_runs([experiment.experiment_id], "tags.`put.level` = 'stage'", max_results=100)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> dict:
    """A committed one-stage pipeline (top_k 50, built without tracking: the store is created by the sweep) with a
    path DVC remote, a sweep of top_k 10 and 20 queued and run by two workers."""
    repo = tmp_path_factory.mktemp("sweep") / "repo"
    repo.mkdir()
    (repo / "evaluate.py").write_text(STAGE_SCRIPT.format(protocol=repr(PROTOCOL.model_dump())) + TRACKING)
    (repo / "params.yaml").write_text("top_k: 50\n")
    metrics = path_of(METRICS_FILE, "demo", "put")
    (repo / "dvc.yaml").write_text(json.dumps({"stages": {"evaluate": {
        "cmd": f"{sys.executable} evaluate.py", "deps": ["evaluate.py"], "params": ["top_k"],
        "outs": ["samples.txt", {metrics_images_file(metrics).as_posix(): {"cache": False}},
                 {metrics_info_file(metrics).as_posix(): {"cache": False}}]}}}))
    (repo / ".gitignore").write_text("mlflow.db*\nmlruns/\nmlflow-unsent/\n")
    git(repo, "init", "-q", "-b", "main")
    dvc(repo, "init", "-q")
    # the lab's DVC remote, committed as the project's is: an experiment pushes its outputs to the remote its
    # own commit names (one added later is unknown to it, but for `dvc remote add --local`)
    dvc(repo, "remote", "add", "-d", "lab", str(repo.parent / "dvc-remote"))
    run(repo, str(BIN / "dvc"), "repro", "-q", tracking=False)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "top_k 50")
    dvc(repo, "exp", "run", "--queue", "-n", SWEEP, "-S", "top_k=choice(10,20)")
    start = time.monotonic()
    dvc(repo, "queue", "start", "-j", "2")
    status = wait_for_queue(repo)
    seconds = time.monotonic() - start
    return {"repo": repo, "status": status, "seconds": seconds, "commit": git(repo, "rev-parse", "HEAD").strip(),
            "names": sorted(dvc(repo, "exp", "list", "--name-only").stdout.split())}


def test_a_queued_sweep_logs_every_run_into_the_workspaces_store(sweep):
    """Each experiment's run once in the workspace's mlflow.db, tagged with its experiment and the commit it was
    queued from, its artefacts in the workspace; nothing of MLflow's in DVC's temporary copies; `put compare` of
    the commit and the sweep: one family."""
    from mlflow.tracking import MlflowClient

    repo, names = sweep["repo"], sweep["names"]
    print(f"\nqueued sweep of 2 experiments, 2 workers: {sweep['seconds']:.0f} s")
    assert names == [f"{SWEEP}-1", f"{SWEEP}-2"] and "Failed" not in sweep["status"], sweep["status"]
    runs = stage_runs(repo)
    assert sorted(r.data.tags.get(EXPERIMENT_TAG) for r in runs) == names, [r.data.tags for r in runs]
    assert {r.data.tags[BASELINE_TAG] for r in runs} == {sweep["commit"]}
    assert sorted(r.data.metrics["k50/10-60/psnr"] for r in runs) == [10.0, 20.0]
    assert all(r.info.status == "FINISHED" for r in runs)
    client = MlflowClient(f"sqlite:///{repo / 'mlflow.db'}")
    for found in runs:  # its environment.txt, in the workspace's mlruns/
        assert temporary_copy(Path(found.info.artifact_uri.removeprefix("file://"))) is None, found.info.artifact_uri
        assert [a.path for a in client.list_artifacts(found.info.run_id)] == ["environment.txt"]
    left = [p for p in (repo / ".dvc" / "tmp").rglob("*") if p.name.startswith(("mlflow", "mlruns"))]
    assert left == []
    table = compare(repo, "HEAD", *names)
    assert table["family"].nunique() == 1 and table["family_size"].nunique() == 1, table
    assert sorted(set(table["result"])) == names


def test_a_colleague_compares_the_sweep_after_dvc_exp_pull(sweep, tmp_path):
    """`dvc exp push` of the sweep to a bare git remote and a path DVC remote; a colleague's clone `dvc exp pull`s
    it, gets an experiment's cached output from the DVC remote, and `put compare` there gives the same table."""
    repo, names = sweep["repo"], sweep["names"]
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")
    pushed = dvc(repo, "exp", "push", "origin", *names)
    assert "uploaded" in pushed.stdout + pushed.stderr, pushed.stdout + pushed.stderr
    colleague = tmp_path / "colleague"
    git(tmp_path, "clone", "-q", str(origin), str(colleague))
    dvc(colleague, "exp", "pull", "origin", *names)
    assert sorted(dvc(colleague, "exp", "list", "--all-commits", "--name-only", "origin").stdout.split()) == names
    assert sorted(dvc(colleague, "exp", "list", "--all-commits", "--name-only").stdout.split()) == names
    mine, theirs = compare(repo, sweep["commit"], *names), compare(colleague, sweep["commit"], *names)
    pd.testing.assert_frame_equal(mine, theirs)
    dvc(colleague, "exp", "apply", names[0])  # its cached output, from the DVC remote (not in the clone's cache)
    assert (colleague / "samples.txt").read_text() == "samples of top_k 10\n"


def test_a_stage_in_a_temporary_copy_resolves_to_the_workspace_dvc_names(tmp_path, monkeypatch):
    """The default store, its lock and the spool in the workspace DVC_ROOT names, whatever the working directory;
    in a temporary copy that names none, one line saying what to set."""
    from put.errors import InputError
    from put.tracking.source import tracking_uri
    from put.tracking.spool import spool_folder

    copy = tmp_path / "ws" / ".dvc" / "tmp" / "exps" / "tmpabc"
    copy.mkdir(parents=True)
    monkeypatch.chdir(copy)
    for name in ("MLFLOW_TRACKING_URI", "PUT_MLFLOW_SPOOL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "ws"))
    assert tracking_uri() == f"sqlite:///{tmp_path / 'ws' / 'mlflow.db'}"
    assert spool_folder() == tmp_path / "ws" / "mlflow-unsent"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///runs/store.db")  # relative: the workspace's too
    assert tracking_uri() == f"sqlite:///{tmp_path / 'ws' / 'runs' / 'store.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://10.1.2.3:5000")
    assert tracking_uri() == "http://10.1.2.3:5000"

    monkeypatch.delenv("DVC_ROOT")
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    with pytest.raises(InputError, match=rf"temporary experiment copy {copy}.*set MLFLOW_TRACKING_URI=sqlite:///"
                                         rf"{tmp_path / 'ws' / 'mlflow.db'}"):
        tracking_uri()
    monkeypatch.chdir(tmp_path)  # outside DVC: the working directory, as before
    assert tracking_uri() == f"sqlite:///{tmp_path / 'mlflow.db'}"


"""`snakemake --profile slurm ablations` on a live single-node Slurm cluster, which `make test-slurm` brings
up with tests/slurm/cluster.sh. Every job of the DAG runs as a Slurm job and completes; training jobs that
are preempted (one single-process, one under torchrun) or hit their time limit resume from their saved
state; a failing job fails the workflow with a message that leads to the cause; `make record` makes DVC
see the cluster's outputs as up to date. The tests share one repository copy and run in file order."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from put.checkpoint import load_checkpoint
from put.config import PVQVAE_VARIANTS, VARIANTS
from put.dag.declaration import stage
from put.paths import metrics_file, pvqvae_checkpoint, transformer_checkpoint
from put.train.loop import resume_path
from tests.helpers import working_copy

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(3000), pytest.mark.skipif(os.environ.get("PUT_SLURM_TEST") != "1",
                                                    reason="needs the Slurm cluster of `make test-slurm`")]

BIN = Path(sys.executable).parent
PRESET = "demo"
ABLATION_STAGES = ("config", "split", "prepare", "masks", "train_pvqvae", "train_transformer", "sample", "evaluate")
EXPECTED_JOBS = {"rule_config", "rule_split", "rule_prepare", "rule_masks",
                 *(f"rule_train_pvqvae_wildcards_{v}" for v in PVQVAE_VARIANTS),
                 *(f"rule_{rule}_wildcards_{v}" for rule in ("train_transformer", "sample", "evaluate")
                   for v in VARIANTS)}
# Demo jobs last seconds: poll Slurm every few seconds instead of the plugin's 40+.
FAST_POLL = ("--slurm-init-seconds-before-status-checks", "5")


@dataclass
class SlurmRecord:
    job_id: str
    comment: str
    state: str
    exit_code: str


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def sacct(since: str) -> list[SlurmRecord]:
    """Every allocation since `since`, requeued attempts included (--duplicates), oldest first."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "--duplicates", "-S", since,
                          "-o", "JobIDRaw,Comment,State,ExitCode"],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    return [SlurmRecord(*(f.split()[0] if i == 2 else f for i, f in enumerate(line.split("|"))))
            for line in out.splitlines() if line.strip()]


def final_states(records: list[SlurmRecord]) -> dict[str, str]:
    """rule comment -> state of its last attempt."""
    return {r.comment: r.state for r in records if r.comment.startswith("rule_")}


def start_snakemake(repo: Path, *args: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PUT_SLURM_SITE": str(repo / "site.yaml")}
    env.pop("PUT_TRACKING", None)  # track to MLflow as users do (sqlite:///mlflow.db in the repository)
    return subprocess.Popen([str(BIN / "snakemake"), "--profile", "slurm", *args, *FAST_POLL], cwd=repo, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def finish(proc: subprocess.Popen, log: Path, timeout: float) -> tuple[int, str]:
    """Waits at most `timeout` s; a hung driver is killed and its jobs cancelled, so CI cannot hang."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        subprocess.run(["scancel", "--user", os.environ.get("USER", "root")], timeout=30)
        pytest.fail(f"snakemake did not finish within {timeout:.0f} s:\n{log.read_text()[-4000:]}")
    return code, log.read_text()


def run_snakemake(repo: Path, *args: str, timeout: float) -> tuple[int, str]:
    log = repo / f"snakemake-{time.monotonic_ns()}.out"
    return finish(start_snakemake(repo, *args, log=log), log, timeout)


def running_job(comment: str) -> str:
    out = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%i|%k"], check=True, capture_output=True, text=True,
                         timeout=30).stdout
    jobs = [line.split("|")[0] for line in out.splitlines() if line.split("|")[1:] == [comment]]
    assert jobs, f"no running Slurm job for {comment}: {out}"
    return jobs[0]


def preempt_once_saved(pattern: str, rule: str, repo: Path, proc: subprocess.Popen, deadline: float) -> str:
    """Waits until a training matching `pattern` has saved its state, then preempts it for real: an `urgent`
    partition job asking for every CPU makes Slurm requeue the running `batch` jobs (SIGTERM first)."""
    while not (saved := sorted(repo.glob(pattern))):
        assert proc.poll() is None, "snakemake ended before any training wrote its state"
        assert time.monotonic() < deadline, f"no {pattern} appeared"
        time.sleep(0.5)
    variant = saved[0].parent.name
    job = running_job(f"rule_{rule}_wildcards_{variant}")
    subprocess.run(["sbatch", "-p", "urgent", "-c", str(os.cpu_count()), "--mem", "500", "-t", "1",
                    "--output", "/dev/null", "--wrap", "sleep 1"], check=True, capture_output=True, timeout=30)
    return job


def slurm_logs(repo: Path, rule: str, variant: str) -> dict[str, str]:
    """job id -> text of its Slurm log (kept for successful jobs by the profile)."""
    folder = repo / ".snakemake" / "slurm_logs" / f"rule_{rule}" / variant
    return {p.stem: p.read_text(errors="replace") for p in folder.glob("*.log")}


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory):
    repo = working_copy(tmp_path_factory.mktemp("slurm") / "repo")
    (repo / "site.yaml").write_text("account: put\npartition: batch\n")
    since = now()
    log = repo / "ablations.out"
    # Transformers on 2 (stand-in) GPUs: run under torchrun, one process per GPU. --forceall: the clone holds the
    # committed demo products (metrics, curves), which Snakemake would take as done although no checkpoint exists.
    proc = start_snakemake(repo, "ablations", "--forceall", "--set-resources", "train_transformer:gpu=2", log=log)
    deadline = time.monotonic() + 40 * 60
    try:
        preempted = {
            "train_pvqvae": preempt_once_saved(str(resume_path(pvqvae_checkpoint(PRESET, "*"))), "train_pvqvae",
                                               repo, proc, deadline),
            "train_transformer": preempt_once_saved(str(resume_path(transformer_checkpoint(PRESET, "*"))),
                                                    "train_transformer", repo, proc, deadline)}
    finally:
        code, output = finish(proc, log, max(60.0, deadline - time.monotonic()))
    assert code == 0, output[-6000:]
    return {"repo": repo, "since": since, "output": output, "preempted": preempted}


def test_every_job_of_the_dag_ran_as_a_slurm_job_and_completed(cluster_run):
    states = final_states(sacct(cluster_run["since"]))
    assert set(states) == EXPECTED_JOBS
    assert {c: s for c, s in states.items() if s != "COMPLETED"} == {}
    # MLflow runs carry the Slurm job ids of the jobs that made them.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{cluster_run['repo'] / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name(f"put-{PRESET}").experiment_id], max_results=1000)
    tagged = {run.data.tags["put.slurm_job_id"] for run in runs if "put.slurm_job_id" in run.data.tags}
    assert tagged and tagged <= {r.job_id for r in sacct(cluster_run["since"])}


@pytest.mark.parametrize("rule", ["train_pvqvae", "train_transformer"])
def test_a_preempted_training_is_requeued_and_resumes(cluster_run, rule):
    job = cluster_run["preempted"][rule]
    attempts = [r.state for r in sacct(cluster_run["since"]) if r.job_id == job]
    assert len(attempts) >= 2 and attempts[-1] == "COMPLETED", attempts  # requeued, then finished
    assert attempts[0] in ("PREEMPTED", "REQUEUED"), attempts
    log = next(text for logs in [slurm_logs(cluster_run["repo"], rule, v) for v in VARIANTS]
               for job_id, text in logs.items() if job_id == job)
    assert re.search(r"stopped by signal at step \d+", log), log[-3000:]
    step = int(re.search(r"resuming from \S+ at step (\d+)", log).group(1))
    assert step > 0
    if rule == "train_transformer":
        assert "torchrun() --standalone --nnodes=1 --nproc-per-node=2" in log  # put.cli.torchrun


def dir_file_count(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file() and p.name != ".snakemake_timestamp")


def test_outputs_have_the_structure_of_a_local_run(cluster_run):
    """dvc.lock in the repository comes from a local `dvc repro`: the same paths, the same number of files."""
    repo = cluster_run["repo"]
    lock = yaml.safe_load((repo / "dvc.lock").read_text())["stages"]
    checked = 0
    for name, locked in lock.items():
        if name.split("@")[0] not in ABLATION_STAGES:
            continue
        for out in locked["outs"]:
            path = repo / out["path"]
            assert path.exists(), out["path"]
            if "nfiles" in out:
                assert dir_file_count(path) == out["nfiles"], out["path"]
            checked += 1
    # every declared output of every instance of those stages: the lock lists none of them twice or not at all
    assert checked == sum(len(stage(name).outputs) * max(1, len(stage(name).variants)) for name in ABLATION_STAGES)


def dvc(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "dvc"), *args], cwd=repo, capture_output=True, text=True, timeout=600)


def test_make_record_lets_dvc_see_the_cluster_outputs_as_up_to_date(cluster_run):
    repo = cluster_run["repo"]
    before = json.loads(dvc(repo, "status", "--json").stdout or "{}")
    assert any(name.startswith("train_") for name in before)  # the cluster run is not in dvc.lock yet
    recorded = subprocess.run(["make", "record", f"VENV={BIN.parent}"], cwd=repo, capture_output=True,
                              text=True, timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    changed = set(json.loads(dvc(repo, "status", "--json").stdout or "{}"))
    assert changed <= {"bench", "frontier", "frontier_tpami", "report"}, changed  # what `ablations` does not build
    dry = dvc(repo, "repro", "--dry", *ABLATION_STAGES)
    assert dry.returncode == 0, dry.stderr
    assert "Running stage" not in dry.stdout, dry.stdout
    # Snakemake too still sees everything as up to date (the committed files kept their timestamps).
    code, output = run_snakemake(repo, "--dry-run", "ablations", timeout=300)
    assert code == 0 and "Nothing to be done" in output, output[-3000:]


def set_override(repo: Path, section: str, values: dict) -> None:
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["overrides"][section] = values
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_a_failing_job_fails_the_workflow_with_a_clear_message(cluster_run):
    repo, since = cluster_run["repo"], now()
    checkpoints = {p: p.stat().st_mtime_ns for p in (repo / "runs").rglob("*.pt")}
    set_override(repo, "evaluate", {"ssim_window": 99})  # larger than the images: the evaluation fails
    try:
        code, output = run_snakemake(repo, str(metrics_file(PRESET, "put")), timeout=15 * 60)
    finally:
        set_override(repo, "evaluate", {})
    assert code != 0
    assert "Error in rule evaluate" in output and "SLURM status is: 'FAILED'" in output, output[-4000:]
    log = Path(re.search(r"(\S+\.log) \(check log file", output).group(1))  # the Slurm log, after the rule's
    assert "put evaluate: error:" in log.read_text() and "ssim" in log.read_text().lower()
    assert final_states(sacct(since)) == {"rule_evaluate_wildcards_put": "FAILED"}  # nothing else ran
    assert {p: p.stat().st_mtime_ns for p in (repo / "runs").rglob("*.pt")} == checkpoints


def test_a_training_stopped_by_its_time_limit_resumes_on_retry(cluster_run):
    """A 1-minute limit on a longer training: Slurm's SIGTERM at the limit saves the state, the job ends
    as TIMEOUT, Snakemake's retry resumes it, until the training is complete."""
    repo, since, iterations = cluster_run["repo"], now(), 700
    set_override(repo, "pvqvae_train", {"iterations": iterations})
    target = pvqvae_checkpoint(PRESET, "conv")
    code, output = run_snakemake(repo, str(target), "--set-resources", "train_pvqvae:runtime=1", timeout=15 * 60)
    assert code == 0, output[-4000:]
    states = [r.state for r in sacct(since) if r.comment == "rule_train_pvqvae_wildcards_conv"]
    assert "TIMEOUT" in states and states[-1] == "COMPLETED", states
    logs = "\n".join(slurm_logs(repo, "train_pvqvae", "conv").values())
    assert re.search(r"stopped by signal at step \d+", logs)  # SIGTERM at the limit, before the SIGKILL
    assert re.search(r"resuming from \S+ at step [1-9]", logs)
    assert load_checkpoint(repo / target, kind="pvqvae").training["step"] == iterations
    assert not resume_path(repo / target).exists()

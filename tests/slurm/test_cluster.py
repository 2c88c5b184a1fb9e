"""`snakemake --profile slurm` on the live two-node Slurm cluster that `make test-slurm` brings up with
tests/slurm/cluster.sh, logging to an MLflow tracking server on PostgreSQL (workflow/tracking_server.sh) as a
cluster's users do (MLFLOW_TRACKING_URI names it). One run of the whole demo DAG (Snakemake's target `all`: every
variant trained, sampled and evaluated, the external baselines, the frontiers, the bench and the report), with
settings given through Snakemake's `--config`, which the jobs on both nodes read: the data stages on this host first,
every other stage as a Slurm job, every transformer on 2 nodes x 1 process (gloo; `put` with stochastic depth on as
in the TPAMI model). In it: the `put` P-VQVAE and the `tok` transformer are preempted and resume; the training
process of the `put` transformer on the second node is killed (kill -9), the job fails and Snakemake's retry resumes
it; the tracking server is down, mid-DAG, for longer than the client's retries. Then: every job ran and completed,
on both nodes where asked; the killed training ends with the weights of one process trained on the same global
batch; the outputs have the structure of a local run and are recorded in DVC; the spools of the outage are
replayed with `put track-replay` and `put track` in both orders, after which the server alone holds every stage's
run once, every metric point once per step the outputs hold, every model READY with its files, and the workspace
no local store or spool (tests/slurm/tracking.py); the outputs are pushed to a remote, pulled by a fresh clone and
checked out without copies through a shared cache; a failing job and a layout the partition cannot hold fail the
workflow with a message; a training stopped by its time limit resumes attempt after attempt while the tracking
server is down for longer than the client's retries, and its records are logged afterwards. The tests share one
repository copy and run in file order, but for the time-limit run: in a copy of its own, logging to a tracking
server of its own, it waits on Slurm's clock in the background from the end of the DAG, beside every other test."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import math
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from put.commands.track import instance_run_name
from put.config.params import load_params
from put.config.paths import PREPARED_DIR, masks_dir, path_of
from put.dag.declaration import CONFIG
from put.dag.graph import instances
from put.models.checkpoint import load_checkpoint
from put.tracking.spool import SPOOL_DIR, read_cursor
from put.train.loop import MIN_STEP_ENV, resume_path
from tests.helpers import BIN, ROOT, metrics_file, pvqvae_checkpoint, transformer_checkpoint, working_copy
from tests.slurm.tracking import SYSTEM, Rerun, check_server, left_in_workspace, stage_runs

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(3600), pytest.mark.skipif(os.environ.get("PUT_SLURM_TEST") != "1",
                                                    reason="needs the Slurm cluster of `make test-slurm`")]

PRESET = "demo"
# The roles of two transformers (`tok` trains on put's P-VQVAE, so one P-VQVAE serves both); the evaluation the
# failing-job test makes fail.
PREEMPTED_TRANSFORMER, KILLED_TRANSFORMER = "tok", "put"
EVALUATED = PREEMPTED_TRANSFORMER
# The run builds the whole demo DAG: every stage instance of params.yaml (DVC's names), and the names of the MLflow
# runs of the tracked ones (put track's, "stage variant").
BUILT = instances(load_params(ROOT / "params.yaml"))
BUILT_STAGES = {s.key(name) for s, name in BUILT}
TRACKED_RUNS = [instance_run_name(s, name, load_params(ROOT / "params.yaml")) for s, name in BUILT if s.tracked]
# The data stages run on this host first (Snakemake's local executor, as on a login node): the checks are about the
# jobs that train, sample, evaluate and report, which then run on the cluster.
LOCAL_STAGES = ("config", "split", "prepare", "masks")
CLUSTER_RULES = sorted({s.name for s, _ in BUILT if s.name not in LOCAL_STAGES})
EXPECTED_JOBS = {f"rule_{s.name}" + (f"_wildcards_{name}" if name else "") for s, name in BUILT
                 if s.name not in LOCAL_STAGES}
TARGETS = ("all",)
LOCAL_TARGETS = (str(path_of(CONFIG.outputs["--out"].pattern, PRESET)), str(path_of(PREPARED_DIR, PRESET)),
                 str(masks_dir(PRESET)))
# What every Snakemake run of this module merges into params.yaml (`--config`): evaluations of 4 images during
# training instead of 16, the frontiers' settings run once each (their timing is not checked here), and stochastic
# depth in the killed transformer (off in the CVPR models, on in the TPAMI one), which then draws it besides random
# quantization: two processes that drew their own would end apart (a TPAMI transformer did: 6.8e-2). What the
# files hold keeps the demo's sizes: the outputs are compared with the committed dvc.lock of a local run, file
# counts included. So do the iteration counts: each of the three trainings is preempted or killed after its first
# save, which needs a run of some seconds to hit, and a job's time goes to starting it, not to its 150-250 steps.
TINY = {"overrides": {"pvqvae_train": {"eval_images": 4}, "transformer_train": {"eval_images": 4},
                      "frontier": {"timing_repeats": 1}},
        "variants": {KILLED_TRANSFORMER: {"transformer": {"drop_path": 0.1}}}}
NODES = ("putnode1", "putnode2")
# Demo jobs last seconds: poll Slurm every few seconds instead of the plugin's 40+ (it adds 10 s to the interval at
# each check that finds no job ended; a time-limit attempt of about 62 s is seen at 2+12+22+32 = 68 s).
FAST_POLL = ("--slurm-init-seconds-before-status-checks", "2")
# MLflow's client retries during the DAG run and the time-limit run: 0+2+4 s, well below the outage (and below a
# 1-minute attempt): the stages that log meanwhile spool their records (put/tracking/resilient.py).
RETRIES_SHORTER_THAN_THE_OUTAGE = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
OUTAGE_S = 75
# The time-limit test: an attempt under a 1-minute limit lasts at most ATTEMPT_MAX_S s (slurmctld looks at time
# limits every 30 s); every step taking at least STEP_FLOOR_S s, a training of TIME_LIMIT_STEPS needs two attempts
# or more on any machine, however fast (a probe of the machine's speed once sized it: issue 36, item 9).
ATTEMPT_MAX_S, STEP_FLOOR_S = 90, 0.5
# Not many more: an attempt that ends in the limit's window (60-90 s) can be killed after the command has finished,
# while Snakemake's job step stores the output; Snakemake then deletes the checkpoint and the retry writes it again
# from the final state the stage keeps (tests/test_training.py, test_a_kill_after_the_stage_ended_...), which costs
# one more attempt of the suite's time.
TIME_LIMIT_STEPS = 190
assert TIME_LIMIT_STEPS * STEP_FLOOR_S > ATTEMPT_MAX_S
SPOOL_LINE = re.compile(r"put: MLflow at (\S+) did not answer .*: put track-replay (\S+\.jsonl)")


@dataclass
class SlurmRecord:
    job_id: str
    comment: str
    state: str
    exit_code: str
    nodes: int
    node_list: str
    workdir: str


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def sacct(since: str, steps: bool = False, repo: Path | None = None) -> list[SlurmRecord]:
    """Every allocation since `since` (with `steps`, their job steps too; with `repo`, those submitted from it: the
    time-limit run's jobs go on in a copy meanwhile), requeued attempts included (--duplicates), oldest first."""
    out = subprocess.run(["sacct", *([] if steps else ["-X"]), "-n", "-P", "--duplicates", "-S", since,
                          "-o", "JobIDRaw,Comment,State,ExitCode,NNodes,NodeList,WorkDir"],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    records = []
    for line in out.splitlines():
        if line.strip():
            job, comment, state, code, nodes, node_list, workdir = line.split("|")
            records.append(SlurmRecord(job, comment, state.split()[0], code, int(nodes), node_list, workdir))
    if repo is None:
        return records
    # sacct gives a job step no working directory: it goes with its allocation's
    ours = {r.job_id for r in records if r.workdir and Path(r.workdir) == repo.resolve()}
    return [r for r in records if r.job_id.split(".")[0] in ours]


def cluster_jobs(cluster_run: dict, steps: bool = False) -> list[SlurmRecord]:
    """The cluster run's jobs and those of the tests in its workspace, not the time-limit run's beside them."""
    return sacct(cluster_run["since"], steps, cluster_run["repo"])


def final_states(records: list[SlurmRecord]) -> dict[str, str]:
    """rule comment -> state of its last attempt."""
    return {r.comment: r.state for r in records if r.comment.startswith("rule_")}


def set_resources(repo: Path, rule: str, **values: int) -> None:
    """The demo preset's resources of `rule` in the copy's workflow/resources.yaml (what a site edits)."""
    path = repo / "workflow" / "resources.yaml"
    table = yaml.safe_load(path.read_text())
    table["presets"][PRESET][rule] = {**table["presets"][PRESET].get(rule, {}), **values}
    path.write_text(yaml.safe_dump(table, sort_keys=False))


LOGIN = {"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": secrets.token_urlsafe(24)}


class TrackingServer:
    """workflow/tracking_server.sh on this host's bridge address (the nodes' only way to it). It starts in the
    background (the cluster run's data stages run meanwhile); `uri` waits for it."""

    def __init__(self, folder: Path):
        host = subprocess.run([str(ROOT / "tests/slurm/cluster.sh"), "address"], check=True, capture_output=True,
                              text=True).stdout.strip()
        self.env = {**os.environ, "PUT_TRACKING_DIR": str(folder), "PUT_TRACKING_HOST": host,
                    "MLFLOW": str(BIN / "mlflow")}
        starting = concurrent.futures.ThreadPoolExecutor(1)
        self.started = starting.submit(self.call, "start")
        starting.shutdown(wait=False)

    @property
    def uri(self) -> str:
        exports = self.started.result()
        assert "MLFLOW_TRACKING_USERNAME=admin" in exports and LOGIN["MLFLOW_TRACKING_PASSWORD"] not in exports
        return re.search(r"MLFLOW_TRACKING_URI=(\S+)", exports).group(1)

    def call(self, command: str) -> str:
        done = subprocess.run([str(ROOT / "workflow/tracking_server.sh"), command], env=self.env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def restart(self, down_s: float = 0) -> float:
        """Stops the MLflow server (the database stays), waits `down_s`, starts it; returns the seconds it was down."""
        self.started.result()  # once it has started
        began = time.monotonic()
        self.call("stop-mlflow")
        time.sleep(down_s)
        self.call("start-mlflow")
        return time.monotonic() - began


@contextlib.contextmanager
def tracking_server(variable: str) -> Iterator[TrackingServer]:
    """A tracking server in the folder the environment variable names (`make test-slurm` names it, to stop the server
    whatever happens to this process; else a temporary one), stopped by pid and removed whatever the outcome."""
    folder = Path(os.environ.get(variable) or tempfile.mkdtemp(prefix="put-tracking-"))
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # PostgreSQL runs as the postgres user, which must reach its data folder
    # Beyond loopback the server has logins: the admin's password, made here once for both servers (the script
    # keeps one it finds), reaches every job as users pass it: in the environment sbatch exports.
    password = folder / "admin-password"
    if not password.is_file():
        password.touch(mode=0o600)
        password.write_text(LOGIN["MLFLOW_TRACKING_PASSWORD"] + "\n")
    os.environ.update(LOGIN)
    server = None
    try:
        server = TrackingServer(folder)
        yield server
    finally:
        if server is not None:
            concurrent.futures.wait([server.started])  # not stopped while it starts
        subprocess.run([str(ROOT / "workflow/tracking_server.sh"), "stop"], env={**os.environ,
                       "PUT_TRACKING_DIR": str(folder)}, timeout=300)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def tracking():
    with tracking_server("PUT_SLURM_TRACKING_DIR") as server:
        yield server


@pytest.fixture(scope="module")
def time_limit_tracking():
    """The time-limit test's own server (a database of its own): its outage stops no other test's server."""
    with tracking_server("PUT_SLURM_TIME_LIMIT_TRACKING_DIR") as server:
        yield server


def merged(base: dict, extra: dict) -> dict:
    """`base` with `extra` merged in, key by key at every level (as Snakemake merges --config into params.yaml)."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def config_args(extra: dict | None = None) -> list[str]:
    """`--config` with TINY and `extra` merged: one value per top-level key (a key given twice would replace, not
    merge)."""
    return ["--config", *(f"{key}={json.dumps(value)}" for key, value in merged(TINY, extra or {}).items())]


def start_snakemake(repo: Path, *args: str, log: Path, env: dict[str, str] | None = None,
                    config: dict | None = None, local: bool = False) -> subprocess.Popen:
    """Snakemake with the slurm profile (`local`: on this host, 2 cores), TINY merged into params.yaml."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PUT_SLURM_SITE": str(repo / "site.yaml"),
           **(env or {})}
    env.pop("PUT_TRACKING", None)  # track to MLflow as users do
    where = ["--cores", "2"] if local else ["--profile", "slurm", *FAST_POLL]
    return subprocess.Popen([str(BIN / "snakemake"), *where, *args, *config_args(config)],
                            cwd=repo, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def finish(proc: subprocess.Popen, log: Path, timeout: float) -> tuple[int, str]:
    """Waits at most `timeout` s; a hung driver is killed and its jobs cancelled, so CI cannot hang."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        subprocess.run(["scancel", "--user", os.environ.get("USER", "root")], timeout=30)
        pytest.fail(f"snakemake did not finish within {timeout:.0f} s:\n{log.read_text()[-4000:]}")
    return code, log.read_text()


def run_snakemake(repo: Path, *args: str, timeout: float, env: dict[str, str] | None = None,
                  config: dict | None = None, local: bool = False) -> tuple[int, str]:
    log = repo / f"snakemake-{time.monotonic_ns()}.out"
    return finish(start_snakemake(repo, *args, log=log, env=env, config=config, local=local), log, timeout)


def running_jobs(comment: str) -> list[tuple[str, str]]:
    """(job id, first node) of the running Slurm jobs of a rule instance."""
    out = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%i|%k|%N"], check=True, capture_output=True, text=True,
                         timeout=30).stdout
    return [(job, subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True, text=True,
                                 timeout=30).stdout.split()[0])
            for job, name, nodes in (line.split("|") for line in out.splitlines()) if name == comment]


def saved_and_running(pattern: str, repo: Path) -> str | None:
    """The variant of a training matching `pattern` that has saved its state and still runs, if any."""
    for saved in sorted(repo.glob(pattern)):
        variant = saved.parent.name
        rule = "train_pvqvae" if "pvqvae" in saved.name else "train_transformer"
        if running_jobs(f"rule_{rule}_wildcards_{variant}"):
            return variant
    return None


def wait_for_saved_state(pattern: str, repo: Path, proc: subprocess.Popen, deadline: float) -> str:
    """The variant of the first training matching `pattern` that has saved its state and still runs."""
    while (variant := saved_and_running(pattern, repo)) is None:
        assert proc.poll() is None, "snakemake ended before a training wrote its state"
        assert time.monotonic() < deadline, f"no {pattern} appeared"
        time.sleep(0.2)
    return variant


def preempt_once_saved(pattern: str, rule: str, repo: Path, proc: subprocess.Popen,
                       deadline: float) -> tuple[str, str]:
    """Waits until a training matching `pattern` has saved its state, then preempts it (`preempt`)."""
    variant = wait_for_saved_state(pattern, repo, proc, deadline)
    return preempt(rule, variant, proc, deadline), variant


def preempt(rule: str, variant: str, proc: subprocess.Popen, deadline: float) -> str:
    """Preempts a running training for real: an `urgent` partition job asking for every CPU of the job's first node
    makes Slurm requeue the `batch` jobs there (SIGTERM first). Returns its job id once the urgent job has run: the
    preemption is over (Slurm preempts at its next scheduling cycle, after sbatch returned, and every batch job on
    that node is requeued, not only this one)."""
    ((job, node),) = running_jobs(f"rule_{rule}_wildcards_{variant}")
    urgent = subprocess.run(["sbatch", "--parsable", "-p", "urgent", "-w", node, "-c", str(os.cpu_count()),
                             "--mem", "500", "-t", "1", "--output", "/dev/null", "--wrap", "sleep 1"],
                            check=True, capture_output=True, text=True, timeout=30).stdout.strip().split(";")[0]
    while job_state(urgent) in ("", "PENDING", "RUNNING", "REQUEUED", "COMPLETING"):
        assert time.monotonic() < deadline and proc.poll() is None, f"the urgent job {urgent} never ran"
        time.sleep(0.5)
    start_requeued_jobs_now()
    return job


def start_requeued_jobs_now() -> None:
    """Slurm holds a requeued job for two minutes (its begin time); the next attempt is what the checks look at, so
    the jobs waiting for their begin time may start at once (in a DAG cut to the jobs the checks need, nothing else
    would run meanwhile)."""
    out = subprocess.run(["squeue", "-h", "-t", "PD", "-o", "%i|%r"], check=True, capture_output=True, text=True,
                         timeout=30).stdout
    for job in [line.split("|")[0] for line in out.splitlines() if line.endswith("|BeginTime")]:
        subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True, timeout=30)


def job_state(job: str) -> str:
    """The state of a Slurm job's latest attempt ("" while sacct does not know it yet)."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "State"], capture_output=True, text=True,
                         timeout=30).stdout.split()
    return out[-1] if out else ""


def worker_of(job: str, node: str) -> int | None:
    """The pid of job `job`'s training process (a torchrun worker, RANK set) on `node`."""
    for proc in Path("/proc").iterdir():
        try:
            env = dict(item.split("=", 1) for item in (proc / "environ").read_text().split("\0") if "=" in item)
        except (OSError, ValueError):
            continue
        if env.get("SLURM_JOB_ID") == job and env.get("SLURMD_NODENAME") == node and "RANK" in env \
                and "LOCAL_RANK" in env:
            return int(proc.name)
    return None


def kill_a_node_if_saved(pattern: str, repo: Path) -> tuple[str, str] | None:
    """kill -9 of the training process on the second node of a two-node transformer job matching `pattern` that
    saved its state and runs, if there is one whose workers have started (a requeued job resuming may not yet)."""
    variant = saved_and_running(pattern, repo)
    for job, _ in running_jobs(f"rule_train_transformer_wildcards_{variant}") if variant else ():
        pid = worker_of(job, NODES[1])
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            return job, variant
    return None


def preempt_and_kill_once_saved(preempted: str, killed: str, repo: Path, proc: subprocess.Popen,
                                deadline: float) -> tuple[tuple[str, str], tuple[str, str]]:
    """Preempts the transformer training `preempted` and kills a node's process of `killed`, each once it has saved
    its state. In the whole DAG either may run first, and end while the other waits, so both are watched at once.
    The killed job must fail, not be requeued by the preemption: the preemption waits until it has ended."""
    patterns = {variant: str(resume_path(transformer_checkpoint(PRESET, variant))) for variant in (preempted, killed)}
    done_preempt = done_kill = None
    while done_preempt is None or done_kill is None:
        assert proc.poll() is None, f"snakemake ended before the preemption ({done_preempt}) and the kill ({done_kill})"
        assert time.monotonic() < deadline, f"no preemption ({done_preempt}) or kill ({done_kill}) in time"
        if done_kill is None:
            done_kill = kill_a_node_if_saved(patterns[killed], repo)
        killed_running = done_kill is not None and job_state(done_kill[0]) in ("", "RUNNING", "COMPLETING")
        if done_preempt is None and not killed_running and saved_and_running(patterns[preempted], repo):
            done_preempt = preempt("train_transformer", preempted, proc, deadline), preempted
        time.sleep(0.2)
    return done_preempt, done_kill


def slurm_logs(repo: Path, rule: str, variant: str) -> dict[str, str]:
    """job id -> text of its Slurm log (kept for successful jobs by the profile)."""
    folder = repo / ".snakemake" / "slurm_logs" / f"rule_{rule}" / variant
    return {p.stem: p.read_text(errors="replace") for p in folder.glob("*.log")}


def running_rule_jobs(proc: subprocess.Popen, deadline: float) -> list[str]:
    """The Slurm comments of the rule jobs running now, once there is one (a preempted job may wait a moment before
    its requeued attempt starts)."""
    while True:
        busy = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%k"], capture_output=True, text=True,
                              timeout=30).stdout.split()
        if any(job.startswith("rule_") for job in busy):
            return busy
        assert time.monotonic() < deadline and proc.poll() is None, "no job ran to log through the restart"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory, tracking):
    repo = working_copy(tmp_path_factory.mktemp("slurm") / "repo")
    (repo / "site.yaml").write_text("account: put\npartition: batch\n")
    set_resources(repo, "train_transformer", nodes=2, gpu=1)  # every transformer: 2 nodes x 1 process
    began = time.monotonic()
    # Forced: the clone holds the committed demo products (metrics, curves), which Snakemake would take as done
    # although no checkpoint exists.
    code, output = run_snakemake(repo, *LOCAL_TARGETS, "--forceall", local=True, timeout=600)
    assert code == 0, output[-6000:]
    local_s = time.monotonic() - began
    since = now()
    log = repo / "dag.out"
    proc = start_snakemake(repo, *TARGETS, "--forcerun", *CLUSTER_RULES, log=log,
                           env={"MLFLOW_TRACKING_URI": tracking.uri, **RETRIES_SHORTER_THAN_THE_OUTAGE})
    deadline = time.monotonic() + 50 * 60
    events = {"outages": []}
    outages = concurrent.futures.ThreadPoolExecutor(1)

    def outage() -> concurrent.futures.Future:
        """The server down for OUTAGE_S s (far longer than the client's retries) while jobs log; in the
        background, the DAG going on."""
        events["outages"].append({"jobs_running": running_rule_jobs(proc, deadline)})
        return outages.submit(tracking.restart, OUTAGE_S)

    try:
        events["preempted"] = {"train_pvqvae": preempt_once_saved(str(resume_path(pvqvae_checkpoint(PRESET, "put"))),
                                                                  "train_pvqvae", repo, proc, deadline)}
        down = outage()  # the first outage: the P-VQVAEs, the external baselines, the bench
        events["preempted"]["train_transformer"], events["killed"] = preempt_and_kill_once_saved(
            PREEMPTED_TRANSFORMER, KILLED_TRANSFORMER, repo, proc, deadline)
        events["outages"][0]["down_s"] = down.result()
        down = outage()  # the second: the transformers, the first samplings and evaluations
        events["outages"][1]["down_s"] = down.result()
    finally:
        outages.shutdown(wait=True)  # the server up again, whatever happened
        code, output = finish(proc, log, max(60.0, deadline - time.monotonic()))
    assert code == 0, output[-6000:]
    # The parameters the jobs read (Snakemake rewrites the file at each run): the run's configuration (dag_id).
    params_file = repo.parent / "dag-params.yaml"
    shutil.copy(repo / ".snakemake" / "put" / "params.yaml", params_file)
    return {"repo": repo, "since": since, "output": output, "seconds": time.monotonic() - began, "local_s": local_s,
            "params_file": params_file, "params": load_params(params_file), **events}


@pytest.mark.usefixtures("time_limit_run")  # started here, right after the DAG: it runs beside every later test
def test_every_job_of_the_cluster_run_ran_as_a_slurm_job_and_completed(cluster_run, tracking):
    states = final_states(cluster_jobs(cluster_run))
    assert set(states) == EXPECTED_JOBS
    assert {c: s for c, s in states.items() if s != "COMPLETED"} == {}
    # MLflow runs carry the Slurm job ids of the jobs that made them.
    runs = stage_runs(tracking.uri, PRESET, cluster_run["params"].dag_id())
    tagged = {run.data.tags["put.slurm_job_id"] for run in runs.values() if "put.slurm_job_id" in run.data.tags}
    assert tagged and tagged <= {r.job_id for r in cluster_jobs(cluster_run)}
    print(f"\nthe data stages here ({cluster_run['local_s']:.0f} s), then {len(EXPECTED_JOBS)} jobs on the cluster: "
          f"{cluster_run['seconds']:.0f} s in all")


def test_the_transformers_trained_on_two_nodes(cluster_run):
    """sacct: each transformer job (and its srun step of one torchrun per node) on both nodes; the launch line."""
    records = cluster_jobs(cluster_run, steps=True)
    jobs = {r.job_id for r in records if r.comment.startswith("rule_train_transformer") and r.state == "COMPLETED"}
    assert len(jobs) == sum(s.name == "train_transformer" for s, _ in BUILT)
    for job in jobs:
        allocation = next(r for r in records if r.job_id == job)
        steps = [r for r in records if r.job_id == f"{job}.0"]
        assert (allocation.nodes, allocation.node_list) == (2, "putnode[1-2]"), allocation
        assert steps and steps[-1].nodes == 2 and steps[-1].node_list == "putnode[1-2]", steps
    for variant in (name for s, name in BUILT if s.name == "train_transformer"):
        for log in slurm_logs(cluster_run["repo"], "train_transformer", variant).values():
            assert re.search(r"launching: srun --nodes=2 .* --nnodes=2 --nproc-per-node=1 .*--rdzv-backend=c10d "
                             r"--rdzv-endpoint=putnode1:\d+", log), log[:3000]
    # one node's jobs: the P-VQVAEs, on one node each
    assert all(r.nodes == 1 for r in records if r.comment.startswith("rule_train_pvqvae"))


@pytest.mark.parametrize("rule", ["train_pvqvae", "train_transformer"])
def test_a_preempted_training_is_requeued_and_resumes(cluster_run, rule):
    job, variant = cluster_run["preempted"][rule]
    attempts = [r.state for r in cluster_jobs(cluster_run) if r.job_id == job]
    assert len(attempts) >= 2 and attempts[-1] == "COMPLETED", attempts  # requeued, then finished
    assert attempts[0] in ("PREEMPTED", "REQUEUED"), attempts
    log = slurm_logs(cluster_run["repo"], rule, variant)[job]
    assert re.search(r"stopped by signal at step \d+", log), log[-3000:]
    step = int(re.search(r"resuming from \S+ at step (\d+)", log).group(1))
    assert step > 0


def local_reference(repo: Path, log: str, out: Path) -> Path:
    """The job's training command (from its launch line) run here as one process: the same global batch and
    data order, no tracking."""
    argv = log.split("launching: ", 1)[1].splitlines()[0].split(" -m put ", 1)[1].split()
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--out", "--curves", "--log", "--tag", "--gpus", "--nodes"):
            skip = True
        else:
            kept.append(arg)
    # One thread, as the job's processes (one CPU each): torch's two threads on two cores that another process also
    # uses took seven times as long (5 min 47 s instead of 49 s).
    done = subprocess.run([sys.executable, "-m", "put", *kept, "--out", str(out)], cwd=repo, capture_output=True,
                          text=True, timeout=1200, env={**os.environ, "PUT_TRACKING": "0", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def killed_resumed_at(cluster_run) -> int:
    """The step the retry of the killed training resumed from (its log)."""
    job, variant = cluster_run["killed"]
    retry = max((r.job_id for r in cluster_jobs(cluster_run)
                 if r.comment == f"rule_train_transformer_wildcards_{variant}" and int(r.job_id) > int(job)), key=int)
    log = slurm_logs(cluster_run["repo"], "train_transformer", variant)[retry]
    return int(re.search(r"resuming from \S+ at step (\d+)", log).group(1))


def test_a_node_killed_mid_run_fails_the_job_and_the_retry_ends_with_the_weights_of_one_process(cluster_run,
                                                                                               tmp_path):
    """kill -9 of the training process on the second node: the job fails, Snakemake's retry resumes it from the
    saved step, and its final weights equal (to float tolerance) those of one process trained on the same global
    batch in the same order: two nodes x one process train the same model as one process, random quantization and
    stochastic depth included (each process takes its rows of the global batch's draws)."""
    job, variant = cluster_run["killed"]
    repo = cluster_run["repo"]
    assert variant == KILLED_TRANSFORMER
    assert cluster_run["params"].variant_config(variant).transformer.drop_path > 0  # its stochastic depth is on
    attempts = [r for r in cluster_jobs(cluster_run) if r.comment == f"rule_train_transformer_wildcards_{variant}"]
    killed = [r.state for r in attempts if r.job_id == job]
    assert killed[-1] == "FAILED", killed
    retries = [r for r in attempts if int(r.job_id) > int(job)]
    assert retries and retries[-1].state == "COMPLETED", attempts
    logs = slurm_logs(repo, "train_transformer", variant)
    step = killed_resumed_at(cluster_run)
    assert step > 0
    final = load_checkpoint(repo / transformer_checkpoint(PRESET, variant))
    assert final.training["step"] == cluster_run["params"].resolved_for(variant).transformer_train.iterations
    reference = load_checkpoint(local_reference(repo, logs[retries[-1].job_id], tmp_path / "one_process.pt"))
    # Float tolerance: the all-reduce and the split batch sum in another order than one process does, and Adam
    # carries the difference along (a tiny transformer, 600 steps: 5e-5; another data order: 0.2).
    a, b = final.model, reference.model
    assert a.keys() == b.keys()
    relative = math.sqrt(sum(float(((a[k] - b[k]) ** 2).sum()) for k in a) / sum(float((b[k] ** 2).sum()) for k in b))
    largest = max(float((a[k] - b[k]).abs().max()) for k in a)
    print(f"\n2 nodes x 1 process (killed, resumed at step {step}) vs 1 process: relative L2 difference "
          f"{relative:.2e}, largest {largest:.2e}")
    assert relative < 1e-3


def params_of(repo: Path):
    """The parameters of the repository's last Snakemake run (what its jobs read)."""
    return load_params(repo / ".snakemake" / "put" / "params.yaml")


def dir_file_count(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file() and p.name != ".snakemake_timestamp")


def test_outputs_have_the_structure_of_a_local_run(cluster_run):
    """dvc.lock in the repository comes from a local `dvc repro`: the same paths, the same number of files."""
    repo = cluster_run["repo"]
    lock = yaml.safe_load((repo / "dvc.lock").read_text())["stages"]
    checked = 0
    for name, locked in lock.items():
        if name not in BUILT_STAGES:
            continue
        for out in locked["outs"]:
            path = repo / out["path"]
            assert path.exists(), out["path"]
            if "nfiles" in out:
                assert dir_file_count(path) == out["nfiles"], out["path"]
            checked += 1
    # every declared output of every instance built: the lock lists none of them twice or not at all
    assert checked == sum(len(s.outputs) for s, _ in BUILT)


def dvc(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "dvc"), *args], cwd=repo, capture_output=True, text=True, timeout=600)


def use_shared_cache(repo: Path, cache: Path) -> None:
    """A clone's DVC cache in the cluster's shared folder, files linked into the workspace, not copied
    (docs/cluster.md, "Sharing results")."""
    for args in (("cache", "dir", "--local", str(cache)), ("config", "--local", "cache.shared", "group"),
                 ("config", "--local", "cache.type", "reflink,hardlink,symlink")):
        done = dvc(repo, *args)
        assert done.returncode == 0, done.stderr


def test_make_record_lets_dvc_see_the_cluster_outputs_as_up_to_date(cluster_run):
    repo = cluster_run["repo"]
    use_shared_cache(repo, repo.parent / "shared-cache")  # what `make record` moves the outputs into
    before = json.loads(dvc(repo, "status", "--json").stdout or "{}")
    assert any(name.startswith("train_") for name in before)  # the cluster run is not in dvc.lock yet
    recorded = subprocess.run(["make", "record", f"VENV={BIN.parent}"], cwd=repo, capture_output=True,
                              text=True, timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    changed = set(json.loads(dvc(repo, "status", "--json").stdout or "{}"))
    assert not changed & BUILT_STAGES, changed  # the run built every stage
    dry = dvc(repo, "repro", "--dry", *BUILT_STAGES)
    assert dry.returncode == 0, dry.stderr
    assert "Running stage" not in dry.stdout, dry.stdout
    # Snakemake too still sees everything as up to date (the committed files kept their timestamps).
    code, output = run_snakemake(repo, "--dry-run", *TARGETS, timeout=300)
    assert code == 0 and "Nothing to be done" in output, output[-3000:]


def put(repo: Path, uri: str, *args: str) -> str:
    """A `put` command in the repository, as a user runs it after the cluster run, logging to `uri`."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    env.pop("PUT_TRACKING", None)
    # the repository's code (what its jobs ran), as `python -m put` in it
    done = subprocess.run([sys.executable, "-m", "put", *args], cwd=repo, capture_output=True, text=True,
                          timeout=900, env=env)
    assert done.returncode == 0, (args, done.stdout + done.stderr)
    return done.stdout + done.stderr


def point_records(spool: Path) -> list[int]:
    """The positions (among its records) of the spool's `log_metrics` calls with a metric the server checks against
    the outputs (not a system metric): records a replay that skipped them would leave missing there."""
    records = [json.loads(line) for line in spool.read_text().splitlines()[1:]]
    return [i for i, r in enumerate(records) if r.get("call") == "log_metrics"
            and any(not key.startswith(SYSTEM) for key in (r["args"][0] if r["args"] else r["kwargs"]["metrics"]))]


def replay_cut_short(repo: Path, spool: Path, store: str, cwd: Path) -> tuple[int, int]:
    """`put track-replay --to store` of `spool`, killed once it has logged its second metrics record that the
    server's checks count (its first record alone may hold what an earlier attempt of the stage logged already)
    and before the last (its cursor says how far it got): a replay the server interrupted. Returns (records
    logged, records in all)."""
    lines = spool.read_text().splitlines()
    total = len(lines) - 1
    # past the second such record, a few records before the end (the kill lands a record or two late)
    past = next((i + 1 for i in point_records(spool)[1:] if i + 4 < total), 1)
    # Run beside the other store: a new SQLite store keeps its artefacts in ./mlruns, which must not be the
    # workspace's. The repository's code all the same.
    env = {**os.environ, "PYTHONPATH": str(repo)}
    env.pop("PUT_TRACKING", None)
    proc = subprocess.Popen([sys.executable, "-m", "put", "track-replay", "--to", store, str(spool)], cwd=cwd,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def logged() -> int:
        try:
            return read_cursor(spool).get(store, 0)
        except ValueError:  # caught while the replay replaces the file
            return 0

    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and logged() < past:
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    done = logged()
    assert spool.exists() and past <= done < total, \
        f"the replay into {store} was not cut short after record {past}: {done} of {total} logged"
    return done, total


def lose_runless_spools(spools: list[Path], uri: str, params, folder: Path, keep: int) -> dict[Path, str]:
    """Moves out of the workspace the spools among `spools` whose stage has no run on the server (its attempt
    never reached it), when they are two or more and one is a training's (the case `put track` must get right),
    leaving at least `keep` spools to replay; returns spool -> the run name `put track` will log."""
    runs = stage_runs(uri, PRESET, params.dag_id())
    runless = {}
    for spool in spools:
        init = json.loads(spool.read_text().splitlines()[0])["init"]
        name = " ".join(str(init[k]) for k in ("stage", "variant") if init.get(k))
        if name not in runs and "run_id" not in init:
            runless[spool] = name
    short = max(0, keep - (len(spools) - len(runless)))  # too few others to replay: some of these stay, not a training
    for spool in sorted(runless, key=lambda p: runless[p].startswith("train_"))[:short]:
        del runless[spool]
    if len(runless) < 2 or not any(name.startswith("train_") for name in runless.values()):
        return {}
    folder.mkdir(exist_ok=True)
    for spool in runless:
        for path in spool.parent.glob(f"{spool.stem}*"):  # its arrays and cursor too
            shutil.move(path, folder / path.name)
    return runless


def spools_named_in_logs(repo: Path) -> dict[Path, str]:
    """spool -> the store its job named, from every job's Slurm log (a job names the run it could not log)."""
    found = {}
    for log in (repo / ".snakemake" / "slurm_logs").rglob("*.log"):
        for match in SPOOL_LINE.finditer(log.read_text(errors="replace")):
            found[Path(match.group(2))] = match.group(1)
    return found


def check_logins(uri: str) -> None:
    """The server listens beyond loopback, so it has logins: a request without one, or with a wrong password, is
    refused (401) and creates nothing; the jobs logged with the admin's login from their environment."""
    import base64
    import urllib.error
    import urllib.request

    def create(headers: dict[str, str]) -> int:
        request = urllib.request.Request(f"{uri}/api/2.0/mlflow/experiments/create", method="POST",
                                         data=json.dumps({"name": "intruder"}).encode(),
                                         headers={"Content-Type": "application/json", **headers})
        try:
            return urllib.request.urlopen(request, timeout=30).status
        except urllib.error.HTTPError as err:
            return err.code

    wrong = base64.b64encode(b"admin:not-the-password").decode()
    assert create({}) == 401 and create({"Authorization": f"Basic {wrong}"}) == 401
    from mlflow.tracking import MlflowClient

    assert MlflowClient(uri).get_experiment_by_name("intruder") is None  # with the login: nothing was created


def test_after_the_outages_replays_and_put_track_in_both_orders_leave_every_record_once_on_the_server(
        cluster_run, tracking):
    """The cluster's configuration of tracking (MLFLOW_TRACKING_URI naming a server on PostgreSQL), end to end: the
    jobs that logged while the server was down named their spools; a user replays some of them (one of which a
    first replay into another store had logged in part), runs `put track` (which meets runs whose spool is not
    replayed yet), replays the rest and runs `put track` again (which finds every run). Then the server alone
    holds every stage's run once, finished, under the one parent run; every metric point once per step the
    outputs hold; every model READY with its files and registered; and the workspace no mlflow.db, mlruns/ or
    spool (tests/slurm/tracking.py)."""
    repo, params_file = cluster_run["repo"], str(cluster_run["params_file"])
    outages = cluster_run["outages"]
    assert len(outages) == 2 and all(o["down_s"] >= OUTAGE_S for o in outages), outages
    assert all(any(job.startswith("rule_") for job in o["jobs_running"]) for o in outages), outages  # jobs logged
    spools = sorted((repo / SPOOL_DIR).glob("*.jsonl"))
    named = spools_named_in_logs(repo)
    assert set(named) <= set(spools) and set(named.values()) == {tracking.uri}, (named, spools)
    check_logins(tracking.uri)
    recorded = {json.loads(p.read_text().splitlines()[0])["uri"] for p in spools}
    assert recorded == {tracking.uri}, recorded  # each spool names the server as its store, never a local file
    # Of the spools, those of attempts that never reached the server (no run of their stage there) are lost (a
    # node's local disk, say): `put track` logs those stages from their outputs, in one process, a training
    # before the rest (a model logged there must leave the next runs in the server's store), and leaves the
    # others to their replay.
    lost = lose_runless_spools(spools, tracking.uri, cluster_run["params"], repo.parent / "lost", keep=2)
    # Replayed, then tracked: every other spool first; `put track` before the replay for the others.
    kept = [p for p in spools if p not in lost]
    first, rest = kept[::2], kept[1::2]
    assert rest, f"the outages left {len(spools)} spool(s): {spools}"
    began = time.monotonic()
    # The one of the first ones with the most metric points the server checks (then the longest) is replayed first
    # into another store (outside the workspace) and cut short past two of them; the replay `--to` the server
    # then logs all of it there, not only what follows the other store's cursor (else those points are missing).
    longest = max(first, key=lambda p: (len(point_records(p)) > 2, len(p.read_text().splitlines())))
    elsewhere = f"sqlite:///{repo.parent / 'elsewhere' / 'mlflow.db'}"
    (repo.parent / "elsewhere").mkdir(exist_ok=True)
    cut = replay_cut_short(repo, longest, elsewhere, repo.parent / "elsewhere")
    replayed = put(repo, tracking.uri, "track-replay", "--to", tracking.uri, *map(str, first))
    tracked = put(repo, tracking.uri, "track", "--params", params_file)
    replayed += put(repo, tracking.uri, "track-replay", *map(str, rest))
    again = put(repo, tracking.uri, "track", "--params", params_file)
    assert f"MLflow: {len(TRACKED_RUNS)} stage run(s) present" in again, again  # nothing left to log
    user_s = time.monotonic() - began
    counts = check_server(tracking.uri, repo, cluster_run["params"], TRACKED_RUNS,
                          Rerun(f"train_transformer {KILLED_TRANSFORMER}", killed_resumed_at(cluster_run)),
                          from_outputs=frozenset(lost.values()))
    assert left_in_workspace(repo) == [], left_in_workspace(repo)
    down = ", ".join(f"{o['down_s']:.0f}" for o in outages)
    busy = ", ".join(str(len(o["jobs_running"])) for o in outages)
    print(f"\noutages of {down} s with {busy} jobs running: {len(spools)} spools "
          f"({len(named)} named by their jobs), replayed {len(first)} + {len(rest)} around `put track` "
          f"(one first cut short into another store after {cut[0]} of {cut[1]} records; lost and logged by "
          f"`put track` from the outputs: {sorted(lost.values()) or 'none'}) "
          f"({user_s:.0f} s); put track said: {tracked.strip().splitlines()[-1]}; checked on the server: {counts}")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=put-test", "-c", "user.email=put-test@localhost", *args], cwd=repo,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """An SSH server on 127.0.0.1 (a free port) that knows one key, which this fixture creates: the storage of an
    SSH remote. Stopped by its pid."""
    folder = tmp_path_factory.mktemp("sshd")
    for name in ("host", "user", "wrong"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    shutil.copy(folder / "user.pub", folder / "authorized_keys")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (folder / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host'}\n"
        f"AuthorizedKeysFile {folder}/authorized_keys\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        f"StrictModes no\nUsePAM no\nPidFile {folder / 'sshd.pid'}\nSubsystem sftp internal-sftp\n")
    Path("/run/sshd").mkdir(exist_ok=True)  # its privilege separation folder
    subprocess.run(["/usr/sbin/sshd", "-f", str(folder / "sshd_config"), "-E", str(folder / "sshd.log")], check=True,
                   timeout=30)
    try:
        yield {"url": f"ssh://root@127.0.0.1:{port}{folder / 'remote'}", "key": folder / "user",
               "wrong": folder / "wrong"}
    finally:
        pid = int((folder / "sshd.pid").read_text())
        os.kill(pid, signal.SIGTERM)


def test_results_reach_a_fresh_clone_through_a_dvc_remote_and_a_second_clone_through_the_shared_cache(
        cluster_run, sshd, tmp_path):
    """An SSH remote (a key the test made), a fresh clone's pull, a second clone on the shared cache; a remote
    that refuses the key fails in one line naming the host."""
    repo = cluster_run["repo"]
    assert dvc(repo, "remote", "add", "-d", "cluster", sshd["url"]).returncode == 0
    assert dvc(repo, "remote", "modify", "--local", "cluster", "keyfile", str(sshd["wrong"])).returncode == 0
    began = time.monotonic()
    refused = dvc(repo, "push", *BUILT_STAGES)
    errors = [line for line in refused.stderr.splitlines() if line.startswith("ERROR")]
    assert refused.returncode != 0 and len(errors) == 1 and "Permission denied" in errors[0] \
        and "127.0.0.1" in errors[0], refused.stderr
    assert time.monotonic() - began < 120
    assert dvc(repo, "remote", "modify", "--local", "cluster", "keyfile", str(sshd["key"])).returncode == 0
    began = time.monotonic()
    pushed = dvc(repo, "push", *BUILT_STAGES)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    push_s = time.monotonic() - began
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the cluster run")

    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(repo), str(fresh))
    assert dvc(fresh, "remote", "modify", "--local", "cluster", "keyfile", str(sshd["key"])).returncode == 0
    began = time.monotonic()
    pulled = dvc(fresh, "pull", *BUILT_STAGES)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    pull_s = time.monotonic() - began
    status = dvc(fresh, "status", *BUILT_STAGES)
    assert status.returncode == 0 and "up to date" in status.stdout, status.stdout
    dry = dvc(fresh, "repro", "--dry", *BUILT_STAGES)
    assert dry.returncode == 0 and "Running stage" not in dry.stdout, dry.stdout
    metrics = [json.loads(dvc(where, "metrics", "show", "--json").stdout) for where in (repo, fresh)]
    assert metrics[0] == metrics[1] and metrics[0]

    # A second clone on the same file system, on the shared cache: its prepared images are the cache's files.
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(repo), str(second))
    use_shared_cache(second, repo.parent / "shared-cache")
    checked = dvc(second, "checkout", "prepare")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    prepared = [p for p in (second / "data" / PRESET / "prepared").rglob("*") if p.is_file()]
    cached = {p.stat().st_ino for p in (repo.parent / "shared-cache").rglob("*") if p.is_file()}
    assert prepared and all(p.stat().st_ino in cached and p.stat().st_nlink >= 2 for p in prepared)
    size = sum(p.stat().st_size for p in prepared)
    print(f"\ndvc push over SSH {push_s:.1f} s, pull into a fresh clone {pull_s:.1f} s; second clone: {len(prepared)} "
          f"prepared files ({size / 2**20:.1f} MiB) linked from the shared cache, 0 bytes copied")


def checkpoint_times(repo: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in (repo / "runs").rglob("*.pt")}


def test_a_failing_job_fails_the_workflow_with_a_clear_message(cluster_run):
    repo, since = cluster_run["repo"], now()
    checkpoints = checkpoint_times(repo)
    table = (repo / "workflow" / "resources.yaml").read_text()
    set_resources(repo, "evaluate", retries=0)  # one failing attempt says it all
    try:  # an SSIM window larger than the images: the evaluation fails
        code, output = run_snakemake(repo, str(metrics_file(PRESET, EVALUATED)), timeout=15 * 60,
                                     config={"overrides": {"evaluate": {"ssim_window": 99}}})
    finally:
        (repo / "workflow" / "resources.yaml").write_text(table)
    assert code != 0
    assert "Error in rule evaluate" in output and "SLURM status is: 'FAILED'" in output, output[-4000:]
    log = Path(re.search(r"(\S+\.log) \(check log file", output).group(1))  # the Slurm log, after the rule's
    assert "put evaluate: error:" in log.read_text() and "ssim" in log.read_text().lower()
    assert final_states(sacct(since, repo=repo)) == {f"rule_evaluate_wildcards_{EVALUATED}": "FAILED"}  # nothing else
    assert checkpoint_times(repo) == checkpoints


def test_a_layout_the_partition_cannot_hold_fails_before_any_job(cluster_run):
    repo, since = cluster_run["repo"], now()
    checkpoints = checkpoint_times(repo)
    table = (repo / "workflow" / "resources.yaml").read_text()
    set_resources(repo, "train_pvqvae", nodes=3)
    began = time.monotonic()
    try:
        code, output = run_snakemake(repo, str(pvqvae_checkpoint(PRESET, "conv")), "--forcerun", "train_pvqvae",
                                     timeout=300)
    finally:
        (repo / "workflow" / "resources.yaml").write_text(table)
    assert code != 0
    assert ("workflow/resources.yaml: presets.demo.train_pvqvae.nodes: 3, but partition batch has 2 node(s)"
            in output), output[-3000:]
    assert time.monotonic() - began < 300 and sacct(since, repo=repo) == [] and checkpoint_times(repo) == checkpoints


def attempts_of(logs: dict[str, str]) -> list[tuple[int, int | None]]:
    """(step it resumed from, step it stopped at, None if it finished) of each attempt, in job order (Snakemake's
    retry is a new job with a log of its own). A retry that found the training finished (its final state kept)
    starts at the last step."""
    found = []
    for _, text in sorted(logs.items(), key=lambda item: int(item[0])):
        started = re.search(r"resuming from \S+ at step (\d+)|already trained for (\d+) iterations", text)
        stopped = re.search(r"stopped by signal at step (\d+)", text)
        found.append((int(started.group(1) or started.group(2)) if started else 0,
                      int(stopped.group(1)) if stopped else None))
    return found


def time_limit_attempts(repo: Path, tracking: TrackingServer) -> tuple[int, str]:
    """Snakemake's run of the time-limit test (below), logging to `tracking`, down for its first OUTAGE_S s."""
    outage = threading.Thread(target=lambda: tracking.restart(OUTAGE_S), daemon=True)
    outage.start()  # from now on OUTAGE_S s without a server: far longer than the client's retries
    try:
        return run_snakemake(repo, str(pvqvae_checkpoint(PRESET, "conv")), timeout=25 * 60,
                             env={"MLFLOW_TRACKING_URI": tracking.uri, MIN_STEP_ENV: str(STEP_FLOOR_S),
                                  **RETRIES_SHORTER_THAN_THE_OUTAGE},
                             config={"overrides": {"pvqvae_train": {"iterations": TIME_LIMIT_STEPS}}})
    finally:
        outage.join()


@pytest.fixture(scope="module")
def time_limit_run(cluster_run, time_limit_tracking):
    """The time-limit test's run, in a copy of the cluster run's workspace (its own resources, logs and Snakemake
    lock; the data and the configuration's outputs as the cluster run left them; no checkpoint), logging to a server
    of its own, in the background from the first test that asks for it: its attempts mostly wait on Slurm's clock
    (a limit is seen every 30 s), so the other tests run meanwhile; they count their own jobs by working directory
    (`cluster_jobs`, `sacct(repo=...)`)."""
    repo = cluster_run["repo"].parent / "time-limit"
    skipped = {cluster_run["repo"]: {"runs"}, cluster_run["repo"] / ".snakemake": {"slurm_logs", "locks"}}
    shutil.copytree(cluster_run["repo"], repo, symlinks=True, ignore=lambda folder, _: skipped.get(Path(folder), ()))
    set_resources(repo, "train_pvqvae", runtime=1, retries=10)
    since = now()
    background = concurrent.futures.ThreadPoolExecutor(1)
    done = background.submit(time_limit_attempts, repo, time_limit_tracking)
    background.shutdown(wait=False)
    try:
        yield {"repo": repo, "since": since, "done": done}
    finally:
        concurrent.futures.wait([done])  # its server is not stopped under it


def test_a_training_stopped_by_its_time_limit_resumes_attempt_after_attempt_through_a_tracking_outage(
        time_limit_run, time_limit_tracking):
    """1-minute attempts of a training that no attempt can finish on any machine (a floor of STEP_FLOOR_S s per step,
    PUT_TRAIN_MIN_STEP_S: more steps than fit in the ATTEMPT_MAX_S s an attempt lasts): Slurm's SIGTERM at the limit
    saves the state, the job ends as TIMEOUT, Snakemake's retry resumes it, and every attempt starts from the step
    the previous one saved and gets further (10 retries, for a slow machine). Meanwhile the tracking server is down
    for longer than the client's retries: the attempts go on, say which run they could not log, and `put
    track-replay` logs it afterwards."""
    repo, since, iterations = time_limit_run["repo"], time_limit_run["since"], TIME_LIMIT_STEPS
    uri = time_limit_tracking.uri
    target = pvqvae_checkpoint(PRESET, "conv")
    code, output = time_limit_run["done"].result()
    assert code == 0, output[-4000:]
    states = [r.state for r in sacct(since, repo=repo) if r.comment == "rule_train_pvqvae_wildcards_conv"]
    assert "TIMEOUT" in states and states[-1] == "COMPLETED", states
    logs = slurm_logs(repo, "train_pvqvae", "conv")
    attempts = attempts_of(logs)
    assert len(attempts) >= 2 and attempts[-1][1] is None, attempts
    for (start, stop), (next_start, _) in zip(attempts, attempts[1:]):
        if stop is None:  # it finished, and Slurm's limit killed the job step after (TIME_LIMIT_STEPS' comment)
            assert next_start == iterations, attempts  # the retry wrote the final state out, trained nothing
        else:
            assert stop > start and next_start == stop, attempts  # resumed where it saved
    assert load_checkpoint(repo / target, kind="pvqvae").training["step"] == iterations
    (final,) = (repo / target).parent.glob(f"{target.stem}.final-*.pt")  # the final state, kept for a retry
    assert final.samefile(repo / target) and not resume_path(repo / target).exists()

    # The outage: attempts that could not log say so in one line each; their records are logged afterwards.
    spooled = [SPOOL_LINE.search(text) for text in logs.values() for text in text.splitlines()]
    spools = sorted({Path(m.group(2)) for m in spooled if m})
    assert spools and all(m.group(1) == uri for m in spooled if m), "the outage hit no attempt"
    replayed = subprocess.run([str(BIN / "put"), "track-replay", *map(str, spools)], cwd=repo, capture_output=True,
                              text=True, timeout=600, env={**os.environ, "MLFLOW_TRACKING_URI": uri})
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    counts = check_server(uri, repo, params_of(repo), ["train_pvqvae conv"])
    print(f"\ntime limit: {iterations} steps (at most {ATTEMPT_MAX_S / STEP_FLOOR_S:.0f} in an attempt), attempts "
          f"{attempts} ({states}); "
          f"{len(spools)} spooled attempt(s) replayed; checked: {counts}")

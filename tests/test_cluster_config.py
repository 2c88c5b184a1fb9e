"""The Slurm half of the workflow without a cluster: workflow/resources.yaml and the site file are
validated with errors naming the key, rules get the resources the executor plugin reads, the profile is
found from the repository root, and `--gpus N` / `--nodes N` re-run training under torchrun (one node) or srun with
one torchrun per node."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from put import cli
from put.config import PRESETS
from put.dag.resources import (
    RESOURCE_KEYS,
    RESUMABLE_RULES,
    RULES,
    STOP_WARNING_S,
    ClusterConfigError,
    load_resource_table,
    load_site,
    rule_resources,
    rule_retries,
)
from put.train import launch
from tests.helpers import ROOT

TABLE_PATH = ROOT / "workflow" / "resources.yaml"
SITE = {"account": "lab", "partition": "cpuq", "gpu_partition": "gpuq", "gpu_model": "a100", "qos": "normal"}


def test_the_repository_resource_table_covers_every_preset_and_rule():
    table = load_resource_table(TABLE_PATH)
    assert set(table) == set(PRESETS)
    for preset in PRESETS:
        assert set(table[preset]) == set(RULES)
        assert all(set(resources) == set(RESOURCE_KEYS) for resources in table[preset].values())
    # The demo fits the 2-core test cluster; ImageNet's transformer trains on 8 GPUs under torchrun, FFHQ's on 1
    # (the measured scaling, see the file's comment), the rest of a preset as ImageNet's.
    assert all(r["gpu"] == 0 and r["cpus_per_task"] <= 2 for r in table["demo"].values())
    assert table["imagenet"]["train_transformer"]["gpu"] == 8 and table["ffhq"]["train_transformer"]["gpu"] == 1
    assert table["imagenet"]["train_transformer"]["nodes"] == 2 and table["ffhq"]["train_transformer"]["nodes"] == 1
    assert table["ffhq"]["train_pvqvae"] == table["imagenet"]["train_pvqvae"]


@pytest.mark.parametrize("text, message", [
    ("defaults: {gpu: 0, cpus_per_task: 1, mem_mb: 1, runtime: 1, retries: 0}\npresets: {demo: {train: {}}}",
     "presets.demo.train: unknown rule"),
    ("defaults: {gpu: 0, cpus_per_task: 1, mem_mb: 1, runtime: 1, retries: 0}\npresets: {demo: {split: {gpus: 1}}}",
     "presets.demo.split.gpus: unknown resource"),
    ("defaults: {gpu: 0, cpus_per_task: 1, mem_mb: 1, runtime: 1, retries: 0}\npresets: {ffhk: {}}",
     "presets.ffhk: unknown preset"),
    ("defaults: {gpu: -1, cpus_per_task: 1, mem_mb: 1, runtime: 1, retries: 0}", "defaults.gpu: expected a whole"),
    ("defaults: {gpu: 0, cpus_per_task: 1, mem_mb: 1, runtime: 1}", "defaults lacks ['retries']"),
    ("default: {}", "unknown top-level key(s) ['default']"),
    ("defaults: [", "not valid YAML"),
])
def test_resource_table_errors_name_the_file_and_key(tmp_path, text, message):
    path = tmp_path / "resources.yaml"
    path.write_text(text)
    with pytest.raises(ClusterConfigError) as err:
        load_resource_table(path)
    assert str(path) in str(err.value) and message in str(err.value)


@pytest.mark.parametrize("text, message", [
    ("acount: lab", "acount: unknown setting"),
    ("partition: 3", "partition: expected a name"),
    ("gpu_model: \"'a100'\"", "gpu_model: expected a name"),
])
def test_site_file_errors_name_the_file_and_key(tmp_path, text, message):
    path = tmp_path / "site.yaml"
    path.write_text(text)
    with pytest.raises(ClusterConfigError, match=message):
        load_site(path)


def test_site_file_location(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PUT_SLURM_SITE", raising=False)
    assert load_site() == {}  # no site file: the cluster's defaults
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "site.yaml").write_text("account: lab\ngpu_model: null\n")
    assert load_site() == {"account": "lab"}
    monkeypatch.setenv("PUT_SLURM_SITE", str(tmp_path / "elsewhere.yaml"))
    with pytest.raises(ClusterConfigError, match="PUT_SLURM_SITE=.*elsewhere.yaml: no such file"):
        load_site()
    (tmp_path / "elsewhere.yaml").write_text("partition: short\n")
    assert load_site() == {"partition": "short"}


def test_the_example_site_file_is_valid():
    assert load_site(ROOT / "slurm" / "site.example.yaml") == {}


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("site", [{}, SITE], ids=["no-site", "site"])
def test_rule_resources(preset, rule, site):
    table = load_resource_table(TABLE_PATH)
    wanted = table[preset][rule]
    resources = rule_resources(table, site, preset, rule)
    assert [resources[k] for k in ("nodes", "gpus_per_node", "cpus_per_task", "mem_mb", "runtime")] == \
        [wanted[k] for k in ("nodes", "gpu", "cpus_per_task", "mem_mb", "runtime")]
    assert rule_retries(table, preset, rule) == wanted["retries"]
    gpu_job, multi_node = wanted["gpu"] > 0, wanted["nodes"] > 1
    if multi_node:  # the command starts its own step: one task per node, the GPUs per node
        assert resources["mpi"] == "srun" and resources["tasks"] == wanted["nodes"] and "gpu" not in resources
        model = "a100:" if site else ""
        assert f"--ntasks-per-node=1 --gpus-per-node={model}{wanted['gpu']}" in resources["slurm_extra"]
    else:
        assert resources["gpu"] == wanted["gpu"] and "mpi" not in resources and "--gpus-per-node" not in \
            resources["slurm_extra"]
    if site:
        assert resources["slurm_account"] == "lab" and resources["qos"] == "normal"
        assert resources["slurm_partition"] == ("gpuq" if gpu_job else "cpuq")
        # --gpus=a100:N on one node's GPU jobs only
        assert resources.get("gpu_model") == ("a100" if gpu_job and not multi_node else None)
    else:
        assert not {"slurm_account", "slurm_partition", "gpu_model", "qos"} & set(resources)
    long_training = rule.startswith("train_") and wanted["runtime"] * 60 >= 10 * STOP_WARNING_S
    assert ("--signal=TERM@300" in resources["slurm_extra"]) == long_training
    assert "--open-mode=append" in resources["slurm_extra"]


def test_gpu_partition_falls_back_to_partition():
    table = load_resource_table(TABLE_PATH)
    assert rule_resources(table, {"partition": "main"}, "ffhq", "train_transformer")["slurm_partition"] == "main"


def test_the_slurm_profile_is_found_from_the_repository_root(tmp_path):
    """`snakemake --profile slurm` from the root: the executor, and the site file's settings on the jobs."""
    site = tmp_path / "site.yaml"
    site.write_text("account: lab\npartition: cpuq\ngpu_partition: gpuq\ngpu_model: a100\n")
    env = {**os.environ, "PUT_SLURM_SITE": str(site),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--profile", "slurm", "--dry-run",
                             "ablations", "--config", "preset=imagenet"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Using profile slurm" in result.stdout + result.stderr
    transformer = next(line for line in result.stdout.split("rule train_transformer:")[1].splitlines()
                       if "resources:" in line)
    for expected in ("nodes=2", "gpus_per_node=8", "mpi=srun", "tasks=2", "slurm_partition=gpuq",
                     "slurm_account=lab", "--ntasks-per-node=1 --gpus-per-node=a100:8", "--signal=TERM@300"):
        assert expected in transformer
    assert "--gpus 8 --nodes 2" in result.stdout  # the shell command: one torchrun per node, one process per GPU


class Exec(BaseException):
    """Stands in for os.execv, which never returns: not an error the CLI reports."""


def test_gpus_above_one_reruns_the_command_under_torchrun(monkeypatch):
    calls = []

    def fake_execvp(path, argv):
        calls.append(argv)
        raise Exec

    monkeypatch.setattr(launch.os, "execvp", fake_execvp)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "8")
    argv = ["train-pvqvae", "--preset", "demo", "--gpus", "4", "--out", "x.pt"]
    with pytest.raises(Exec):
        cli.main(argv)
    assert calls == [[*launch.TORCHRUN, "--standalone", "--nnodes=1", "--nproc-per-node=4", "-m", "put", *argv]]
    assert os.environ["OMP_NUM_THREADS"] == "2"  # the job's 8 CPUs shared by 4 processes


def test_several_nodes_run_one_torchrun_per_node_under_srun(monkeypatch):
    """In the batch step of a two-node job (what Snakemake runs with the job's SLURM_* variables dropped, hence
    scontrol): srun, one task per node, a c10d rendezvous on this node, the job's CPUs per task."""
    monkeypatch.setattr(launch.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(launch, "slurm_job", lambda job: {"NodeList": "gpu[07-08]", "CPUs/Task": "16", "Restarts": "1"})
    monkeypatch.setattr(launch, "hostnames", lambda nodelist: ["gpu07", "gpu08"])
    monkeypatch.setattr(launch.socket, "gethostname", lambda: "gpu07")
    monkeypatch.setattr(launch, "free_port", lambda: 29555)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    command = launch.launch_command(2, 8, ["train-transformer", "--gpus", "8", "--nodes", "2"])
    assert command[:7] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
                           "--cpus-per-task=16", "--export=ALL"]
    assert command[7:10] == launch.TORCHRUN
    assert command[10:] == ["--nnodes=2", "--nproc-per-node=8", "--max-restarts=0", "--rdzv-backend=c10d",
                            "--rdzv-endpoint=gpu07:29555", "--rdzv-id=4242.1",
                            f"--rdzv-conf=join_timeout={launch.RENDEZVOUS_TIMEOUT_S}", "-m", "put",
                            "train-transformer", "--gpus", "8", "--nodes", "2"]


@pytest.mark.parametrize("job, hosts, message", [
    (None, [], "--nodes 2: a multi-node training runs inside a Slurm job of 2 nodes"),
    ("7", ["gpu07"], "--nodes 2: Slurm job 7 has 1 node(s) (gpu07); submit it with --nodes 2"),
    ("7", ["gpu01", "gpu02"], "--nodes 2: this host (gpu07) is not a node of Slurm job 7 (gpu01, gpu02)"),
])
def test_a_multi_node_launch_outside_its_allocation_is_one_line(monkeypatch, capsys, job, hosts, message):
    monkeypatch.setattr(launch.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(launch, "slurm_job", lambda job: {"NodeList": ",".join(hosts)})
    monkeypatch.setattr(launch, "hostnames", lambda nodelist: hosts)
    monkeypatch.setattr(launch.socket, "gethostname", lambda: "gpu07")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    if job:
        monkeypatch.setenv("SLURM_JOB_ID", job)
    else:
        monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert cli.main(["train-transformer", "--preset", "demo", "--pvqvae", "p.pt", "--out", "x.pt", "--gpus", "1",
                     "--nodes", "2"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("put train-transformer: error: ") and message in line


def test_threads_follow_the_slurm_allocation(monkeypatch):
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    assert launch.threads_per_process() is None
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert launch.threads_per_process() == 3 and launch.threads_per_process(4) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert launch.threads_per_process() is None  # an explicit setting wins


def test_the_resource_table_knows_every_rule_of_the_snakefile():
    result = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--list-rules"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rules = {line.strip() for line in result.stdout.splitlines() if line.strip()}
    # Target rules run no job; the official stages have rules only when params.yaml names official checkpoints, the
    # seed replicates' only when it names seeds, and they take their stage's resources.
    from put.dag.declaration import STAGES

    assert rules - {"all", "ablations"} == {s.name for s in STAGES if s.fan_out not in ("official", "seeds")}
    assert set(RULES) == {s.name for s in STAGES if s.replica_of is None}
    replicate = next(s for s in STAGES if s.name == "train_transformer_tok")
    assert replicate.replica_of == "train_transformer" and "train_transformer" in RESUMABLE_RULES


@pytest.mark.slow
def test_a_rendezvous_that_never_completes_ends_in_one_line_within_its_timeout(tmp_path):
    """One node of two started (the other never does): the agent gives up after the join timeout, with one line
    naming the rendezvous, and nothing is written."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    began = time.monotonic()
    done = subprocess.run([*launch.TORCHRUN, "--nnodes=2", "--nproc-per-node=1", "--max-restarts=0",
                           "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=test",
                           "--rdzv-conf=join_timeout=5", "-m", "put", "train-pvqvae", "--preset", "demo",
                           "--out", str(tmp_path / "p.pt")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and time.monotonic() - began < 60
    lines = [line for line in done.stderr.splitlines() if "put: error" in line]
    assert len(lines) == 1 and f"rendezvous 127.0.0.1:{port} (test): not every one of the 2 nodes joined" in lines[0]
    assert not list(tmp_path.iterdir())

"""The Slurm half of the workflow without a cluster: workflow/resources.yaml and the site file are
validated with errors naming the key, rules get the resources the executor plugin reads, the profile is
found from the repository root, and `--gpus N` / `--nodes N` re-run training under torchrun (one node) or srun with
one torchrun per node."""

from __future__ import annotations

import json
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
from put.io.output_lock import HANDED_OVER_ENV, lock_path
from put.train import launch, torchrun
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
    monkeypatch.setattr(launch.socket, "getfqdn", lambda: "gpu07")
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    monkeypatch.delenv("SLURM_NODEID", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    if job:
        monkeypatch.setenv("SLURM_JOB_ID", job)
    else:
        monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert cli.main(["train-transformer", "--preset", "demo", "--pvqvae", "p.pt", "--out", "x.pt", "--gpus", "1",
                     "--nodes", "2"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("put train-transformer: error: ") and message in line


def fake_launcher(monkeypatch, hostname: str = "putnode1", hosts: tuple[str, ...] = ("putnode1", "putnode2")) -> list:
    """The batch step of a Slurm job on `hosts`, on the machine `hostname`; the commands exec'd go to the list."""
    calls = []

    def fake_execvp(path, argv):
        calls.append(argv)
        raise Exec

    monkeypatch.setattr(launch.os, "execvp", fake_execvp)
    monkeypatch.setattr(launch.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(launch, "slurm_job", lambda job: {"NodeList": ",".join(hosts)})
    monkeypatch.setattr(launch, "hostnames", lambda nodelist: nodelist.split(","))
    monkeypatch.setattr(launch.socket, "gethostname", lambda: hostname)
    monkeypatch.setattr(launch.socket, "getfqdn", lambda: hostname)
    monkeypatch.setattr(launch, "free_port", lambda: 29555)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    for name in ("WORLD_SIZE", "RANK", "SLURMD_NODENAME", "SLURM_NODEID", "SLURM_STEP_NODELIST", "OMP_NUM_THREADS",
                 "SLURM_CPUS_PER_TASK"):
        monkeypatch.delenv(name, raising=False)
    return calls


def test_nodes_of_cpu_processes_run_one_process_per_node(monkeypatch, tmp_path):
    """`--nodes 2 --gpus 0` (workflow/resources.yaml's `gpu: 0` on a 2-node layout) runs 2 processes, one per node
    over gloo, as `--gpus 1` does: never one process on the first node while the second idles."""
    calls = fake_launcher(monkeypatch)
    argv = ["train-pvqvae", "--preset", "demo", "--split", str(tmp_path / "none"), "--out", str(tmp_path / "p.pt"),
            "--gpus", "0", "--nodes", "2"]
    with pytest.raises(Exec):
        cli.main(argv)
    (command,) = calls
    assert command[0] == "srun" and "--nnodes=2" in command and "--nproc-per-node=1" in command
    assert [launch.needs_launch(g, n) for g, n in ((0, 1), (1, 1), (2, 1), (0, 2), (1, 2))] == \
        [False, False, True, True, True]


def test_no_second_run_starts_between_the_check_before_the_launch_and_rank_0(monkeypatch, tmp_path, capsys):
    """The launching command keeps its outputs locked through the launch (its exec'd launcher holds them while
    the workers, its children, run), so a second run started meanwhile, say while the first is in its rendezvous,
    is refused; rank 0 works under that lock without taking it again."""
    calls, out, codes = fake_launcher(monkeypatch), tmp_path / "p.pt", {}

    def launched(path, argv):
        calls.append(argv)
        with monkeypatch.context() as other:  # not a child of the launcher: its environment lacks the token
            other.delenv(HANDED_OVER_ENV, raising=False)
            codes["second run"] = cli.main(["config", "--out", str(out)])
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("RANK", "0")
        codes["rank 0"] = cli.main(["config", "--out", str(out)])  # a worker: writes the output
        raise Exec

    monkeypatch.setattr(launch.os, "execvp", launched)
    with pytest.raises(Exec):
        cli.main(["train-pvqvae", "--preset", "demo", "--split", str(tmp_path / "none"), "--out", str(out),
                  "--gpus", "2"])
    assert len(calls) == 1 and codes == {"second run": 2, "rank 0": 0} and out.is_file()
    assert f"put config: error: {out}: in use by another run (host " in capsys.readouterr().err
    assert HANDED_OVER_ENV not in os.environ and not lock_path(out).exists()  # the failed exec released it


def test_a_params_typo_fails_before_the_workers_start(monkeypatch, capsys, tmp_path):
    """params.yaml is read and its preset resolved before the launch: one line, exit 2, no worker started (each
    would have printed it, and torchrun its traceback)."""
    calls = fake_launcher(monkeypatch)
    (tmp_path / "params.yaml").write_text("presett: demo\n")
    assert cli.main(["train-pvqvae", "--params", str(tmp_path / "params.yaml"), "--out", str(tmp_path / "p.pt"),
                     "--gpus", "2"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("put train-pvqvae: error: ") and "presett" in line
    assert not calls


def test_a_bad_log_path_is_one_line(capsys, tmp_path):
    assert cli.main(["train-pvqvae", "--preset", "demo", "--out", str(tmp_path / "p.pt"), "--log", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"put train-pvqvae: error: {tmp_path}: cannot write the log here (Is a directory)"


@pytest.mark.parametrize("rank", [0, 1])
def test_a_workers_error_goes_to_the_launcher_and_only_rank_0_prints_and_logs(monkeypatch, capsys, tmp_path, rank):
    """Under torchrun every worker writes its error line to its error file, which the agent reads; only rank 0
    prints it, and only rank 0 writes --log."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "error.json"))
    log = tmp_path / "train.log"
    assert cli.main(["train-transformer", "--preset", "demo", "--pvqvae", str(tmp_path / "missing.pt"), "--out",
                     str(tmp_path / "t.pt"), "--gpus", "2", "--log", str(log)]) == 2
    line = json.loads((tmp_path / "error.json").read_text())["message"]
    assert line.startswith("put train-transformer: error: ") and "missing.pt" in line
    assert capsys.readouterr().err.splitlines() == ([line] if rank == 0 else [])
    assert log.read_text().splitlines() == [line] if rank == 0 else not log.exists()


def failures(tmp_path, codes: dict[int, int], messages: dict[int, str]) -> dict:
    """torchrun's failed workers: {rank: ProcessFailure}, with the error files report_error writes."""
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    for rank, message in messages.items():
        (tmp_path / f"error{rank}.json").write_text(json.dumps({"message": message, "timestamp": 0}))
    return {rank: ProcessFailure(local_rank=rank % 2, pid=100 + rank, exitcode=code,
                                 error_file=str(tmp_path / f"error{rank}.json")) for rank, code in codes.items()}


A, B = "put train-pvqvae: error: data/splits/train.csv: not found", "put train-pvqvae: error: disk full"


@pytest.mark.parametrize("codes, messages, lines", [
    ({0: 2, 1: 2}, {0: A, 1: A}, []),  # rank 0 printed it: nothing more
    ({0: 2, 1: 2}, {0: A, 1: B}, [B]),  # another error on rank 1: its line, once
    ({0: 143, 1: 2}, {1: A}, [A]),  # rank 0 stopped by the agent after rank 1 failed
    ({0: 2, 1: -15}, {0: A}, []),
    ({2: 2, 3: 2}, {2: A, 3: A}, [A]),  # the second node: its workers' line, once
    ({2: 2, 3: 2}, {}, ["put: error: worker(s) 2, 3 exited 2: stopped on the error another worker named "
                        "(rank 0's output)"]),
    ({0: 1, 1: 2}, {1: A}, None),  # a crash: torchrun's traceback, exit 1
    ({0: 2, 1: -9}, {0: A}, None),  # killed (out of memory, say): not a user error
])
def test_the_agent_shows_a_user_error_once(tmp_path, codes, messages, lines):
    assert torchrun.user_error_lines(failures(tmp_path, codes, messages)) == lines


def test_workers_that_exited_2_end_torchrun_with_exit_2_and_no_traceback(monkeypatch, capsys, tmp_path):
    import torch.distributed.run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    def failing(failed: dict):
        def run(args):
            raise ChildFailedError("put", failed)
        return run

    monkeypatch.setattr(torch.distributed.run, "run", failing(failures(tmp_path, {0: 2, 1: 2}, {0: A, 1: B})))
    monkeypatch.setattr(torchrun.sys, "argv", ["-c", "--standalone", "--nproc-per-node=2", "-m", "put", "x"])
    with pytest.raises(SystemExit) as stopped:
        torchrun.main()
    assert stopped.value.code == 2 and capsys.readouterr().err.splitlines() == [B]
    monkeypatch.setattr(torch.distributed.run, "run", failing(failures(tmp_path, {0: 1}, {})))
    with pytest.raises(ChildFailedError):  # a crash keeps torchrun's report
        torchrun.main()


@pytest.mark.parametrize("env, hostname, hosts, node", [
    ({}, "gpu07.cluster.example.org", ["gpu07", "gpu08"], "gpu07"),  # a fully qualified host name
    ({}, "gpu07", ["gpu07.cluster.example.org", "gpu08.cluster.example.org"], "gpu07.cluster.example.org"),
    ({"SLURMD_NODENAME": "gpu08"}, "rack2-u17", ["gpu07", "gpu08"], "gpu08"),  # Slurm's name, not the host's
    ({"SLURM_NODEID": "1"}, "rack2-u17", ["gpu07", "gpu08"], "gpu08"),
    ({"SLURM_NODEID": "0", "SLURM_STEP_NODELIST": "gpu08"}, "rack2-u17", ["gpu07", "gpu08"], "gpu08"),  # in a step
    ({"SLURMD_NODENAME": "gpu09"}, "gpu07", ["gpu07", "gpu08"], None),  # Slurm says: another node
    ({}, "gpu09", ["gpu07", "gpu08"], None),
])
def test_this_node_is_found_by_slurms_node_names(monkeypatch, env, hostname, hosts, node):
    fake_launcher(monkeypatch, hostname, tuple(hosts))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert launch.this_node(hosts) == node


def test_a_fully_qualified_host_name_launches_on_short_slurm_names(monkeypatch):
    """The rendezvous stays on this machine's own name (torch hosts it on the node whose name it is)."""
    fake_launcher(monkeypatch, "putnode1.cluster.example.org")
    command = launch.launch_command(2, 1, ["train-pvqvae"])
    assert "--rdzv-endpoint=putnode1.cluster.example.org:29555" in command


def test_ranks_follow_the_nodes_host_names_sorted_as_text():
    """What docs/cluster.md says of rank 0: torch's c10d rendezvous numbers the nodes by their descriptors sorted,
    fully qualified host name first, as text (gpu10 before gpu9), not by the order they joined or Slurm's list."""
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc

    joined = [_NodeDesc("gpu9.cluster", 100, 0), _NodeDesc("gpu10.cluster", 200, 0)]
    assert [node.addr for node in sorted(joined)] == ["gpu10.cluster", "gpu9.cluster"]


@pytest.mark.slow
def test_a_user_error_in_both_workers_is_one_line_and_exit_2(tmp_path):
    """`--gpus 2` on a split that is not there, met by both workers under the real torchrun: rank 0's line (in
    --log too), exit 2, no traceback and no line from the agent."""
    log = tmp_path / "train.log"
    done = subprocess.run([sys.executable, "-m", "put", "train-pvqvae", "--preset", "demo", "--split",
                           str(tmp_path / "none"), "--out", str(tmp_path / "p.pt"), "--device", "cpu", "--gpus", "2",
                           "--log", str(log)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if not line.startswith("launching: ")]
    assert len(lines) == 1 and lines[0].startswith("put train-pvqvae: error: "), done.stderr[-3000:]
    assert str(tmp_path / "none") in lines[0] and log.read_text().splitlines()[-1] == lines[0]


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


@pytest.mark.parametrize("device", [None, "cuda"])
def test_more_gpus_than_the_node_has_is_one_line_before_any_worker_starts(monkeypatch, capsys, device):
    """Issue 43, 7: `--gpus` above the node's GPU count failed in every extra worker with a
    `torch.cuda.set_device` traceback, exit 1."""
    import torch

    calls = []
    monkeypatch.setattr(launch.os, "execvp", lambda path, argv: calls.append(argv))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a node with two GPUs
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    argv = ["train-pvqvae", "--preset", "demo", "--gpus", "4", "--out", "x.pt", *(["--device", device] if device
                                                                                 else [])]
    assert cli.main(argv) == 2 and not calls
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("put train-pvqvae: error: --gpus 4: this node") and "has 2 CUDA device(s)" in line
    assert launch.check_gpus(2, device) is None and launch.check_gpus(4, "cpu") is None  # as many: fine; CPU

"""Launching a training over several processes: `torchrun` on this node (one process per GPU), or on several
nodes of a Slurm job, one `torchrun` per node under `srun` with a c10d rendezvous on this (the first) node
(docs/cluster.md, "Several GPUs and nodes per training job")."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from typing import NoReturn

from put.errors import InputError

# How long the agents wait for every node to join (torchrun's own default: 600 s). A node that never starts
# ends the job after this, with one line naming the rendezvous (see `torchrun`).
RENDEZVOUS_TIMEOUT_ENV = "PUT_RENDEZVOUS_TIMEOUT"
RENDEZVOUS_TIMEOUT_S = 300
TORCHRUN = [sys.executable, "-c", "from put.train.launch import torchrun; torchrun()"]


def slurm_cpus() -> int | None:
    """The CPUs Slurm gave each task of this job (SLURM_CPUS_PER_TASK); None outside Slurm. The one place that
    reads it: threads (below) and data-loader workers (train/data.py) follow it."""
    cpus = os.environ.get("SLURM_CPUS_PER_TASK")
    return int(cpus) if cpus else None


def threads_per_process(processes: int = 1) -> int | None:
    """Under Slurm: the job's CPUs on this node shared by its processes, not every core of the node (None
    elsewhere, or when OMP_NUM_THREADS is set)."""
    cpus = slurm_cpus()
    if cpus is None or "OMP_NUM_THREADS" in os.environ:
        return None
    return max(1, cpus // processes)


def slurm_job(job_id: str) -> dict[str, str]:
    """`scontrol show job`'s fields of a job. Asked, not read from SLURM_* variables: Snakemake's job step drops
    those (all but the job id) before it runs a rule's command."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return dict(field.split("=", 1) for field in out.split() if "=" in field)


def hostnames(nodelist: str) -> list[str]:
    """The host names of a Slurm node list (`putnode[1-2]`), in order (`scontrol show hostnames`)."""
    return subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=60,
                          check=True).stdout.split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def launch_command(nodes: int, processes: int, argv: list[str]) -> list[str]:
    """The command that runs `put ARGV` as `processes` processes on each of `nodes` nodes."""
    if nodes == 1:
        return [*TORCHRUN, "--standalone", "--nnodes=1", f"--nproc-per-node={processes}", "-m", "put", *argv]
    if shutil.which("srun") is None or "SLURM_JOB_ID" not in os.environ:
        raise InputError(f"--nodes {nodes}: a multi-node training runs inside a Slurm job of {nodes} nodes "
                         "(snakemake --profile slurm, or sbatch --nodes); this is no Slurm job")
    job_id = os.environ["SLURM_JOB_ID"]
    job = slurm_job(job_id)
    hosts = hostnames(job.get("NodeList", ""))
    if len(hosts) < nodes:
        raise InputError(f"--nodes {nodes}: Slurm job {job_id} has {len(hosts)} node(s) ({', '.join(hosts)}); "
                         f"submit it with --nodes {nodes} (workflow/resources.yaml: nodes)")
    head = socket.gethostname()
    if head not in hosts:
        raise InputError(f"--nodes {nodes}: this host ({head}) is not a node of Slurm job {job_id} "
                         f"({', '.join(hosts)}); run the command in the job's batch step")
    timeout = int(os.environ.get(RENDEZVOUS_TIMEOUT_ENV, RENDEZVOUS_TIMEOUT_S))
    attempt = job.get("Restarts", "0")  # a requeued job keeps its id: a new rendezvous per attempt
    cpus = slurm_cpus() or (int(job["CPUs/Task"]) if job.get("CPUs/Task", "").isdigit() else None)
    return ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
            *([f"--cpus-per-task={cpus}"] if cpus else []), "--export=ALL",
            *TORCHRUN, f"--nnodes={nodes}", f"--nproc-per-node={processes}", "--max-restarts=0",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={head}:{free_port()}",
            f"--rdzv-id={job_id}.{attempt}", f"--rdzv-conf=join_timeout={timeout}",
            "-m", "put", *argv]


def launch(nodes: int, processes: int, argv: list[str]) -> NoReturn:
    """Replaces this process by the launcher of `launch_command`."""
    command = launch_command(nodes, processes, argv)
    threads = threads_per_process(processes)
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    print("launching: " + " ".join(command), file=sys.stderr, flush=True)
    os.execvp(command[0], command)


def torchrun() -> None:
    """`torchrun` whose parser matches its own options exactly (by default it takes an abbreviation out of the
    training command's arguments: our `--log` is ambiguous with its `--log-dir`, ...), and whose rendezvous
    timeout is one line naming the rendezvous instead of a traceback per agent."""
    import torch.distributed.run
    from torch.distributed.elastic.rendezvous.api import RendezvousTimeoutError

    parser = torch.distributed.run.get_args_parser()
    parser.allow_abbrev = False
    args = parser.parse_args(sys.argv[1:])
    try:
        torch.distributed.run.run(args)
    except RendezvousTimeoutError:
        print(f"put: error: rendezvous {args.rdzv_endpoint} ({args.rdzv_id}): not every one of the {args.nnodes} "
              f"nodes joined within {args.rdzv_conf or 'the timeout'} (a node that never started, or that cannot "
              f"reach {args.rdzv_endpoint}); nothing was trained, a saved state is intact", file=sys.stderr)
        sys.exit(2)

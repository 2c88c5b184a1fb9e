"""Launching a training: `torchrun` on this node, or one per node of a Slurm job under `srun` (docs/cluster.md,
"Several GPUs and nodes per training job"). c10d ranks nodes by host name sorted as text (gpu10 before gpu9), so
rank 0, the writer, need not be on this node."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from typing import NoReturn

from put.errors import InputError

# How long the agents wait for every node to join (torchrun's own default: 600 s). A node that never starts
# ends the job after this, with one line naming the rendezvous (put/train/torchrun.py).
RENDEZVOUS_TIMEOUT_ENV = "PUT_RENDEZVOUS_TIMEOUT"
RENDEZVOUS_TIMEOUT_S = 300
TORCHRUN = [sys.executable, "-c", "from put.train.torchrun import main; main()"]


def processes_per_node(gpus: int) -> int:
    """`--gpus G`: G processes per node, one per GPU; 0 (a CPU job: workflow/resources.yaml's default) and 1 are
    one process per node, so `--nodes N --gpus 0` is N processes over gloo, one per node of the job."""
    return max(1, gpus)


def check_gpus(gpus: int, device: str | None) -> None:
    """`--gpus G` on CUDA (`--device cuda`, or no --device on a node that has CUDA) asks for G GPUs on each node:
    more than this node has is one line now, not a `torch.cuda.set_device` traceback in every extra worker. On a
    node without CUDA, or with --device cpu, G is G CPU processes (gloo)."""
    if gpus <= 1 or (device is not None and not device.startswith("cuda")):
        return
    import torch  # here: only a launch needs it

    if not torch.cuda.is_available():
        if device is None:
            return
        raise InputError(f"--gpus {gpus} --device {device}: no CUDA device is available on this node "
                         f"({socket.gethostname()})")
    found = torch.cuda.device_count()
    if gpus > found:
        raise InputError(f"--gpus {gpus}: this node ({socket.gethostname()}) has {found} CUDA device(s); ask for "
                         f"--gpus {found} or fewer per node (workflow/resources.yaml: gpu), or --device cpu for "
                         f"{gpus} CPU processes")


def needs_launch(gpus: int, nodes: int) -> bool:
    """Whether the command re-runs itself under the launcher: more than one process in all, and not already one
    of the launcher's workers."""
    return processes_per_node(gpus) * nodes > 1 and "WORLD_SIZE" not in os.environ


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


def short_name(host: str) -> str:
    return host.split(".", 1)[0]


def this_node(hosts: list[str]) -> str | None:
    """This machine's name in the job's node list `hosts`: Slurm's own name for it when the job step says
    (SLURMD_NODENAME, which Snakemake's job step keeps, or SLURM_NODEID), else its host name matched in full or by
    its short form (`gpu9.cluster.org` is Slurm's `gpu9`, and the other way round). None: not a node of the job."""
    named = os.environ.get("SLURMD_NODENAME")
    if named:  # the list's own form of the name: Slurm writes both
        return named if named in hosts else None
    index = os.environ.get("SLURM_NODEID", "")
    if index.isdigit():  # an index into the step's nodes inside an srun step, else the job's (the batch step: 0)
        step = os.environ.get("SLURM_STEP_NODELIST")
        listed = hostnames(step) if step else hosts
        if int(index) < len(listed) and listed[int(index)] in hosts:
            return listed[int(index)]
    for name in (socket.gethostname(), socket.getfqdn()):
        if name in hosts:
            return name
        matches = [host for host in hosts if short_name(host) == short_name(name)]
        if len(matches) == 1:
            return matches[0]
    return None


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
    if this_node(hosts) is None:
        raise InputError(f"--nodes {nodes}: this host ({socket.gethostname()}) is not a node of Slurm job {job_id} "
                         f"({', '.join(hosts)}); run the command in the job's batch step")
    # The rendezvous on this machine's own host name: torch hosts it on the node whose name it is.
    head = socket.gethostname()
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

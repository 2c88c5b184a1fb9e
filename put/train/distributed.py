"""Process-group set-up for `torchrun` (DDP: N processes on one node, or on each of several nodes, see launch.py)
and the single-process case."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Distributed:
    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def local_processes(self) -> int:
        """Training processes on this node (torchrun's LOCAL_WORLD_SIZE): they share the node's CPUs."""
        return int(os.environ.get("LOCAL_WORLD_SIZE", self.world_size))

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def all_true(self, flag: bool) -> bool:
        """True only if `flag` holds on every process (a stop request or a finite loss, say)."""
        if not self.enabled:
            return flag
        value = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MIN)
        return bool(value.item())

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()


def setup_distributed(device: str | None = None) -> Distributed:
    """Reads torchrun's RANK / WORLD_SIZE / LOCAL_RANK; NCCL on GPUs, gloo on CPU."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", local_rank if world_size > 1 else (dev.index or 0))
        torch.cuda.set_device(dev)
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", rank=rank, world_size=world_size)
    return Distributed(rank, world_size, dev)


def teardown_distributed() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()

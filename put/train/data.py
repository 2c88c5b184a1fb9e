"""Deterministic training batches: every image, crop, flip and mask is a pure function of
(run seed, step, position in the global batch). A resumed run therefore sees exactly the batches an
uninterrupted run would, whatever the number of data-loader workers or DDP processes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Literal

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from put.errors import InputError
from put.models.seeding import derive_seed
from put.train.launch import slurm_cpus


class StepBatchSampler(Sampler[list[tuple[int, int]]]):
    """Yields, for steps start..total-1, this process's share of the global batch as (index, item seed)."""

    def __init__(self, num_items: int, global_batch: int, seed: int, start_step: int, total_steps: int,
                 rank: int = 0, world_size: int = 1):
        if num_items < 1:
            raise InputError("the training split is empty")
        if global_batch % world_size:
            raise InputError(f"batch_size {global_batch} is not divisible by the {world_size} processes")
        self.num_items, self.global_batch, self.seed = num_items, global_batch, seed
        self.start_step, self.total_steps = start_step, total_steps
        self.local_batch = global_batch // world_size
        self.offset = rank * self.local_batch
        self._epoch, self._order = -1, np.arange(0)

    def order(self, epoch: int) -> np.ndarray:
        if epoch != self._epoch:
            self._epoch, self._order = epoch, np.random.default_rng([self.seed, epoch]).permutation(self.num_items)
        return self._order

    def batch(self, step: int) -> list[tuple[int, int]]:
        first = step * self.global_batch + self.offset
        items = []
        for position in range(first, first + self.local_batch):
            epoch, within = divmod(position, self.num_items)
            items.append((int(self.order(epoch)[within]), derive_seed(self.seed, step, position)))
        return items

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        for step in range(self.start_step, self.total_steps):
            yield self.batch(step)

    def __len__(self) -> int:
        return self.total_steps - self.start_step


class MaskedImages(Dataset):
    """(index, seed) -> (image, *keep-masks): the augmented crop and the masks drawn for it."""

    def __init__(self, images: Dataset, draw_masks: Callable[[np.random.Generator], tuple[np.ndarray, ...]]):
        self.images, self.draw_masks = images, draw_masks

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, item: tuple[int, int]) -> tuple[torch.Tensor, ...]:
        index, seed = item
        image = self.images[(index, seed)]
        masks = self.draw_masks(np.random.default_rng([seed, 1]))
        return (image, *(torch.from_numpy(np.ascontiguousarray(m, dtype=np.float32))[None] for m in masks))


def loader_workers(configured: int | Literal["auto"], processes: int = 1) -> int:
    """Data-loader processes for each of the `processes` training processes of this job on this node. "auto":
    the job's CPUs (Slurm's SLURM_CPUS_PER_TASK, else the CPUs this process may run on) shared evenly by the
    training processes, each keeping one CPU for itself."""
    if configured != "auto":
        return int(configured)
    cpus = slurm_cpus() or len(os.sched_getaffinity(0))
    return max(0, cpus // max(1, processes) - 1)


def training_loader(dataset: MaskedImages, sampler: StepBatchSampler, num_workers: int | Literal["auto"],
                    processes: int = 1) -> DataLoader:
    """`processes`: the training processes on this node (DDP), which share its CPUs."""
    return DataLoader(dataset, batch_sampler=sampler, num_workers=loader_workers(num_workers, processes),
                      pin_memory=torch.cuda.is_available(), persistent_workers=False)

"""Small pieces both training tasks use: DDP wrapping, learning rates, held-out batches."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from put.train.distributed import Distributed


def wrap_ddp(module: nn.Module, dist: Distributed, **kwargs) -> nn.Module:
    if not dist.enabled:
        return module
    ids = [dist.device.index] if dist.device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids, **kwargs)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def held_out_batch(images, count: int, draw_mask: Callable[[np.random.Generator], np.ndarray], seed: int,
                   device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `count` test crops (centre crops) with fixed seeded masks: the same batch at every evaluation."""
    n = min(count, len(images))
    x = torch.stack([images[i] for i in range(n)])
    rng = np.random.default_rng([seed, 2])
    keep = torch.stack([torch.from_numpy(np.asarray(draw_mask(rng), dtype=np.float32))[None] for _ in range(n)])
    return x.to(device), keep.to(device)


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """Mean PSNR (dB) of images in [-1, 1] measured on the [0, 1] scale (training-time monitoring only;
    the evaluation stage uses scikit-image under the paper's protocol)."""
    mse = (((a - b) / 2) ** 2).flatten(1).mean(1).clamp_min(1e-10)
    return float((10 * torch.log10(1 / mse)).mean())

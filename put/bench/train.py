"""Training-step benchmark: seconds per step, images/s and peak memory of each training stage at a per-GPU batch,
with the stages' own task classes on generated images and masks, in training's precision (bf16 autocast on GPUs).
Data loading is not timed (`put bench loader` is); N GPUs are timed as one at the per-GPU batch, without DDP's
all-reduce.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from put.bench.common import environment, network, peak_memory_fields, rate_fields
from put.config import model_config
from put.config import preset as load_preset
from put.errors import InputError
from put.masks.training import TrainingMasks, batch_of
from put.models.checkpoint import save_pvqvae
from put.models.device import synchronize
from put.models.pvqvae import PVQVAE
from put.models.seeding import derive_seed
from put.train.distributed import Distributed
from put.train.loop import finite_or_raise
from put.train.pvqvae import PVQVAETask
from put.train.transformer import TransformerTask

STAGES = ("pvqvae", "transformer")
WARMUP_STEPS = 3


def synthetic_images(count: int, size: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(3, size, size, generator=g) * 2 - 1 for _ in range(count)]


def build_task(stage: str, preset: str, batch: int, dev: torch.device, folder: Path, **train_updates):
    """The stage's task at per-GPU batch `batch` (its global batch, for one process), with `train_updates` to its
    training settings, and one training batch."""
    P, config = load_preset(preset), model_config(preset)
    size, dist = config.image_size, Distributed(0, 1, dev)
    train = (P.pvqvae_train if stage == "pvqvae" else P.transformer_train).model_copy(
        update={"batch_size": batch, **train_updates})
    # The preset's mask settings; generated irregular masks stand in for a PConv folder (same cost).
    masks = TrainingMasks((size, size), config.pvqvae.patch_size, train.masks,
                          erase_prob=P.pvqvae_train.erase_prob if stage == "pvqvae" else 0.0)
    held_out = synthetic_images(min(train.eval_images, 4), size, seed=1)
    rng = np.random.default_rng(0)
    images = torch.stack(synthetic_images(batch, size, seed=0))
    if stage == "pvqvae":
        task = PVQVAETask(config, train, [], held_out, masks, dist, pretrained_vgg=False)
        keeps = batch_of(masks.pvqvae_pair, rng, batch)
    else:
        pvqvae = folder / "pvqvae.pt"
        save_pvqvae(pvqvae, PVQVAE(config.pvqvae), config)
        task = TransformerTask(config, train, pvqvae, folder / "transformer.pt", [], held_out, masks, dist)
        keeps = (batch_of(masks.transformer_mask, rng, batch),)
    return task, tuple(x.to(dev) for x in (images, *keeps)), train


def bench_train(preset: str, stage: str, batch: int, device: str = "cpu", steps: int = 10) -> dict:
    """One row: the stage's training step at per-GPU batch `batch`, timed `steps` times after a warm-up."""
    from torch.utils.flop_counter import FlopCounterMode

    if stage not in STAGES:
        raise InputError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")
    started = time.perf_counter()
    dev = torch.device(device)
    P, config = load_preset(preset), model_config(preset)
    global_batch = (P.pvqvae_train if stage == "pvqvae" else P.transformer_train).batch_size
    row = {"benchmark": "train", "code": "ours", "stage": stage, "preset": preset,
           **environment(dev, dev.type == "cuda"),
           "batch": batch, "preset_batch": global_batch,
           "gpus_layout": global_batch // batch if global_batch % batch == 0 else None,
           "preset_iterations": (P.pvqvae_train if stage == "pvqvae" else P.transformer_train).iterations}
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    with tempfile.TemporaryDirectory() as folder:
        try:
            task, data, train = build_task(stage, preset, batch, dev, Path(folder))
            model = task.model if stage == "pvqvae" else task.model.transformer
            # The adversarial terms start at delayed_start: time the full step, with the discriminator's.
            first = train.loss.delayed_start if stage == "pvqvae" else 0

            def step(i: int) -> None:
                torch.manual_seed(derive_seed(train.seed, first + i, 0))  # as the loop does
                finite_or_raise(task.train_step(data, first + i), first + i, task.dist, None)

            for i in range(WARMUP_STEPS):
                step(i)
            times = []
            for i in range(WARMUP_STEPS, WARMUP_STEPS + steps):
                synchronize(dev)
                began = time.perf_counter()
                step(i)
                synchronize(dev)
                times.append(time.perf_counter() - began)
            memory = peak_memory_fields(dev)
            counter = FlopCounterMode(display=False)
            with counter:
                step(WARMUP_STEPS + steps)
        except torch.OutOfMemoryError as err:
            return {**row, "oom": str(err).splitlines()[0], **peak_memory_fields(dev),
                    "wall_seconds": time.perf_counter() - started}
    per_step = statistics.median(times)
    extra = {"discriminator_parameters": sum(p.numel() for p in task.disc.parameters())} if stage == "pvqvae" else {}
    return {**row, **network(config, model), **extra, "steps": steps, "seconds_per_step": per_step,
            "seconds_per_step_mean": statistics.fmean(times), "images_per_second": batch / per_step, **memory,
            **rate_fields(counter.get_total_flops(), per_step, dev), "wall_seconds": time.perf_counter() - started}

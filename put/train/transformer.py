"""Stage 2: train the UQ-Transformer on a frozen P-VQVAE (paper Sec. 3.2)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import torch

from put.config import ModelConfig, TransformerTrainConfig
from put.io.files import file_sha256
from put.models.checkpoint import (
    Checkpoint,
    CheckpointError,
    check_generation,
    checkpoint_config,
    load_pvqvae,
    relative_reference,
)
from put.models.device import autocast
from put.models.put_model import PUTModel, masked_token_loss
from put.models.seeding import derive_seed
from put.train.common import held_out_batch, set_lr, wrap_ddp
from put.train.data import MaskedImages, StepBatchSampler, training_loader
from put.train.distributed import Distributed
from put.train.schedule import warmup_cosine


class TransformerTask:
    kind = "transformer"

    def __init__(self, config: ModelConfig, train: TransformerTrainConfig, pvqvae_path: Path, out: Path,
                 train_images, test_images, masks, dist: Distributed, labels: dict[str, str] | None = None):
        self.config, self.train, self.dist, self.labels = config, train, dist, labels or {}
        self.train_images, self.masks, self.out = train_images, masks, Path(out)
        pvqvae, ckpt = load_pvqvae(pvqvae_path)  # first: its errors name a missing or wrong file
        check_generation(checkpoint_config(ckpt), config.generation, pvqvae_path, "this variant's transformer")
        self.pvqvae_path, self.pvqvae_sha256 = Path(pvqvae_path), file_sha256(pvqvae_path)
        if pvqvae.config != config.pvqvae:
            raise CheckpointError(f"{pvqvae_path}: its P-VQVAE config differs from the one this variant needs "
                                  f"({config.pvqvae.model_dump()})")
        torch.manual_seed(train.seed)
        self.model = PUTModel(config)
        self.model.pvqvae.load_state_dict(pvqvae.state_dict())
        self.model.pvqvae.eval().requires_grad_(False)  # frozen: no EMA updates, no gradients
        self.model.to(dist.device)
        self.transformer = wrap_ddp(self.model.transformer, dist)
        self.optimizer = torch.optim.AdamW(self.model.transformer.optimizer_groups(train.weight_decay),
                                           lr=train.lr, betas=train.betas)
        self.eval_images, self.eval_keep = held_out_batch(test_images, train.eval_images, masks.transformer_mask,
                                                          train.seed, dist.device)

    def batches(self, start_step: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        t = self.train
        sampler = StepBatchSampler(len(self.train_images), t.batch_size, t.seed, start_step, t.iterations,
                                   self.dist.rank, self.dist.world_size)
        loader = training_loader(MaskedImages(self.train_images, lambda rng: (self.masks.transformer_mask(rng),)),
                                 sampler, t.num_workers, self.dist.local_processes)
        for images, keep in loader:
            yield images.to(self.dist.device, non_blocking=True), keep.to(self.dist.device, non_blocking=True)

    def train_step(self, batch: tuple[torch.Tensor, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        t = self.train
        images, keep = batch
        set_lr(self.optimizer, warmup_cosine(step, t.iterations, t.warmup, t.lr, t.min_lr))
        # Random-quantization and stochastic-depth draws for the global batch, a pure function of (seed, step);
        # each process takes its rows, so resumed runs and any number of DDP processes see the same draws.
        generator = torch.Generator().manual_seed(derive_seed(t.seed, step, 3))
        quantization = torch.rand((t.batch_size, *self.config.token_grid), generator=generator)
        depth = torch.rand((t.batch_size, self.config.transformer.n_layer, 2), generator=generator)
        rows = slice(self.dist.rank * len(images), (self.dist.rank + 1) * len(images))
        device = self.dist.device
        with autocast(device):
            features, known, target = self.model.transformer_batch(images, keep, quantization[rows].to(device))
            logits = self.transformer(features, self.model.pvqvae.known_fraction(keep), depth[rows].to(device))
            loss = masked_token_loss(logits, target, known, self.masked_per_process(known), t.poly_epsilon)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return {"masked_token_loss": loss.detach()}

    def masked_per_process(self, known: torch.Tensor) -> torch.Tensor:
        """The global batch's masked-patch count / processes: DDP's gradient mean over processes then
        equals the gradient of the loss averaged over all masked patches of the global batch."""
        count = (~known).sum().float()
        if self.dist.enabled:
            torch.distributed.all_reduce(count)
            count = count / self.dist.world_size
        return count

    @torch.inference_mode()
    def evaluate(self) -> dict[str, float]:
        """Held-out masked-token cross-entropy (also under PolyLoss training) and accuracy (chance: log K and 1/K)."""
        self.model.transformer.eval()
        features, known, target = self.model.transformer_batch(self.eval_images, self.eval_keep)
        logits = self.model.transformer(features, self.model.pvqvae.known_fraction(self.eval_keep))
        loss = masked_token_loss(logits, target, known)
        hits = (logits.argmax(-1).view_as(target) == target)[~known].float().mean()
        self.model.transformer.train()
        k = self.config.pvqvae.codebook_size
        return {"eval/masked_token_loss": float(loss), "eval/masked_token_accuracy": float(hits),
                "eval/log_codebook_size": math.log(k)}

    def checkpoint(self, training: dict) -> Checkpoint:
        return Checkpoint("transformer", {"model": self.config.model_dump(), **self.labels},
                          self.model.transformer.state_dict(), {**training, "optimizer": self.optimizer.state_dict()},
                          pvqvae_path=relative_reference(self.pvqvae_path, self.out),
                          pvqvae_sha256=self.pvqvae_sha256)

    def restore(self, ckpt: Checkpoint) -> None:
        self.model.transformer.load_state_dict(ckpt.model)
        if "optimizer" in ckpt.training:
            self.optimizer.load_state_dict(ckpt.training["optimizer"])

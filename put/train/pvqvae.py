"""Stage 1: train a P-VQVAE (generator + PatchGAN discriminator), paper Sec. 3.1 and supplementary B."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from put.config import ModelConfig, PVQVAETrainConfig
from put.models.checkpoint import Checkpoint
from put.models.device import autocast
from put.models.discriminator import PatchDiscriminator
from put.models.losses import GeneratorLoss, discriminator_loss, discriminator_view
from put.models.pvqvae import PVQVAE
from put.models.quantizer import GumbelDraw
from put.models.seeding import derive_seed, step_uniform
from put.models.vgg import VGG19Features
from put.train.common import held_out_batch, psnr, set_lr, wrap_ddp
from put.train.data import MaskedImages, StepBatchSampler, training_loader
from put.train.distributed import Distributed
from put.train.schedule import warmup_cosine


class PVQVAETask:
    kind = "pvqvae"

    def __init__(self, config: ModelConfig, train: PVQVAETrainConfig, train_images, test_images, masks,
                 dist: Distributed, labels: dict[str, str] | None = None, pretrained_vgg: bool = True):
        """pretrained_vgg=False: a VGG19 with random weights in the perceptual and style losses, the same
        computation (speed benchmarks on machines without the weights file)."""
        self.config, self.train, self.dist, self.labels = config, train, dist, labels or {}
        self.train_images, self.masks = train_images, masks
        device = dist.device
        torch.manual_seed(train.seed)  # identical initial weights on every process and every fresh run
        self.model = PVQVAE(config.pvqvae).to(device)
        self.disc = PatchDiscriminator(width=train.discriminator_width).to(device)
        # EMA codebook buffers are all-reduced by the quantizer itself: no buffer broadcast from rank 0.
        self.model_ddp = wrap_ddp(self.model, dist, broadcast_buffers=False)
        self.disc_ddp = wrap_ddp(self.disc, dist)
        self.opt_g = torch.optim.Adam(self.model.parameters(), lr=train.lr_generator, betas=train.betas)
        self.opt_d = torch.optim.Adam(self.disc.parameters(), lr=train.lr_discriminator, betas=train.betas)
        vgg = None
        if train.loss.needs_vgg:
            vgg = (VGG19Features.pretrained() if pretrained_vgg else VGG19Features.untrained()).to(device)
        self.loss = GeneratorLoss(train.loss, vgg, self.model.to_network)
        self.discriminator_view = discriminator_view(train.loss, self.model.to_network)
        self.eval_images, self.eval_keep = held_out_batch(test_images, train.eval_images, masks.base,
                                                          train.seed, device)

    def batches(self, start_step: int) -> Iterator[tuple[torch.Tensor, ...]]:
        t = self.train
        sampler = StepBatchSampler(len(self.train_images), t.batch_size, t.seed, start_step, t.iterations,
                                   self.dist.rank, self.dist.world_size)
        loader = training_loader(MaskedImages(self.train_images, self.masks.pvqvae_pair), sampler, t.num_workers,
                                 self.dist.local_processes)
        for batch in loader:
            yield tuple(x.to(self.dist.device, non_blocking=True) for x in batch)

    def train_step(self, batch: tuple[torch.Tensor, ...], step: int) -> dict[str, torch.Tensor]:
        t = self.train
        images, erase_keep, ref_keep = batch
        set_lr(self.opt_g, warmup_cosine(step, t.iterations, t.warmup, t.lr_generator, t.min_lr))
        set_lr(self.opt_d, warmup_cosine(step, t.iterations, t.warmup, t.lr_discriminator, t.min_lr))
        adversarial = step >= t.loss.adversarial_from and t.loss.adversarial > 0

        self.disc.requires_grad_(False)  # the generator step must not leave gradients in D
        with autocast(self.dist.device):
            rec = self.model_ddp(images, erase_keep, ref_keep, self.gumbel(step, len(images)))
            terms = self.loss(rec, self.disc, step)
        self.opt_g.zero_grad(set_to_none=True)
        terms["total"].backward()
        self.opt_g.step()

        if adversarial:
            self.disc.requires_grad_(True)
            with autocast(self.dist.device):
                terms["discriminator"] = discriminator_loss(self.disc_ddp, rec, self.discriminator_view)
            self.opt_d.zero_grad(set_to_none=True)
            terms["discriminator"].backward()
            self.opt_d.step()
        usage = self.model.codebook.usage(rec.quantized.indices)
        terms.update({f"codebook_usage_{book}": torch.tensor(value) for book, value in usage.items()})
        return {k: v.detach() for k, v in terms.items()}

    def gumbel(self, step: int, rows: int) -> GumbelDraw | None:
        """This step's Gumbel sampling of codes (TPAMI), None for nearest codes. The noise of each image is a
        pure function of (seed, step, its row in the global batch): the same whatever the process layout."""
        scale = self.train.gumbel.noise_scale(step) if self.train.gumbel is not None else None
        if scale is None:
            return None
        h, w = self.config.token_grid
        first = self.dist.rank * rows
        uniform = torch.empty(rows, h * w, len(self.model.codebook.embed), device=self.dist.device)
        for row in range(rows):  # a generator per image (a few per step), not per patch
            step_uniform(derive_seed(self.train.seed, 4, first + row), step, uniform[row])
        return GumbelDraw(scale, uniform.view(rows * h * w, -1))

    @torch.inference_mode()
    def evaluate(self) -> dict[str, float]:
        """Held-out PSNR of reconstructions from tokens alone and from tokens + reference pixels."""
        self.model.eval()
        x, keep = self.eval_images, self.eval_keep
        everything = torch.ones_like(keep)
        quantized = self.model.quantize(self.model.encode(x, everything), everything)
        from_tokens = self.model.decode(quantized.vectors, torch.zeros_like(keep), x).clamp(-1, 1)
        with_reference = self.model.decode(quantized.vectors, keep, x).clamp(-1, 1)
        self.model.train()
        return {"eval/psnr_tokens_only": psnr(from_tokens, x), "eval/psnr_with_reference": psnr(with_reference, x)}

    def checkpoint(self, training: dict) -> Checkpoint:
        return Checkpoint("pvqvae", {"model": self.config.model_dump(), **self.labels}, self.model.state_dict(), {
            **training, "optimizer_generator": self.opt_g.state_dict(),
            "discriminator": self.disc.state_dict(), "optimizer_discriminator": self.opt_d.state_dict()})

    def restore(self, ckpt: Checkpoint) -> None:
        self.model.load_state_dict(ckpt.model)
        training = ckpt.training
        if "optimizer_generator" in training:
            self.opt_g.load_state_dict(training["optimizer_generator"])
            self.disc.load_state_dict(training["discriminator"])
            self.opt_d.load_state_dict(training["optimizer_discriminator"])



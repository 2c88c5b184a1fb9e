"""Dual codebook (D-Codes) with EMA updates.

One table of `num_books * K` vectors: rows [0, K) are the book `e` for unmasked patches (every pixel
known), rows [K, 2K) the book `e'` for masked patches. Ablation `one` has a single book used by all.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from put.config import PVQVAEConfig


@dataclass
class Quantized:
    vectors: torch.Tensor      # (B, C, h, w), straight-through: gradients flow to the features
    indices: torch.Tensor      # (B, h, w) rows of the whole table
    commitment: torch.Tensor   # mse(sg[e], f)


class DualCodebook(nn.Module):
    def __init__(self, config: PVQVAEConfig):
        super().__init__()
        self.codebook_size = config.codebook_size
        self.num_books = 2 if config.dual_codebook else 1
        self.decay = config.ema_decay
        self.eps = config.ema_eps
        self.per_book = config.ema_update == "per_book"
        embed = torch.randn(self.num_books * config.codebook_size, config.embed_dim)
        self.register_buffer("embed", embed)
        self.register_buffer("cluster_size", torch.zeros(len(embed)))
        self.register_buffer("embed_avg", embed.clone())
        # Books still waiting for their data-dependent init (none with the released code's randn init).
        self.register_buffer("initialized", torch.full((self.num_books,), config.codebook_init == "randn"))

    @property
    def unmasked_book(self) -> torch.Tensor:
        """Book `e`: the transformer's vocabulary."""
        return self.embed[: self.codebook_size]

    def book_of(self, patch_known: torch.Tensor) -> torch.Tensor:
        """0 (book e) for fully known patches, 1 (book e') for patches with a hole; always 0 with one book."""
        if self.num_books == 1:
            return torch.zeros_like(patch_known, dtype=torch.long)
        return (~patch_known).long()

    def nearest(self, features: torch.Tensor, book: torch.Tensor) -> torch.Tensor:
        """Index (into the whole table) of the nearest code of the given book. features (N, C), book (N,).

        Always fp32, also inside a caller's bf16 autocast (whose matmul would flip near-tied codes), and
        with the released code's arithmetic: |f|^2 + |e|^2 - 2 f.e over the whole table, then per book."""
        with torch.autocast(features.device.type, enabled=False):
            f, embed = features.float(), self.embed.float()
            dist_all = f.pow(2).sum(1, keepdim=True) + embed.pow(2).sum(1) - 2 * torch.matmul(f, embed.t())
            within = dist_all.view(len(f), self.num_books, self.codebook_size)
            within = within.gather(1, book.view(-1, 1, 1).expand(-1, 1, self.codebook_size)).squeeze(1)
            return within.argmin(-1) + book * self.codebook_size

    def forward(self, features: torch.Tensor, patch_known: torch.Tensor) -> Quantized:
        b, c, h, w = features.shape
        flat = features.permute(0, 2, 3, 1).reshape(-1, c)
        indices = self.nearest(flat.detach(), self.book_of(patch_known).reshape(-1))
        training = self.training and torch.is_grad_enabled()
        if training and not self.initialized.all():
            self._init_from_data(flat.detach().float(), self.book_of(patch_known).reshape(-1))
            indices = self.nearest(flat.detach(), self.book_of(patch_known).reshape(-1))
        # The codes of this step are read before the EMA update moves them (released code).
        codes = self.embed[indices].view(b, h, w, c).permute(0, 3, 1, 2).to(features.dtype)
        if training:
            self._ema_update(flat.detach().float(), indices)
        commitment = F.mse_loss(features, codes.detach())
        vectors = features + (codes - features).detach()
        return Quantized(vectors, indices.view(b, h, w), commitment)

    def lookup(self, indices: torch.Tensor) -> torch.Tensor:
        """(B, h, w) table indices -> (B, C, h, w) code vectors."""
        return self.embed[indices].permute(0, 3, 1, 2)

    @torch.no_grad()
    def _init_from_data(self, flat: torch.Tensor, book: torch.Tensor) -> None:
        """Start each book from random features assigned to it (as k-means++-free VQ inits do). A book is
        initialised in the first step in which every process has a feature for it; rank 0's pick is used."""
        k = self.codebook_size
        distributed = dist.is_available() and dist.is_initialized()
        for b in range(self.num_books):  # at most two books
            if self.initialized[b]:
                continue
            rows = flat[book == b]
            present = torch.tensor([float(len(rows) > 0)], device=flat.device)
            if distributed:
                dist.all_reduce(present, op=dist.ReduceOp.MIN)
            if present.item() == 0:
                continue
            pick = rows[torch.randint(len(rows), (k,), device=flat.device)]
            # Jitter separates duplicates drawn from a batch with fewer features than codes.
            pick = pick + 1e-3 * pick.std().clamp_min(1e-6) * torch.randn_like(pick)
            if distributed:
                dist.broadcast(pick, src=0)
            self.embed[b * k:(b + 1) * k] = pick
            self.embed_avg[b * k:(b + 1) * k] = pick
            self.cluster_size[b * k:(b + 1) * k] = 1.0
            self.initialized[b] = True

    @torch.no_grad()
    def _ema_update(self, flat: torch.Tensor, indices: torch.Tensor) -> None:
        """EMA of counts and sums (decay 0.99) with Laplace smoothing (`ema_update`):
        - per_book (default): smoothed within each book, and a book that received no vector in this (global)
          batch is left as it is: with small batches `e'` may see no masked patch in a step, and decaying
          it then would blow all of its codes up;
        - released: one smoothing over the whole table and every code decayed in every step."""
        counts = torch.bincount(indices, minlength=len(self.embed)).to(flat.dtype)
        sums = torch.zeros_like(self.embed_avg).index_add_(0, indices, flat)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(counts)
            dist.all_reduce(sums)
        if self.per_book:
            k, groups = self.codebook_size, self.num_books
            active = (counts.view(groups, k).sum(1) > 0).repeat_interleave(k)  # (num_books * K,)
        else:
            k, groups = len(self.embed), 1
            active = torch.ones_like(counts, dtype=torch.bool)
        decay = torch.where(active, self.decay, 1.0)
        self.cluster_size.mul_(decay).add_(counts * (1 - decay))
        self.embed_avg.mul_(decay.unsqueeze(1)).add_(sums * (1 - decay).unsqueeze(1))
        size = self.cluster_size.view(groups, k)
        total = size.sum(1, keepdim=True)
        # Laplace smoothing keeps unused codes from dividing by zero.
        smoothed = ((size + self.eps) / (total + k * self.eps) * total).view(-1, 1)
        self.embed.copy_(torch.where(active.unsqueeze(1), self.embed_avg / smoothed, self.embed))

    def usage(self, indices: torch.Tensor) -> dict[str, float]:
        """Fraction of each book's codes that appear in `indices` (logged during training)."""
        used = torch.bincount(indices.reshape(-1), minlength=len(self.embed)) > 0
        names = ("unmasked", "masked")[: self.num_books]
        return {name: used.view(self.num_books, -1)[i].float().mean().item() for i, name in enumerate(names)}

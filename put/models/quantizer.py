"""Dual codebook (D-Codes) with EMA updates.

One table of K + K' vectors: rows [0, K) are the book `e` for unmasked patches (every pixel known), rows
[K, K + K') the book `e'` for masked patches (CVPR: K' = K = 512; TPAMI: 8192 and 1024). Ablation `one`
has a single book used by all. TPAMI's codec training may draw codes by Gumbel sampling (`GumbelDraw`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from put.config import PVQVAEConfig


@dataclass
class GumbelDraw:
    """One training step's Gumbel sampling of codes: the noise scale, and uniform [0, 1) numbers (B*h*w, K + K'),
    one per patch and code, from which the Gumbel noise -log(-log u) is made."""

    scale: float
    uniform: torch.Tensor


@dataclass
class Quantized:
    vectors: torch.Tensor      # (B, C, h, w), straight-through: gradients flow to the features
    indices: torch.Tensor      # (B, h, w) rows of the whole table
    commitment: torch.Tensor   # mse(sg[e], f)


class DualCodebook(nn.Module):
    def __init__(self, config: PVQVAEConfig):
        super().__init__()
        self.codebook_size = config.codebook_size
        # Rows per book: K for `e`, then K' for `e'` (equal in CVPR, 8192 and 1024 in TPAMI).
        self.book_sizes = (config.codebook_size, config.masked_book_size) if config.dual_codebook \
            else (config.codebook_size,)
        self.num_books = len(self.book_sizes)
        self.decay = config.ema_decay
        self.eps = config.ema_eps
        self.per_book = config.ema_update == "per_book"
        embed = torch.randn(sum(self.book_sizes), config.embed_dim)
        self.register_buffer("embed", embed)
        self.register_buffer("cluster_size", torch.zeros(len(embed)))
        self.register_buffer("embed_avg", embed.clone())
        # Books still waiting for their data-dependent init (none with the released code's randn init).
        self.register_buffer("initialized", torch.full((self.num_books,), config.codebook_init == "randn"))
        # The book of every row (not saved: a function of the sizes).
        rows = torch.cat([torch.full((size,), book) for book, size in enumerate(self.book_sizes)])
        self.register_buffer("row_book", rows, persistent=False)

    @property
    def unmasked_book(self) -> torch.Tensor:
        """Book `e`: the transformer's vocabulary."""
        return self.embed[: self.codebook_size]

    def book_of(self, patch_known: torch.Tensor) -> torch.Tensor:
        """0 (book e) for fully known patches, 1 (book e') for patches with a hole; always 0 with one book."""
        if self.num_books == 1:
            return torch.zeros_like(patch_known, dtype=torch.long)
        return (~patch_known).long()

    def nearest(self, features: torch.Tensor, book: torch.Tensor, gumbel: GumbelDraw | None = None) -> torch.Tensor:
        """Index (into the whole table) of the nearest code of the given book. features (N, C), book (N,).
        With `gumbel`, the code maximising -log(distance) + scale * Gumbel noise instead (TPAMI's training).

        Always fp32 (a bf16 matmul would flip near-tied codes), with the released arithmetic: |f|^2 + |e|^2 - 2 f.e
        over the whole table, then per book."""
        with torch.autocast(features.device.type, enabled=False):
            f, embed = features.float(), self.embed.float()
            dist_all = f.pow(2).sum(1, keepdim=True) + embed.pow(2).sum(1) - 2 * torch.matmul(f, embed.t())
            if gumbel is None:
                score = -dist_all
            else:  # their adjust_logits_for_gumbel 'log'; rounding can make a distance of 0 slightly negative
                noise = -torch.log(-torch.log(gumbel.uniform.float()))
                score = -dist_all.clamp_min(1e-12).log() + gumbel.scale * noise
            k = self.codebook_size
            best = score[:, :k].argmax(-1)
            if self.num_books == 2:
                best = torch.where(book == 1, score[:, k:].argmax(-1) + k, best)
            return best

    def forward(self, features: torch.Tensor, patch_known: torch.Tensor, gumbel: GumbelDraw | None = None) -> Quantized:
        b, c, h, w = features.shape
        flat = features.permute(0, 2, 3, 1).reshape(-1, c)
        book = self.book_of(patch_known).reshape(-1)
        training = self.training and torch.is_grad_enabled()
        if training and not self.initialized.all():
            self._init_from_data(flat.detach().float(), book)
        indices = self.nearest(flat.detach(), book, gumbel if training else None)
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
        distributed = dist.is_available() and dist.is_initialized()
        for b, k in enumerate(self.book_sizes):  # at most two books
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
            first = sum(self.book_sizes[:b])
            self.embed[first:first + k] = pick
            self.embed_avg[first:first + k] = pick
            self.cluster_size[first:first + k] = 1.0
            self.initialized[b] = True

    @torch.no_grad()
    def _ema_update(self, flat: torch.Tensor, indices: torch.Tensor) -> None:
        """EMA of counts and sums (decay 0.99) with Laplace smoothing (`ema_update`):
        - per_book (default): smoothed per book, and a book that got no vector this batch is left alone (with
          small batches `e'` may see no masked patch, and decaying it would blow its codes up);
        - released: one smoothing over the whole table, every code decayed every step."""
        counts = torch.bincount(indices, minlength=len(self.embed)).to(flat.dtype)
        sums = torch.zeros_like(self.embed_avg).index_add_(0, indices, flat)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(counts)
            dist.all_reduce(sums)
        # Rows are smoothed within their group: each book (per_book), or the whole table (released).
        group = self.row_book if self.per_book else torch.zeros_like(self.row_book)
        groups = self.num_books if self.per_book else 1
        sizes = torch.zeros(groups, device=counts.device).index_add_(0, group, torch.ones_like(counts))
        active = torch.zeros(groups, device=counts.device).index_add_(0, group, counts)[group] > 0
        active |= not self.per_book
        decay = torch.where(active, self.decay, 1.0)
        self.cluster_size.mul_(decay).add_(counts * (1 - decay))
        self.embed_avg.mul_(decay.unsqueeze(1)).add_(sums * (1 - decay).unsqueeze(1))
        total = torch.zeros(groups, device=counts.device).index_add_(0, group, self.cluster_size)[group]
        # Laplace smoothing keeps unused codes from dividing by zero.
        smoothed = ((self.cluster_size + self.eps) / (total + sizes[group] * self.eps) * total).view(-1, 1)
        self.embed.copy_(torch.where(active.unsqueeze(1), self.embed_avg / smoothed, self.embed))

    def usage(self, indices: torch.Tensor) -> dict[str, float]:
        """Fraction of each book's codes that appear in `indices` (logged during training)."""
        used = (torch.bincount(indices.reshape(-1), minlength=len(self.embed)) > 0).float()
        names = ("unmasked", "masked")[: self.num_books]
        return {name: part.mean().item() for name, part in zip(names, used.split(self.book_sizes))}

"""Training-mask sampling (DESIGN.md section 2), pure functions of a numpy Generator.

P-VQVAE: an erase mask m (p = 0.2, multiplies the training image, so it decides which codebook each patch
uses) and an independent reference mask m' (always; all-hole with p = 0.3 so the decoder must work from
tokens alone). UQ-Transformer: PConv/irregular masks (p = 0.8) else strokes, made blocky at token
resolution with p = 0.1. Each non-trivial mask is irregular with p = 0.7 (P-VQVAE), else strokes.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from put.masks.generate import blocky, irregular_mask, stroke_mask
from put.masks.io import MaskFolder

_REDRAWS = 100


def _check_prob(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"TrainingMasks: {name} must be a probability in [0, 1], got {value}")
    return float(value)


class TrainingMasks:
    """Random keep-masks (H, W) float32 (1 = known, 0 = hole) for the two training stages."""

    def __init__(self, size: tuple[int, int], patch_size: int, pconv: MaskFolder | None = None, *,
                 erase_prob: float = 0.2, ref_all_hole_prob: float = 0.3, pvqvae_irregular_prob: float = 0.7,
                 transformer_irregular_prob: float = 0.8, blocky_prob: float = 0.1) -> None:
        self.size = (int(size[0]), int(size[1]))
        self.patch_size = int(patch_size)
        if self.patch_size < 1 or self.size[0] % self.patch_size or self.size[1] % self.patch_size:
            raise ValueError(f"TrainingMasks: size {self.size} (HxW) is not divisible into {patch_size}-pixel patches")
        if pconv is not None and tuple(pconv.size) != self.size:
            raise ValueError(f"TrainingMasks: PConv masks from {pconv.root} are read at {pconv.size}, "
                             f"expected the training size {self.size}")
        self.pconv = pconv
        self.erase_prob = _check_prob("erase_prob", erase_prob)
        self.ref_all_hole_prob = _check_prob("ref_all_hole_prob", ref_all_hole_prob)
        self.pvqvae_irregular_prob = _check_prob("pvqvae_irregular_prob", pvqvae_irregular_prob)
        self.transformer_irregular_prob = _check_prob("transformer_irregular_prob", transformer_irregular_prob)
        self.blocky_prob = _check_prob("blocky_prob", blocky_prob)

    def irregular(self, rng: np.random.Generator) -> np.ndarray:
        """A random PConv mask, flipped/rotated by multiples of 90 degrees, or a generated irregular mask."""
        if self.pconv is None:
            return irregular_mask(self.size, rng)
        keep = self.pconv.load(int(rng.integers(len(self.pconv))))
        # Quarter turns would swap H and W of a non-square mask: those get half turns only.
        turns = int(rng.integers(4)) if self.size[0] == self.size[1] else 2 * int(rng.integers(2))
        keep = np.rot90(keep, turns)
        if rng.random() < 0.5:
            keep = keep[:, ::-1]
        return np.ascontiguousarray(keep, dtype=np.float32)

    def stroke(self, rng: np.random.Generator) -> np.ndarray:
        return stroke_mask(self.size, rng)

    def _mixed(self, rng: np.random.Generator, irregular_prob: float) -> np.ndarray:
        return self.irregular(rng) if rng.random() < irregular_prob else self.stroke(rng)

    def pvqvae_pair(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(erase_keep, ref_keep): the mask applied to the training image (all ones unless drawn) and the
        reference mask hiding pixels from the decoder's reference branch."""
        erase = self._mixed(rng, self.pvqvae_irregular_prob) if rng.random() < self.erase_prob else self._known()
        if rng.random() < self.ref_all_hole_prob:
            ref = np.zeros(self.size, dtype=np.float32)
        else:
            ref = self._mixed(rng, self.pvqvae_irregular_prob)
        return erase, ref

    def transformer_mask(self, rng: np.random.Generator) -> np.ndarray:
        """A keep-mask with at least one masked patch (a patch with a hole pixel); blocky with blocky_prob."""
        for _ in range(_REDRAWS):
            keep = self._mixed(rng, self.transformer_irregular_prob)
            if rng.random() < self.blocky_prob:
                keep = blocky(keep, self.patch_size)
            # A patch is masked as soon as one pixel is a hole: a masked patch exists iff a hole pixel does.
            if keep.min() < 0.5:
                return keep
        raise RuntimeError(f"TrainingMasks: no mask with a masked patch in {_REDRAWS} draws")

    def _known(self) -> np.ndarray:
        return np.ones(self.size, dtype=np.float32)


def batch_of(fn: Callable[[np.random.Generator], np.ndarray | tuple[np.ndarray, ...]], rng: np.random.Generator,
             n: int) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """n draws of fn(rng) stacked as (n, 1, H, W) float32; a fn returning a tuple (pvqvae_pair) gives a
    tuple of such tensors."""
    if n < 1:
        raise ValueError(f"batch_of: n must be positive, got {n}")
    draws = [fn(rng) for _ in range(n)]

    def stack(masks: list[np.ndarray]) -> torch.Tensor:
        return torch.from_numpy(np.stack(masks).astype(np.float32, copy=False)).unsqueeze(1)

    if isinstance(draws[0], tuple):
        return tuple(stack([d[k] for d in draws]) for k in range(len(draws[0])))
    return stack(draws)

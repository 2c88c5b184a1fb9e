"""Training-mask sampling of one stage, pure functions of a numpy Generator, following the released
ImageListDataset (image_synthesis/data/image_list_dataset.py of the authors' code): a base mask (PConv or strokes),
made all-hole or blocky, and the P-VQVAE's erase mask, drawn in the released order (docs/model.md, "Training
masks"; the released values: docs/fidelity.md, "Training masks")."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from put.config.masks import PConvSelect, TrainingMaskConfig
from put.errors import InputError
from put.masks.evaluation import pconv_ratios
from put.masks.generate import blocky, irregular_mask
from put.masks.io import MaskError, MaskFolder
from put.masks.strokes import stroke_keep_mask

# The released slicing maps a hole ratio r to the index r / 0.6 * len(list) of NVIDIA's 12,000 masks, sorted
# in six groups of 2,000 by hole ratio (0.01-0.1, 0.1-0.2, ..., 0.5-0.6): 20000 * r in their code.
LIST_TOP_RATIO = 0.6
_REDRAWS = 100


def pconv_candidates(pconv: MaskFolder, window: tuple[float, float], select: PConvSelect,
                     progress: bool = False) -> np.ndarray:
    """Indices of the folder's masks that a stage may use.

    "ratio": masks whose hole ratio at the folder's size lies in [lo, hi]. "list": the released slicing of the
    sorted list, files int(n * lo / 0.6) to int(n * hi / 0.6); a bound inside a group cuts it by file order.
    """
    lo, hi = window
    if select == "ratio":
        ratios = pconv_ratios(pconv, progress)
        chosen = np.flatnonzero((ratios >= lo) & (ratios <= hi))
        if not len(chosen):
            raise MaskError(f"{pconv.root}: no mask has a hole ratio (at {pconv.size[1]}x{pconv.size[0]}) in "
                            f"[{lo}, {hi}]; its {len(ratios)} masks range from {ratios.min():.3f} to "
                            f"{ratios.max():.3f}")
        return chosen
    if select == "list":
        n = len(pconv)
        start, end = (min(n, int(round(n * r / LIST_TOP_RATIO, 6))) for r in (lo, hi))
        if start >= end:
            raise MaskError(f"{pconv.root}: the slice [{start}, {end}) of its {n} sorted masks for hole ratios "
                            f"[{lo}, {hi}] is empty")
        return np.arange(start, end)
    raise InputError(f"pconv_select must be 'ratio' or 'list', got {select!r}")


class TrainingMasks:
    """Random keep-masks (H, W) float32 (1 = known, 0 = hole) of one training stage."""

    def __init__(self, size: tuple[int, int], patch_size: int, config: TrainingMaskConfig,
                 pconv: MaskFolder | None = None, *, pconv_select: PConvSelect = "ratio",
                 erase_prob: float = 0.0) -> None:
        self.size = (int(size[0]), int(size[1]))
        self.patch_size = int(patch_size)
        if self.patch_size < 1 or self.size[0] % self.patch_size or self.size[1] % self.patch_size:
            raise InputError(f"TrainingMasks: size {self.size} (HxW) is not divisible into {patch_size}-pixel patches")
        if pconv is not None and tuple(pconv.size) != self.size:
            raise InputError(f"TrainingMasks: PConv masks from {pconv.root} are read at {pconv.size}, "
                             f"expected the training size {self.size}")
        if not 0.0 <= erase_prob <= 1.0:
            raise InputError(f"TrainingMasks: erase_prob must be a probability in [0, 1], got {erase_prob}")
        self.config, self.pconv, self.erase_prob = config, pconv, float(erase_prob)
        self.candidates = (pconv_candidates(pconv, config.pconv_hole_ratio, pconv_select)
                           if pconv is not None else None)

    def irregular(self, rng: np.random.Generator) -> np.ndarray:
        """A random PConv mask of the stage's window (used as stored, as released), or a generated irregular mask."""
        if self.pconv is None:
            return irregular_mask(self.size, rng)
        return self.pconv.load(int(self.candidates[rng.integers(len(self.candidates))]))

    def stroke(self, rng: np.random.Generator) -> np.ndarray:
        return stroke_keep_mask(self.size, rng, **self.config.stroke.model_dump())

    def base(self, rng: np.random.Generator) -> np.ndarray:
        return self.irregular(rng) if rng.random() < self.config.irregular_prob else self.stroke(rng)

    def mask(self, rng: np.random.Generator) -> np.ndarray:
        """The stage's mask m: a base mask, all-hole with all_hole_prob, else blocky with blocky_prob."""
        keep = self.base(rng)
        if rng.random() < self.config.all_hole_prob:
            return np.zeros(self.size, dtype=np.float32)
        if rng.random() < self.config.blocky_prob:
            return blocky(keep, self.patch_size)
        return keep

    def pvqvae_pair(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(erase_keep, ref_keep): the mask applied to the training image (all ones unless drawn) and the
        reference mask m hiding pixels from the decoder's reference branch."""
        erase = self.base(rng) if rng.random() < self.erase_prob else np.ones(self.size, dtype=np.float32)
        return erase, self.mask(rng)

    def transformer_mask(self, rng: np.random.Generator) -> np.ndarray:
        """m with at least one hole pixel (so at least one masked patch, the loss's denominator); the
        released code does not redraw, but its masks practically always have holes."""
        for _ in range(_REDRAWS):
            keep = self.mask(rng)
            if keep.min() < 0.5:
                return keep
        raise RuntimeError(f"TrainingMasks: no mask with a hole in {_REDRAWS} draws")


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

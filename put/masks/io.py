"""Mask files: explicit polarity, validation, and the in-memory keep-mask convention.

In memory a keep-mask has 1 = known pixel, 0 = hole (the paper's m). On disk our masks are one-channel
PNGs with 255 = hole (as NVIDIA's PConv set); foreign mask sets are read with an explicit polarity.
"""

from __future__ import annotations

import os
from typing import Literal

import numpy as np
import torch

from put.data.images import ImageReadError, open_image, write_png

Polarity = Literal["hole-white", "keep-white"]
POLARITIES: tuple[str, ...] = ("hole-white", "keep-white")


class MaskError(ValueError):
    pass


def keep_mask_from_array(values: np.ndarray, polarity: str, source: str = "mask") -> np.ndarray:
    """(H, W) array of {0, 255} or {0, 1} -> float32 keep-mask (1 = known). Rejects grey levels."""
    if polarity not in POLARITIES:
        raise MaskError(f"{source}: mask polarity must be one of {', '.join(POLARITIES)}, got {polarity!r}")
    top = 255 if values.max() > 1 else 1
    binary = (values == 0) | (values == top)
    if not binary.all():
        raise MaskError(f"{source}: mask is not binary: {1 - binary.mean():.1%} of its pixels are neither 0 nor "
                        f"{top} (expected a black/white mask; anti-aliased or JPEG masks must be thresholded first)")
    white = values == top
    return (~white if polarity == "hole-white" else white).astype(np.float32)


def validate_keep_mask(keep: np.ndarray, source: str, size: tuple[int, int] | None = None) -> None:
    if size is not None and tuple(keep.shape) != tuple(size):
        raise MaskError(f"{source}: mask is {keep.shape[1]}x{keep.shape[0]} (WxH), expected {size[1]}x{size[0]} "
                        "to match the image")
    if keep.min() == 1:
        raise MaskError(f"{source}: mask has no hole (nothing to inpaint); check --mask-polarity")
    if keep.max() == 0:
        raise MaskError(f"{source}: mask is all hole (no known pixel); check --mask-polarity")


def read_mask(path: str | os.PathLike, polarity: str = "hole-white", size: tuple[int, int] | None = None) -> torch.Tensor:
    """(1, H, W) keep-mask from a mask file. Color masks must be gray (R = G = B)."""
    try:
        img = open_image(path)
    except ImageReadError as err:
        raise MaskError(str(err)) from None
    values = np.asarray(img.convert("RGB") if img.mode not in ("L", "1") else img.convert("L"))
    if values.ndim == 3:
        if not ((values[..., 0] == values[..., 1]) & (values[..., 1] == values[..., 2])).all():
            raise MaskError(f"{path}: mask has colored pixels; expected a black/white mask")
        values = values[..., 0]
    keep = keep_mask_from_array(values, polarity, str(path))
    validate_keep_mask(keep, str(path), size)
    return torch.from_numpy(keep).unsqueeze(0)


def write_mask(path: str | os.PathLike, keep: torch.Tensor | np.ndarray) -> None:
    """Write a keep-mask as our on-disk convention: one channel, 255 = hole."""
    keep = keep.squeeze().cpu().numpy() if isinstance(keep, torch.Tensor) else np.squeeze(keep)
    write_png(path, np.where(keep > 0.5, 0, 255).astype(np.uint8))

"""Mask files: explicit polarity, validation, and the in-memory keep-mask convention.

In memory a keep-mask has 1 = known pixel, 0 = hole (the paper's m). On disk our masks are one-channel
PNGs with 255 = hole (as NVIDIA's PConv set); foreign mask sets are read with an explicit polarity.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import get_args

import numpy as np
import torch

from put.config.masks import MaskPolarity
from put.data.images import ImageReadError, ImageTooLargeError, open_image, write_png
from put.errors import InputError

POLARITIES: tuple[str, ...] = get_args(MaskPolarity)


class MaskError(InputError):
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


def size_mismatch(source: str, found: tuple[int, int], expected: tuple[int, int]) -> str:
    """Sizes as (H, W)."""
    return f"{source}: mask is {found[1]}x{found[0]} (WxH), expected {expected[1]}x{expected[0]} to match the image"


# How far a mask's aspect ratio may be from the working size's for a folder that asks for the same aspect
# (one pixel in a hundred: an off-by-one crop).
ASPECT_TOLERANCE = 0.01

WHITE_MEANS = {"hole-white": "the hole", "keep-white": "kept"}  # what white is, in each polarity


def validate_keep_mask(keep: np.ndarray, source: str, size: tuple[int, int] | None = None,
                       polarity: str | None = None) -> None:
    """The size and that the mask has both holes and known pixels; a mask of one colour is named with the polarity
    it was read in, in words both the command line (--mask-polarity) and the page ("white is") use."""
    if size is not None and tuple(keep.shape) != tuple(size):
        raise MaskError(size_mismatch(source, keep.shape, size))
    read_as = (f"; white was read as {WHITE_MEANS[polarity]} (polarity {polarity}): is the mask the other way "
               "round?") if polarity in WHITE_MEANS else ""
    if keep.min() == 1:
        raise MaskError(f"{source}: mask has no hole (nothing to inpaint){read_as}")
    if keep.max() == 0:
        raise MaskError(f"{source}: mask is all hole (no known pixel){read_as}")


def _nearest(values: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """OpenCV's INTER_NEAREST resize (as the released code reads masks): output pixel i takes source pixel
    floor(i * source / target), e.g. the top-left pixel of each 2x2 block when halving."""
    rows, cols = (np.minimum(np.floor(np.arange(n) * (1.0 / (n / m))).astype(int), m - 1)
                  for n, m in zip(size, values.shape[:2]))
    return values[rows][:, cols]


def read_mask_values(path: str | os.PathLike, size: tuple[int, int] | None = None,
                     expected: tuple[int, int] | None = None) -> np.ndarray:
    """(H, W) uint8 gray values of a mask file, resized to `size` (H, W) by nearest neighbour if given (the
    only resampling that keeps a mask binary). Color masks must be gray (R = G = B). A mask of more pixels than
    an `expected` size (H, W) is refused from its header, before decoding."""
    try:
        img = open_image(path, None if expected is None else expected[0] * expected[1])
    except ImageTooLargeError as err:
        raise MaskError(size_mismatch(str(path), err.size[::-1], expected)) from None
    except ImageReadError as err:
        raise MaskError(str(err)) from None
    img = img.convert("RGB") if img.mode not in ("L", "1") else img.convert("L")
    values = np.asarray(img)
    if size is not None and values.shape[:2] != tuple(size):
        values = _nearest(values, size)
    if values.ndim == 3:
        if not ((values[..., 0] == values[..., 1]) & (values[..., 1] == values[..., 2])).all():
            raise MaskError(f"{path}: mask has colored pixels; expected a black/white mask")
        values = values[..., 0]
    return values


def read_mask(path: str | os.PathLike, polarity: str = "hole-white",
              size: tuple[int, int] | None = None) -> torch.Tensor:
    """(1, H, W) keep-mask from a mask file; `size` (H, W) is checked, not resized to (a mask of more pixels is
    refused from its header, before decoding)."""
    keep = keep_mask_from_array(read_mask_values(path, expected=size), polarity, str(path))
    validate_keep_mask(keep, str(path), size, polarity)
    return torch.from_numpy(keep).unsqueeze(0)


def write_mask(path: str | os.PathLike, keep: torch.Tensor | np.ndarray) -> None:
    """Write a keep-mask as our on-disk convention: one channel, 255 = hole."""
    keep = keep.squeeze().cpu().numpy() if isinstance(keep, torch.Tensor) else np.squeeze(keep)
    write_png(path, np.where(keep > 0.5, 0, 255).astype(np.uint8))


class MaskFolder:
    """The PNG masks under a folder (recursively, in sorted order), read as keep-masks of one size.

    NVIDIA's PConv set is polarity "hole-white". Other sizes are resized by nearest neighbour; each mask is
    validated (binary, has a hole and a known pixel), errors naming the file.
    """

    def __init__(self, root: str | os.PathLike, polarity: str, size: tuple[int, int], *,
                 setting: str = "masks.pconv", same_aspect: bool = False) -> None:
        self.root = Path(root)
        # The params keys the folder and its polarity come from (<setting>_root, <setting>_polarity), for errors.
        self.setting = setting
        # Resizing a mask of another aspect ratio would stretch its holes: refused when asked.
        self.same_aspect = same_aspect
        if polarity not in POLARITIES:
            raise MaskError(f"{self.root}: mask polarity must be one of {', '.join(POLARITIES)}, got {polarity!r}")
        if not self.root.is_dir():
            raise MaskError(f"{self.root}: mask folder does not exist or is not a directory")
        self.polarity = polarity
        self.size = (int(size[0]), int(size[1]))
        # Sorted by relative path so the index of a mask does not depend on the file system's order; hidden
        # files (temp files of an atomic write, macOS "._" forks) are not masks.
        self.paths: list[Path] = sorted(
            (p for p in self.root.rglob("*.[pP][nN][gG]") if p.is_file() and not p.name.startswith(".")),
            key=lambda p: p.relative_to(self.root).as_posix())
        if not self.paths:
            raise MaskError(f"{self.root}: no mask files (*.png) in this folder or below it")

    def __len__(self) -> int:
        return len(self.paths)

    def __repr__(self) -> str:
        return f"MaskFolder({str(self.root)!r}, {self.polarity!r}, {self.size}, {len(self)} masks)"

    def load(self, index: int) -> np.ndarray:
        """Keep-mask (H, W) float32 of mask `index`, at this folder's size."""
        path = self.paths[index]
        values = read_mask_values(path)
        if self.same_aspect and abs(values.shape[0] * self.size[1] - values.shape[1] * self.size[0]) > (
                ASPECT_TOLERANCE * values.shape[0] * self.size[1]):
            raise MaskError(f"{path}: mask is {values.shape[1]}x{values.shape[0]} (WxH), not of the working size's "
                            f"aspect ratio ({self.size[1]}x{self.size[0]}); resizing would stretch its holes: "
                            f"crop it to that aspect first ({self.setting}_root)")
        if values.shape[:2] != self.size:
            values = _nearest(values, self.size)
        keep = keep_mask_from_array(values, self.polarity, str(path))
        try:
            validate_keep_mask(keep, str(path))
        except MaskError as err:
            raise MaskError(f"{err} (read as {self.polarity}, at {self.size[1]}x{self.size[0]} WxH)") from None
        return keep

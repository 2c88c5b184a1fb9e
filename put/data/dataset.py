"""A torch Dataset over a split CSV, with augmentation that is a pure function of (index, seed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from put.data.images import open_image, to_rgb
from put.data.split import read_split


def resize_shorter(image: Image.Image, size: int) -> Image.Image:
    """Scale so the shorter side is exactly `size` (bicubic; PIL widens the kernel when shrinking)."""
    width, height = image.size
    scale = size / min(width, height)
    target = (max(size, round(width * scale)), max(size, round(height * scale)))
    return image if target == image.size else image.resize(target, Image.Resampling.BICUBIC)


class ImageListDataset(Dataset):
    """Images of a split CSV as (3, S, S) float32 tensors in [-1, 1].

    Test (or an int index): centre crop, no flip. Train with a key (index, seed): crop position
    and horizontal flip drawn from numpy.random.default_rng((seed, index)), so a resumed run
    sees the same pixels whatever the worker count or order.
    """

    def __init__(self, csv: Path, image_size: int, train: bool, base: Path | None = None) -> None:
        self.csv = Path(csv)
        self.paths = read_split(self.csv, base)
        if not self.paths:
            raise ValueError(f"{self.csv}: split lists no images")
        if image_size < 1:
            raise ValueError(f"image_size must be positive, got {image_size}")
        self.image_size = image_size
        self.train = train

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key: int | tuple[int, int]) -> torch.Tensor:
        index, seed = (key, None) if isinstance(key, (int, np.integer)) else key
        index = int(index)
        if not 0 <= index < len(self.paths):
            raise IndexError(f"index {index} out of range for {len(self.paths)} images in {self.csv}")
        image = resize_shorter(to_rgb(open_image(self.paths[index])), self.image_size)
        arr = np.asarray(image)
        size = self.image_size
        height, width = arr.shape[:2]
        flip = False
        if self.train and seed is not None:
            # The index is mixed in so a trainer passing one seed per step still gets distinct crops.
            rng = np.random.default_rng((int(seed), index))
            top = int(rng.integers(0, height - size + 1))
            left = int(rng.integers(0, width - size + 1))
            flip = bool(rng.random() < 0.5)
        else:
            top, left = (height - size) // 2, (width - size) // 2
        arr = arr[top:top + size, left:left + size]
        if flip:
            arr = arr[:, ::-1]
        tensor = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)).permute(2, 0, 1)
        return tensor / 127.5 - 1

"""Training and test images as tensors: what a stage reads of an image (`stored_pixels`), from the original
files (`ImageListDataset`) or the prepared cache (put/data/prepared.py), and augmentation that is a pure
function of (index, seed)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import Dataset

from put.config.presets import ResizeFilter
from put.data.images import open_image, to_rgb
from put.data.split import read_split
from put.errors import InputError


def resize_shorter(image: Image.Image, size: int, resize_filter: ResizeFilter = "bilinear") -> np.ndarray:
    """(H, W, 3) float32 in [0, 255], the shorter side exactly `size` (the longer rounded half to even, as
    albumentations' SmallestMaxSize). "bilinear": OpenCV's INTER_LINEAR in float, as the released pipeline
    (torch's bilinear agrees within 0.005). "bicubic-antialias": PIL bicubic, rounded to uint8.
    """
    width, height = image.size
    scale = size / min(width, height)
    target = (max(size, round(width * scale)), max(size, round(height * scale)))
    if target == image.size:
        return np.asarray(image, dtype=np.float32)
    if resize_filter == "bicubic-antialias":
        return np.asarray(image.resize(target, Image.Resampling.BICUBIC), dtype=np.float32)
    if resize_filter == "bilinear":
        pixels = torch.from_numpy(np.asarray(image, dtype=np.float32)).permute(2, 0, 1)[None]
        resized = F.interpolate(pixels, size=(target[1], target[0]), mode="bilinear", align_corners=False,
                                antialias=False)
        return resized[0].permute(1, 2, 0).clamp(0, 255).numpy()  # clamp: float rounding only
    raise InputError(f"resize_filter must be one of {', '.join(get_args(ResizeFilter))}, got {resize_filter!r}")


def centre_crop(arr: np.ndarray, size: int) -> np.ndarray:
    height, width = arr.shape[:2]
    top, left = (height - size) // 2, (width - size) // 2
    return arr[top:top + size, left:left + size]


def stored_pixels(image: Image.Image, image_size: int, train: bool, train_resize: int | None,
                  resize_filter: ResizeFilter) -> np.ndarray:
    """What a stage reads of one image before augmentation, (H, W, 3) float32 in [0, 255]: a training image
    with its shorter side resized to `train_resize` (default the image size), a test image resized to the
    image size and centre-cropped (the released validation pipeline)."""
    if train:
        return resize_shorter(image, train_resize or image_size, resize_filter)
    return centre_crop(resize_shorter(image, image_size, resize_filter), image_size)


class AugmentedImages(Dataset):
    """Images as (3, S, S) float32 tensors in [-1, 1], from `pixels(index)` (what `stored_pixels` gives).

    Test (an int index): centre crop. Train (key (index, seed)): random crop and flip from default_rng((seed,
    index)), so a resumed run sees the same pixels whatever the worker count or order.
    """

    image_size: int
    train: bool

    def pixels(self, index: int) -> np.ndarray:
        raise NotImplementedError

    def describe(self, index: int) -> str:
        raise NotImplementedError

    def __getitem__(self, key: int | tuple[int, int]) -> torch.Tensor:
        index, seed = (key, None) if isinstance(key, (int, np.integer)) else key
        index = int(index)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} images of {self.describe(index)}")
        arr = self.pixels(index)
        size = self.image_size
        if self.train and seed is not None:
            # The index is mixed in so a trainer passing one seed per step still gets distinct crops.
            rng = np.random.default_rng((int(seed), index))
            top = int(rng.integers(0, arr.shape[0] - size + 1))
            left = int(rng.integers(0, arr.shape[1] - size + 1))
            arr = arr[top:top + size, left:left + size]
            if rng.random() < 0.5:
                arr = arr[:, ::-1]
        else:
            arr = centre_crop(arr, size)
        # float32 after the crop: a stored float16 or uint8 image converts exactly, and only the pixels kept. The
        # array is this sample's own (converted, or fresh from the resize): scaled in place.
        return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)).permute(2, 0, 1).div_(127.5).sub_(1)


class ImageListDataset(AugmentedImages):
    """The original image files of a split CSV, decoded and resized for every sample (`stored_pixels`)."""

    def __init__(self, csv: Path, image_size: int, train: bool, base: Path | None = None, *,
                 train_resize: int | None = None, resize_filter: ResizeFilter = "bilinear") -> None:
        self.csv = Path(csv)
        self.paths = read_split(self.csv, base)
        if not self.paths:
            raise InputError(f"{self.csv}: split lists no images")
        check_sizes(image_size, train_resize, resize_filter)
        self.image_size, self.train = image_size, train
        self.train_resize, self.resize_filter = train_resize, resize_filter

    def __len__(self) -> int:
        return len(self.paths)

    def describe(self, index: int) -> str:
        return str(self.csv)

    def pixels(self, index: int) -> np.ndarray:
        return stored_pixels(to_rgb(open_image(self.paths[index])), self.image_size, self.train, self.train_resize,
                             self.resize_filter)


def check_sizes(image_size: int, train_resize: int | None, resize_filter: str) -> None:
    if image_size < 1:
        raise InputError(f"image_size must be positive, got {image_size}")
    if train_resize is not None and train_resize < image_size:
        raise InputError(f"train_resize ({train_resize}) must be at least the image size ({image_size})")
    if resize_filter not in get_args(ResizeFilter):
        raise InputError(f"resize_filter must be one of {', '.join(get_args(ResizeFilter))}, got {resize_filter!r}")

"""Uploaded images and masks, read by the CLI's own readers (same checks, same limits) and kept in memory under
ids this server assigns."""

from __future__ import annotations

import io
import re
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from put.data.images import read_image, to_uint8
from put.masks.io import read_mask

KEEP_IMAGES = 64   # uploads kept at once (the oldest are forgotten first)
KEEP_MASKS = 256


class UnknownId(LookupError):
    """An id the server never assigned, or one it has forgotten."""


class Upload(io.BytesIO):
    """Bytes the page sent, read by PIL as a file. It is never a path: errors name it by the file name the
    page gave, which is only ever printed."""

    def __init__(self, data: bytes, name: str) -> None:
        super().__init__(data)
        self.name = upload_name(name)

    def __str__(self) -> str:
        return f"upload {self.name!r}"

    __repr__ = __str__


def upload_name(name: str) -> str:
    """A file name fit to print and to name results: its last component, plain characters only."""
    name = re.sub(r"[^\w.\- ]", "_", Path(name.replace("\\", "/")).name)[:100].strip()
    return name or "upload"


@dataclass(frozen=True)
class StoredImage:
    id: str
    name: str
    pixels: torch.Tensor  # (3, H, W) in [-1, 1]

    @property
    def stem(self) -> str:
        return Path(self.name).stem or "image"

    def describe(self) -> dict:
        return {"id": self.id, "name": self.name, "width": self.pixels.shape[-1], "height": self.pixels.shape[-2]}


@dataclass(frozen=True)
class StoredMask:
    id: str
    image: StoredImage
    keep: torch.Tensor  # (1, H, W), 1 = known


def png_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def image_png(image: torch.Tensor) -> bytes:
    """(3, H, W) in [-1, 1] -> PNG, rounded to uint8 as `put inpaint` writes its results."""
    return png_bytes(to_uint8(image))


def mask_png(keep: torch.Tensor) -> bytes:
    """Keep-mask -> PNG in the project's convention (one channel, 255 = hole)."""
    return png_bytes(np.where(keep[0].numpy() > 0.5, 0, 255).astype(np.uint8))


class Store:
    """Images and masks by id, the oldest forgotten first; thread-safe."""

    def __init__(self) -> None:
        self._images: OrderedDict[str, StoredImage] = OrderedDict()
        self._masks: OrderedDict[str, StoredMask] = OrderedDict()
        self._lock = threading.Lock()

    def _keep(self, table: OrderedDict, item, limit: int):
        with self._lock:
            table[item.id] = item
            while len(table) > limit:
                table.popitem(last=False)
        return item

    def add_image(self, data: bytes | Path, name: str) -> StoredImage:
        """An upload (bytes) or a test image the server listed (a path it chose); ImageReadError if unreadable."""
        pixels = read_image(data if isinstance(data, Path) else Upload(data, name))
        return self._keep(self._images, StoredImage(secrets.token_hex(8), upload_name(name), pixels), KEEP_IMAGES)

    def add_mask(self, image: StoredImage, data: bytes, name: str, polarity: str) -> StoredMask:
        """A mask of the image's size with the given polarity; MaskError if it is not one."""
        keep = read_mask(Upload(data, name), polarity, size=tuple(image.pixels.shape[-2:]))
        return self._keep(self._masks, StoredMask(secrets.token_hex(8), image, keep), KEEP_MASKS)

    def image(self, image_id: str) -> StoredImage:
        with self._lock:
            if image_id not in self._images:
                raise UnknownId(f"image {image_id!r} is not (or no longer) on the server: load it again")
            return self._images[image_id]

    def mask(self, mask_id: str) -> StoredMask:
        with self._lock:
            if mask_id not in self._masks:
                raise UnknownId(f"mask {mask_id!r} is not (or no longer) on the server: draw or upload it again")
            return self._masks[mask_id]

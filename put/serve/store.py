"""Uploaded images and masks, read by the CLI's own readers (same checks) and kept in memory under ids this server
assigns, within a byte budget. An image is refused from its header when it has more pixels than allowed, before
any decoding; what is kept is its decoded pixels (uint8, 3 bytes a pixel) and a mask's holes (1 byte a pixel)."""

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

from put.data.images import from_uint8, read_rgb, to_uint8
from put.errors import InputError
from put.masks.io import read_mask
from put.serve.limits import ITEM_OVERHEAD


class UnknownId(InputError, LookupError):
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


@dataclass(frozen=True, eq=False)
class StoredImage:
    id: str
    name: str
    rgb: np.ndarray  # (H, W, 3) uint8, as decoded

    @property
    def pixels(self) -> torch.Tensor:
        """(3, H, W) in [-1, 1], as `put inpaint` reads the file."""
        return from_uint8(self.rgb)

    @property
    def nbytes(self) -> int:
        return self.rgb.nbytes + ITEM_OVERHEAD

    @property
    def stem(self) -> str:
        return Path(self.name).stem or "image"

    def describe(self) -> dict:
        return {"id": self.id, "name": self.name, "width": self.rgb.shape[1], "height": self.rgb.shape[0]}


@dataclass(frozen=True, eq=False)
class StoredMask:
    id: str
    image: StoredImage
    hole: np.ndarray  # (H, W) bool

    @property
    def keep(self) -> torch.Tensor:
        """(1, H, W) float, 1 = known."""
        return torch.from_numpy(~self.hole).float()[None]

    @property
    def nbytes(self) -> int:
        return self.hole.nbytes + ITEM_OVERHEAD


def png_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def image_png(image: torch.Tensor | np.ndarray) -> bytes:
    """(3, H, W) in [-1, 1] (rounded to uint8 as `put inpaint` writes its results) or (H, W, 3) uint8 -> PNG."""
    return png_bytes(image if isinstance(image, np.ndarray) else to_uint8(image))


def mask_png(hole: np.ndarray) -> bytes:
    """Holes -> PNG in the project's convention (one channel, 255 = hole)."""
    return png_bytes(np.where(hole, 255, 0).astype(np.uint8))


class Store:
    """Images and masks by id, within `budget` bytes: the oldest forgotten first (an image with its masks).
    Images of more than `max_pixels` pixels are refused from their header. Thread-safe."""

    def __init__(self, budget: int, max_pixels: int) -> None:
        self.budget, self.max_pixels = budget, max_pixels
        self._items: OrderedDict[str, StoredImage | StoredMask] = OrderedDict()
        self._masks_of: dict[str, list[str]] = {}  # image id -> its masks' ids
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return self._bytes

    def _keep(self, item: StoredImage | StoredMask) -> None:
        with self._lock:
            self._items[item.id] = item
            self._bytes += item.nbytes
            if isinstance(item, StoredMask):
                self._masks_of.setdefault(item.image.id, []).append(item.id)
            while self._bytes > self.budget:
                self._forget(next(iter(self._items)))

    def _forget(self, item_id: str) -> None:
        item = self._items.pop(item_id, None)
        if item is None:
            return
        self._bytes -= item.nbytes
        if isinstance(item, StoredImage):
            for mask_id in self._masks_of.pop(item.id, []):
                self._forget(mask_id)

    def add_image(self, data: bytes | Path, name: str) -> StoredImage:
        """An upload (bytes) or a test image the server listed (a path it chose); ImageReadError if unreadable
        or larger than allowed (ImageTooLargeError, from the header)."""
        rgb = read_rgb(data if isinstance(data, Path) else Upload(data, name), self.max_pixels)
        image = StoredImage(secrets.token_hex(8), upload_name(name), rgb)
        self._keep(image)
        return image

    def add_mask(self, image: StoredImage, data: bytes, name: str, polarity: str) -> StoredMask:
        """A mask of the image's size with the given polarity; MaskError if it is not one."""
        keep = read_mask(Upload(data, name), polarity, size=image.rgb.shape[:2])
        mask = StoredMask(secrets.token_hex(8), image, keep[0].numpy() < 0.5)
        self._keep(mask)
        return mask

    def _get(self, item_id: str, kind: type, what: str):
        with self._lock:
            item = self._items.get(item_id)
        if not isinstance(item, kind):
            raise UnknownId(f"{what} {item_id!r} is not (or no longer) on the server: "
                            + ("load it again" if kind is StoredImage else "draw or upload it again"))
        return item

    def image(self, image_id: str) -> StoredImage:
        return self._get(image_id, StoredImage, "image")

    def mask(self, mask_id: str) -> StoredMask:
        return self._get(mask_id, StoredMask, "mask")

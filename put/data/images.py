"""Reading and writing images as tensors in [-1, 1] (the models' scale)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from put.errors import InputError
from put.io.files import atomic_path, file_sha256


class ImageReadError(InputError):
    pass


class ImageTooLargeError(ImageReadError):
    """An image whose header claims more pixels than the reader was allowed: refused before decoding."""

    def __init__(self, path: str | os.PathLike, size: tuple[int, int], max_pixels: int):
        self.size, self.max_pixels = size, max_pixels  # (width, height)
        width, height = size
        super().__init__(f"{path}: {width}x{height} = {width * height:,} pixels, more than the {max_pixels:,} "
                         "decoded at most")


def open_image(path: str | os.PathLike, max_pixels: int | None = None) -> Image.Image:
    """Fully decoded PIL image; a missing, truncated, oversized or non-image file raises ImageReadError naming
    it. With `max_pixels`, an image of more pixels is refused from its header, before any decoding
    (ImageTooLargeError). Every image the package reads comes through here."""
    try:
        with Image.open(path) as img:
            if max_pixels is None or img.width * img.height <= max_pixels:
                img.load()
                return img.copy()
            size = img.size
    except FileNotFoundError:
        raise ImageReadError(f"{path}: no such image file") from None
    except Image.DecompressionBombError as err:
        raise ImageReadError(f"{path}: not a readable image: {too_large(err)}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise ImageReadError(f"{path}: not a readable image ({err})") from err
    raise ImageTooLargeError(path, size, max_pixels)


def check_image(path: Path) -> dict:
    """Row of the split CSV, or {'reason': ...} when the file is not a usable image."""
    try:
        if path.is_file() and path.stat().st_size == 0:
            return {"reason": "empty file (0 bytes)"}
        image = open_image(path)
        return {"sha256": file_sha256(path), "width": image.width, "height": image.height}
    except ImageReadError as err:
        return {"reason": str(err)}
    except OSError as err:
        return {"reason": f"{path}: cannot read ({err})"}


def too_large(err: Image.DecompressionBombError) -> str:
    """What PIL refused to decode: the pixel count the file claims and the limit, both from PIL's message."""
    found = re.search(r"\((\d+) pixels\) exceeds limit of (\d+) pixels", str(err))
    if found is None:
        return f"{err} (PIL's decompression-bomb guard)"
    claimed, limit = (int(n) for n in found.groups())
    return (f"its header claims {claimed:,} pixels, more than the {limit:,} decoded at most (PIL's "
            "decompression-bomb limit, set by PIL.Image.MAX_IMAGE_PIXELS)")


def to_rgb(img: Image.Image) -> Image.Image:
    """RGB from RGB, RGBA (alpha dropped), palette, grayscale or 16-bit grayscale images."""
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        arr = np.asarray(img, dtype=np.float64)
        img = Image.fromarray(np.clip(arr / (65535.0 if arr.max() > 255 else 255.0) * 255, 0, 255).astype(np.uint8))
    return img.convert("RGB")


def image_format(path: str | os.PathLike) -> str | None:
    """The format PIL identifies a file's content as (PNG, JPEG, ...) from its header, whatever its name; None
    when it identifies none."""
    try:
        with Image.open(path) as img:
            return img.format
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return None


def read_rgb(path: str | os.PathLike, max_pixels: int | None = None) -> np.ndarray:
    """(H, W, 3) uint8."""
    return np.asarray(to_rgb(open_image(path, max_pixels)))


def from_uint8(rgb: np.ndarray) -> torch.Tensor:
    """(H, W, 3) uint8 -> (3, H, W) float tensor in [-1, 1]."""
    return torch.from_numpy(rgb.astype(np.float32)).permute(2, 0, 1) / 127.5 - 1


def read_image(path: str | os.PathLike) -> torch.Tensor:
    """(3, H, W) float tensor in [-1, 1]."""
    return from_uint8(read_rgb(path))


def to_uint8(image: torch.Tensor) -> np.ndarray:
    """(3, H, W) in [-1, 1] -> (H, W, 3) uint8."""
    arr = ((image.detach().float().clamp(-1, 1) + 1) * 127.5).round().byte()
    return arr.permute(1, 2, 0).cpu().numpy()


def write_png(path: str | os.PathLike, array: np.ndarray) -> None:
    """Atomic PNG write (temp file + rename): a crash never leaves a half-written image."""
    with atomic_path(path) as tmp:
        Image.fromarray(array).save(tmp, format="PNG")


def write_image(path: str | os.PathLike, image: torch.Tensor) -> None:
    write_png(path, to_uint8(image))

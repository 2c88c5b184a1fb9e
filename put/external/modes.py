"""The pixel formats another method's result may come in, against the 8-bit colour ground truth: 8-bit RGB read
as it is, a lossless equivalent (a palette, opaque alpha, greyscale for a grey ground truth) converted and named
once per folder, anything else refused naming why (docs/external.md, "Pixel formats")."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"  # a PNG's first eight bytes
# IHDR, the chunk every PNG starts with: its length and type, then width, height, bit depth and colour type
IHDR = slice(8, 26)
COLOUR_TYPES = {0: "greyscale", 2: "RGB", 3: "palette", 4: "greyscale with alpha", 6: "RGBA"}
GREY_TYPES = (0, 4)


class PngHeader(NamedTuple):
    width: int
    height: int
    bit_depth: int  # bits per channel (per palette index for a palette)
    colour_type: int  # PNG's: 0 grey, 2 RGB, 3 palette, 4 grey + alpha, 6 RGBA

    def kind(self) -> str:
        return f"{self.bit_depth}-bit {COLOUR_TYPES.get(self.colour_type, f'colour type {self.colour_type}')}"


def png_header(head: bytes) -> PngHeader | None:
    """The IHDR of a file's first 26 bytes; None when they are not a PNG's."""
    if len(head) < IHDR.stop or not head.startswith(PNG_SIGNATURE) or head[12:16] != b"IHDR":
        return None
    return PngHeader(int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big"), head[24], head[25])


def animation_frames(path: Path) -> int | None:
    """The frames an animated PNG declares (its acTL chunk, before the image data), None for a still PNG: which
    frame would be the result is not for the evaluation to guess."""
    with open(path, "rb") as file:
        file.seek(len(PNG_SIGNATURE))
        while len(chunk := file.read(8)) == 8:
            length, kind = int.from_bytes(chunk[:4], "big"), chunk[4:]
            if kind == b"acTL":
                return int.from_bytes(file.read(4), "big")
            if kind in (b"IDAT", b"IEND"):
                return None
            file.seek(length + 4, 1)  # the data and its CRC
    return None


def is_grey(rgb: np.ndarray) -> bool:
    """Whether an (H, W, 3) image has its three channels equal everywhere."""
    return bool((rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all())


def as_rgb(img: Image.Image, header: PngHeader, grey_truth: bool) -> tuple[np.ndarray, str | None] | str:
    """(H, W, 3) uint8 and the lossless conversion it took (None: 8-bit RGB as it is), or why the result cannot be
    scored against its ground truth (`grey_truth`: whether that is grey)."""
    kind = header.kind()
    if header.bit_depth > 8:  # PIL would keep the high byte of a 16-bit colour image and rescale a grey one
        return f"{kind}: write 8-bit results, as the ground truth is (no rule here reduces 16 bits to 8)"
    if img.mode == "RGB" and "transparency" not in img.info:
        return np.asarray(img), None
    rgba = np.asarray(img.convert("RGBA"))  # a palette's or a colour key's transparency becomes alpha too
    transparent = int((rgba[..., 3] < 255).sum())
    if transparent:  # compositing onto any background would score that background as the method's
        return (f"{kind} with {transparent} of {rgba[..., 3].size} pixels not opaque: no rule here composites "
                "them; write opaque results")
    if header.colour_type in GREY_TYPES and not grey_truth:
        return f"{kind}, its ground truth is colour: the method ran on grey images, or wrote grey"
    alpha = header.colour_type in (4, 6) or "transparency" in img.info
    return np.ascontiguousarray(rgba[..., :3]), kind + (" with opaque alpha" if alpha else "")

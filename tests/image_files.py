"""Image files the tests write: an image and its hole mask as `put inpaint` reads them, and a decompression bomb
with the message every image reader gives it (tests/test_bad_input.py, test_serve.py, test_serve_load.py; the
`eval_masks` fixture of conftest.py)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

BOMB_MESSAGE = "not a readable image: its header claims 900,000,000 pixels, more than the 178,956,970 decoded at most"


def bomb_png(path: Path, width: int = 30000, height: int = 30000) -> Path:
    """A 65-byte PNG whose header claims width x height RGB pixels (issue 13's example: 30000x30000)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b""))
                     + chunk(b"IEND", b""))
    return path


def write_inputs(folder: Path, size: int = 32) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    image = folder / "image.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (size, size, 3), dtype=np.uint8)).save(image)
    hole = np.zeros((size, size), np.uint8)
    hole[8:20, 4:24] = 255
    mask = folder / "mask.png"
    Image.fromarray(hole).save(mask)
    return image, mask

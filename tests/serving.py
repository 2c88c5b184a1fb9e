"""What the `put serve` tests share (tests/test_serve.py, test_serve_load.py, test_serve_misuse.py): run folders of
tiny random-weight checkpoints, a photograph, `put serve` started from this checkout, HTTP requests to it, PNGs
in memory and a wait for a condition."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from put.config import apply_variant
from tests.conftest import TINY


def package_env() -> dict:
    """The environment for a `python -m put` child: this checkout's package first (a worktree's, not the one the
    virtual environment installed)."""
    paths = [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}


def save_tiny_run(folder: Path, variant: str, seed: int, transformer: dict | None = None, **labels: str) -> None:
    """A run folder of the preset "tiny", random weights; `transformer`: settings that replace the tiny ones."""
    from put.models.checkpoint import save_pvqvae, save_transformer
    from put.models.put_model import PUTModel

    torch.manual_seed(seed)
    config = TINY.model_copy(update={"transformer": TINY.transformer.model_copy(update=transformer or {})})
    config = apply_variant(config, variant)
    model = PUTModel(config).eval()
    save_pvqvae(folder / "pvqvae.pt", model.pvqvae, config, preset="tiny", variant=variant, **labels)
    save_transformer(folder / "transformer.pt", model, folder / "pvqvae.pt", preset="tiny", variant=variant, **labels)


def photo(width: int = 96, height: int = 92) -> np.ndarray:
    """A real photograph (scikit-image ships it), small; 92 is no multiple of the patch size: the server pads."""
    from skimage import data

    return np.asarray(Image.fromarray(data.astronaut()).resize((width, height), Image.Resampling.BICUBIC))


def start_serve(command: list[str], cwd, deadline_s: float | None = None) -> tuple[subprocess.Popen, str, list[str]]:
    """`put serve` started from this checkout: the process, its "put serve: http://..." line, the lines so far."""
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=package_env())
    lines = []
    deadline = time.monotonic() + (deadline_s or float("inf"))
    for line in process.stdout:
        lines.append(line)
        if line.startswith("put serve: http://"):
            return process, line, lines
        assert time.monotonic() < deadline, "".join(lines)
    pytest.fail("put serve stopped:\n" + "".join(lines))


def request(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def post_json(url: str, payload: dict) -> tuple[int, dict]:
    status, body = request(url, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    return status, json.loads(body)


def png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def wait_for(condition, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def blank_png(width: int, height: int, mode: str = "RGB") -> bytes:
    """A valid all-black PNG of any size, written row by row (never whole in memory): 12000x12000 is 18 KB in
    1-bit mode, 420 KB in RGB."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    depth, colour, row_bytes = {"1": (1, 0, -(-width // 8)), "RGB": (8, 2, 3 * width)}[mode]
    rows = 64
    compressor = zlib.compressobj(9)
    body = b"".join(compressor.compress(bytes((1 + row_bytes) * min(rows, height - top)))
                    for top in range(0, height, rows)) + compressor.flush()
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0))
            + chunk(b"IDAT", body) + chunk(b"IEND", b""))

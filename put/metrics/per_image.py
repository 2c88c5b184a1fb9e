"""The per-image values file the evaluation writes beside each metrics file (`<label>_images.csv`): one row per
mode, mask group, test image and sample with its source and every pixel metric; the input of the bootstrap, the
report's paired differences and `put compare`. Read from a path or from bytes (a git revision's copy)."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from put.errors import FileMismatchError
from put.io.files import file_sha256, read_csv

PIXEL_METRICS = ("psnr", "ssim", "mae")  # per image, each with its interval (summary.py)
IMAGE_COLUMNS = ("mode", "group", "image", "source", "sample", *PIXEL_METRICS, "lpips")
KEY_TYPES = {"image": str, "group": str, "mode": str, "source": str}
MASKS = "masks"  # the evaluation record's (`_info.json`) entry naming the masks its values were measured on


def read_per_image(source: Path | bytes, where: str | None = None) -> pd.DataFrame:
    """The per-image values of a file (a path, or its bytes and `where` they came from, for the errors)."""
    where = where or str(source)
    data = io.BytesIO(source) if isinstance(source, bytes) else source
    frame = read_csv(data, f"the per-image values `put evaluate` writes ({where})", dtype=KEY_TYPES)
    missing = [c for c in IMAGE_COLUMNS if c not in frame.columns]
    if missing:
        raise FileMismatchError(f"{where}: lacks column(s) {', '.join(missing)} -- re-run the evaluate stage")
    return frame


def masks_record(manifest: Path) -> dict[str, str]:
    """What identifies a set of evaluation masks, for the evaluation record: the digest of its manifest, which
    lists every mask with its source file and exact hole ratio (rows are paired across results only on the same
    masks)."""
    return {"manifest_sha256": file_sha256(manifest)}


def recorded_masks(info: dict) -> str | None:
    """The masks an evaluation record names (None for a record written before they were recorded)."""
    record = info.get(MASKS)
    return f"manifest sha256 {record['manifest_sha256']}" if isinstance(record, dict) and \
        "manifest_sha256" in record else None


def rule_of(info: dict) -> str:
    """The compositing rule an evaluation's info record says its numbers were scored under (one written before
    the rule was recorded scored the results as returned: raw)."""
    protocol = info.get("protocol")
    return str(protocol.get("known_pixels", "raw")) if isinstance(protocol, dict) else "raw"

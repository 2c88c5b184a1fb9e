"""The per-image values file the evaluation writes beside each metrics file (`<label>_images.csv`): one row per
mode, mask group, test image and sample with its source and every pixel metric; the input of the bootstrap, the
report's paired differences and `put compare`. Read from a path or from bytes (a git revision's copy)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from put.errors import FileMismatchError
from put.io.files import file_sha256, read_csv

PIXEL_METRICS = ("psnr", "ssim", "mae")  # per image, each with its interval (summary.py)
IMAGE_COLUMNS = ("mode", "group", "image", "source", "sample", *PIXEL_METRICS, "lpips")
KEY_TYPES = {"image": str, "group": str, "mode": str, "source": str}
MASKS = "masks"  # the evaluation record's (`_info.json`) entry naming the masks its values were measured on
# What a value can be (NaN: not measured). No pair of 8-bit images of up to 4096 x 4096 px has a finite PSNR above
# 20 log10(255) + 10 log10(3 x 4096^2) = 125 dB (one level off in one channel of one pixel); +inf is a perfect fill.
VALID_RANGES = {"psnr": (0.0, 125.0), "ssim": (-1.0, 1.0), "mae": (0.0, 1.0), "lpips": (0.0, np.inf)}


def read_per_image(source: Path | bytes, where: str | None = None) -> pd.DataFrame:
    """The per-image values of a file (a path, or its bytes and `where` they came from, for the errors)."""
    where = where or str(source)
    data = io.BytesIO(source) if isinstance(source, bytes) else source
    frame = read_csv(data, f"the per-image values `put evaluate` writes ({where})", dtype=KEY_TYPES)
    missing = [c for c in IMAGE_COLUMNS if c not in frame.columns]
    if missing:
        raise FileMismatchError(f"{where}: lacks column(s) {', '.join(missing)} -- re-run the evaluate stage")
    return checked_values(frame, where)


def checked_values(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    """The frame with its metrics as numbers, after refusing, in one line naming the row (1: the first after the
    header) and the value, a row without its keys, a sample that is not a count, and a value that is not a number
    or lies outside what the metric can be (VALID_RANGES; PSNR may also be +inf)."""
    def refuse(rows: pd.Series, column: str, why: str) -> None:
        if rows.any():
            i = int(np.flatnonzero(rows.to_numpy())[0])
            value = frame[column].iloc[i]
            shown = repr(value) if isinstance(value, str) else f"{value}"
            raise FileMismatchError(f"{where}: row {i + 1}: {column} {shown} {why} "
                                    f"({int(rows.sum())} row(s) so) -- re-run the evaluate stage")

    for column in KEY_TYPES:
        refuse(frame[column].isna() | (frame[column].astype(str).str.strip() == ""), column, "is empty")
    sample = pd.to_numeric(frame["sample"], errors="coerce")
    refuse(sample.isna() | (sample < 0) | (sample % 1 != 0), "sample", "is not a sample number")
    frame = frame.assign(sample=sample.astype(int))
    for metric, (low, high) in VALID_RANGES.items():
        values = pd.to_numeric(frame[metric], errors="coerce")
        refuse(values.isna() & frame[metric].notna(), metric, "is not a number")
        positive_inf = (metric == "psnr") & (values == np.inf)
        refuse(values.notna() & ~positive_inf & ~values.between(low, high), metric,
               f"is outside [{low:g}, {high:g}]" + (" (or +inf)" if metric == "psnr" else ""))
        frame[metric] = values.astype(float)
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

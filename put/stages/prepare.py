"""Stage `prepare`: the split's images -> the prepared cache the training stages read (put/data/prepared.py)."""

from __future__ import annotations

from pathlib import Path

from put.config.params import Params
from put.data.prepared import prepare


def run_prepare(params: Params, split_dir: Path, out: Path, workers: int | None = None) -> dict:
    preset = params.resolved()
    data = preset.data
    return prepare(split_dir, out, preset.model.image_size, data.train_resize, data.resize_filter, data.prepared,
                   workers=workers)

"""Stage `split`: raw images (the demo set is built first) -> train/test lists with checksums."""

from __future__ import annotations

from pathlib import Path

from put.config.params import Params
from put.data.split import split_dataset


def run_split(params: Params, out_dir: Path) -> dict:
    return split_dataset(params.resolved(), out_dir)

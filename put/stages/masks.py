"""Stage `masks`: the frozen evaluation masks, one per test image per group, with a manifest."""

from __future__ import annotations

from pathlib import Path

from put.config.params import Params
from put.data.split import read_split
from put.masks.evaluation import write_eval_masks
from put.masks.io import MaskFolder


def run_masks(params: Params, split_dir: Path, out_dir: Path) -> Path:
    preset = params.resolved()
    size = (preset.model.image_size, preset.model.image_size)
    pconv = None
    if preset.masks.pconv_root is not None:
        pconv = MaskFolder(Path(preset.masks.pconv_root), preset.masks.pconv_polarity, size)
    test_images = [p.as_posix() for p in read_split(Path(split_dir) / "test.csv")]
    return write_eval_masks(test_images, Path(out_dir), size, preset.masks.seed, pconv)

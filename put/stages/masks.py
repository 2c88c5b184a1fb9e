"""Stage `masks`: the frozen evaluation masks, one per test image per group, with a manifest."""

from __future__ import annotations

from pathlib import Path

from put.config.params import Params
from put.data.dataset import ImageListDataset
from put.data.images import write_image
from put.data.split import read_sources, read_split
from put.io.files import atomic_dir
from put.masks.evaluation import read_manifest, write_eval_masks
from put.masks.io import MaskFolder


def run_masks(params: Params, split_dir: Path, out_dir: Path) -> Path:
    """Masks + manifest, and gt/<stem>.png: each test image as the models see it (centre crop at the
    working size), the ground truth that samples are compared with."""
    preset = params.resolved()
    size = (preset.model.image_size, preset.model.image_size)
    masks = preset.masks
    folder = None
    if masks.eval_root is not None:  # the user's own evaluation masks, of the working size's aspect
        folder = MaskFolder(Path(masks.eval_root), masks.eval_polarity, size, setting="masks.eval", same_aspect=True)
    elif masks.pconv_root is not None:
        folder = MaskFolder(Path(masks.pconv_root), masks.pconv_polarity, size)
    test_csv = Path(split_dir) / "test.csv"
    test_images = [p.as_posix() for p in read_split(test_csv)]
    dataset = ImageListDataset(test_csv, preset.model.image_size, train=False,
                               resize_filter=preset.data.resize_filter)
    with atomic_dir(out_dir) as staging:
        manifest = write_eval_masks(test_images, staging, size, masks.seed, folder,
                                    sources=read_sources(test_csv))
        stems = read_manifest(staging).drop_duplicates("image").set_index("image")["mask"].map(
            lambda mask: Path(mask).stem)
        for index, image in enumerate(test_images):
            write_image(staging / "gt" / f"{stems[image]}.png", dataset[index])
    return Path(out_dir) / manifest.name

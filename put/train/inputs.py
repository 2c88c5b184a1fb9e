"""What a training stage trains on: its images (the prepare stage's cache or the original files) and its masks."""

from __future__ import annotations

from pathlib import Path

from put.config import DataConfig, ModelConfig, Preset
from put.data.dataset import AugmentedImages, ImageListDataset
from put.data.prepared import PreparedImages
from put.masks.io import MaskFolder
from put.masks.training import TrainingMasks


def split_datasets(split_dir: Path, image_size: int, data: DataConfig,
                   prepared: Path | None = None) -> tuple[AugmentedImages, AugmentedImages]:
    """The training and test images: from the `prepare` stage's cache, or the original files with
    data.prepared: originals or no cache given."""
    split_dir = Path(split_dir)
    if prepared is not None and data.prepared != "originals":
        return tuple(PreparedImages(prepared, split_dir, split, image_size, train=split == "train",
                                    train_resize=data.train_resize, resize_filter=data.resize_filter,
                                    storage=data.prepared) for split in ("train", "test"))
    return (ImageListDataset(split_dir / "train.csv", image_size, train=True, train_resize=data.train_resize,
                             resize_filter=data.resize_filter),
            ImageListDataset(split_dir / "test.csv", image_size, train=False, resize_filter=data.resize_filter))


def training_masks(preset: Preset, config: ModelConfig, stage: str) -> TrainingMasks:
    """The training masks of stage "pvqvae" or "transformer" (each has its own mask settings)."""
    size = (config.image_size, config.image_size)
    pconv = None
    if preset.masks.pconv_root is not None:
        pconv = MaskFolder(Path(preset.masks.pconv_root), preset.masks.pconv_polarity, size)
    train = {"pvqvae": preset.pvqvae_train, "transformer": preset.transformer_train}[stage]
    erase_prob = preset.pvqvae_train.erase_prob if stage == "pvqvae" else 0.0
    return TrainingMasks(size, config.pvqvae.patch_size, train.masks, pconv, pconv_select=preset.masks.pconv_select,
                         erase_prob=erase_prob)

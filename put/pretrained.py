"""Pretrained files the pipeline can use, and where each one belongs (torch's hub cache).

Nothing is downloaded silently and nothing is replaced by random weights: a missing file is an error
that names the file, the folder and the address it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch


class MissingWeightsError(FileNotFoundError):
    pass


@dataclass(frozen=True)
class PretrainedFile:
    name: str
    filename: str
    url: str
    used_by: str

    @property
    def path(self) -> Path:
        return hub_checkpoints_dir() / self.filename

    def require(self) -> Path:
        if not self.path.is_file():
            raise MissingWeightsError(
                f"{self.name} weights ({self.used_by}) not found: put {self.filename} into "
                f"{self.path.parent}/ (download it from {self.url}; the folder follows $TORCH_HOME)")
        return self.path


def hub_checkpoints_dir() -> Path:
    """$TORCH_HOME/hub/checkpoints (torch.hub.get_dir honours TORCH_HOME)."""
    return Path(torch.hub.get_dir()) / "checkpoints"


VGG19 = PretrainedFile(
    "VGG19", "vgg19-dcbb9e9d.pth", "https://download.pytorch.org/models/vgg19-dcbb9e9d.pth",
    "P-VQVAE perceptual and style losses")

PRETRAINED_FILES: tuple[PretrainedFile, ...] = (VGG19,)

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

    def missing(self) -> str | None:
        """None when the file is in place, else why not (file, folder, source) for an 'unavailable' metric."""
        if self.path.is_file():
            return None
        return f"{self.name} weights {self.filename} missing from {self.path.parent} ({self.url})"

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

# torch-fidelity's FID Inception (TF 2015-12-05 graph converted to PyTorch). Its own code fetches
# URL_INCEPTION_V3 with torch.hub.load_state_dict_from_url, i.e. into this same folder under this name
# (torch_fidelity/feature_extractor_inceptionv3.py); put.metrics.fid passes the path explicitly.
INCEPTION_FID = PretrainedFile(
    "Inception-v3 (FID)", "weights-inception-2015-12-05-6726825d.pth",
    "https://github.com/toshas/torch-fidelity/releases/download/v0.2.0/"
    "weights-inception-2015-12-05-6726825d.pth",
    "FID (torch-fidelity)")

# LPIPS backbones: lpips builds torchvision's vgg16/alexnet with pretrained=True, which loads these
# ImageNet files from the hub cache. LPIPS's own linear layers (lpips/weights/v0.1/{vgg,alex}.pth)
# ship inside the lpips package, so only the backbones can be missing.
LPIPS_VGG16 = PretrainedFile(
    "VGG16 (LPIPS backbone)", "vgg16-397923af.pth",
    "https://download.pytorch.org/models/vgg16-397923af.pth",
    "diversity LPIPS, net='vgg'")
LPIPS_ALEXNET = PretrainedFile(
    "AlexNet (LPIPS backbone)", "alexnet-owt-7be5be79.pth",
    "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth",
    "diversity LPIPS, net='alex'")

LPIPS_BACKBONES: dict[str, PretrainedFile] = {"vgg": LPIPS_VGG16, "alex": LPIPS_ALEXNET}

PRETRAINED_FILES: tuple[PretrainedFile, ...] = (VGG19, INCEPTION_FID, LPIPS_VGG16, LPIPS_ALEXNET)


def weights_report() -> list[dict]:
    """One row per pretrained file: where it belongs and whether it is there (for `put weights`)."""
    return [
        {"name": f.name, "file": f.filename, "folder": str(f.path.parent), "present": f.path.is_file(),
         "used_by": f.used_by, "url": f.url}
        for f in PRETRAINED_FILES
    ]

"""Inpaint one image with a trained checkpoint: N diverse results written as PNG files."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from put.data.images import read_image, write_image
from put.masks.io import MaskError, read_mask
from put.model_io import load_put_model
from put.sampling import SamplingOptions
from put.sampling_engine import inpaint_batch
from put.seeding import derive_seed


@dataclass(frozen=True)
class InpaintRequest:
    checkpoint: Path
    image: Path
    mask: Path
    out: Path
    samples: int = 1
    seed: int = 0
    options: SamplingOptions = SamplingOptions()
    deterministic: bool = False
    composite: bool = True
    mask_polarity: str = "hole-white"
    pad: bool = False
    pvqvae: Path | None = None
    batch_size: int | None = None
    device: str = "cpu"


def pad_to_multiple(image: torch.Tensor, keep: torch.Tensor, multiple: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Reflect-pad the image and replicate-pad the mask on the bottom/right to a multiple of the patch size."""
    h, w = image.shape[-2:]
    pad = (0, -w % multiple, 0, -h % multiple)
    return F.pad(image[None], pad, mode="reflect")[0], F.pad(keep[None], pad, mode="replicate")[0]


def autocast_for(device: torch.device):
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()


def inpaint(request: InpaintRequest) -> list[Path]:
    if request.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {request.samples}")
    device = torch.device(request.device)
    model = load_put_model(request.checkpoint, request.pvqvae, device)
    patch = model.config.pvqvae.patch_size
    image = read_image(request.image)
    keep = read_mask(request.mask, request.mask_polarity, size=tuple(image.shape[-2:]))
    h, w = image.shape[-2:]
    if h % patch or w % patch:
        if not request.pad:
            raise MaskError(f"{request.image}: size {w}x{h} is not a multiple of the patch size {patch}; "
                            f"crop or resize it, or pass --pad to pad it (the result is cropped back)")
        image, keep = pad_to_multiple(image, keep, patch)

    batch = request.batch_size or request.samples
    results = []
    with autocast_for(device):
        for start in range(0, request.samples, batch):
            n = min(batch, request.samples - start)
            images = image.to(device).expand(n, -1, -1, -1)
            keeps = keep.to(device).expand(n, -1, -1, -1)
            results.append(inpaint_batch(model, images, keeps, "all" if request.deterministic else "iterative",
                                         request.options, derive_seed(request.seed, start),
                                         composite=request.composite).float())
    outputs = torch.cat(results)[..., :h, :w]

    request.out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, result in enumerate(outputs):
        path = request.out / f"{request.image.stem}_{i:03d}.png"
        write_image(path, result)
        paths.append(path)
    return paths



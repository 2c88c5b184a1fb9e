"""Inpainting with a trained checkpoint: one function on tensors (`inpaint_tensors`) that both `put inpaint`
(one image, or a folder of images and masks) and `put serve` call."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from put.data.images import ImageReadError, read_image, write_image
from put.errors import InputError, PathError
from put.masks.io import MaskError, read_mask
from put.models.device import autocast
from put.models.put_model import PUTModel, paste_known
from put.models.seeding import derive_seed
from put.sampling.engine import Sampler, inpaint_batch
from put.sampling.precision import PRECISIONS, use_bf16
from put.sampling.schedules import Progress, SamplingOptions


@dataclass(frozen=True)
class InpaintSettings:
    samples: int = 1
    seed: int = 0
    options: SamplingOptions = field(default_factory=SamplingOptions)
    deterministic: bool = False  # all tokens at once by argmax (PUT_all); the seed plays no part
    pad: bool = False            # pad to a multiple of the patch size, crop the results back
    batch_size: int | None = None  # samples per forward batch (None: all at once)
    precision: str = "auto"      # fp32, bf16 or auto (put/sampling/precision.py)

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.samples < 1:
            raise InputError(f"samples must be >= 1, got {self.samples}")
        if self.batch_size is not None and self.batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {self.batch_size}")


def pad_to_multiple(image: torch.Tensor, keep: torch.Tensor, multiple: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Reflect-pad the image and replicate-pad the mask on the bottom/right to a multiple of the patch size."""
    h, w = image.shape[-2:]
    pad = (0, -w % multiple, 0, -h % multiple)
    return F.pad(image[None], pad, mode="reflect")[0], F.pad(keep[None], pad, mode="replicate")[0]


def inpaint_tensors(model: PUTModel, image: torch.Tensor, keep: torch.Tensor, settings: InpaintSettings,
                    source: str = "image", progress: Progress | None = None,
                    sampler: Sampler | None = None) -> torch.Tensor:
    """image (3, H, W) in [-1, 1], keep-mask (1, H, W) (1 = known) -> (N, 3, H, W) decoder outputs in [-1, 1] on
    the CPU, known pixels not pasted back (`paste_known` does that). `source` names the image in errors;
    `progress(done, total)` is called after each forward pass; `sampler`: the caller's (else one for this call)."""
    patch = model.config.pvqvae.patch_size
    h, w = image.shape[-2:]
    if h % patch or w % patch:
        if not settings.pad:
            raise MaskError(f"{source}: size {w}x{h} is not a multiple of the patch size {patch}; "
                            f"crop or resize it, or pass --pad to pad it (the result is cropped back)")
        image, keep = pad_to_multiple(image, keep, patch)

    device = next(model.parameters()).device
    sampler = sampler or Sampler(model)
    batch = settings.batch_size or settings.samples
    batches = -(-settings.samples // batch)
    results = []
    with autocast(device, use_bf16(settings.precision, device)):
        for index, start in enumerate(range(0, settings.samples, batch)):
            n = min(batch, settings.samples - start)
            # every batch of one image takes the same number of steps: progress counts them over all batches
            report = None if progress is None else (lambda done, total, i=index: progress(i * total + done,
                                                                                          batches * total))
            results.append(inpaint_batch(model, image.to(device).expand(n, -1, -1, -1),
                                         keep.to(device).expand(n, -1, -1, -1),
                                         "all" if settings.deterministic else "iterative", settings.options,
                                         derive_seed(settings.seed, start), engine=sampler,
                                         progress=report).float().cpu())
    return torch.cat(results)[..., :h, :w]


def read_inputs(image: str | os.PathLike, mask: str | os.PathLike, polarity: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The image in [-1, 1] and its keep-mask, read and checked (binary, same size, has a hole and a known pixel)."""
    pixels = read_image(image)
    return pixels, read_mask(mask, polarity, size=tuple(pixels.shape[-2:]))


def write_results(out: Path, stem: str, results: torch.Tensor) -> list[Path]:
    """<out>/<stem>_000.png, <stem>_001.png, ... (each written atomically)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}_{i:03d}.png" for i in range(len(results))]
    for path, result in zip(paths, results):
        write_image(path, result)
    return paths


@dataclass(frozen=True)
class InpaintRequest:
    """What `put inpaint` was asked for; `image`/`mask` are files, or folders paired by stem (`inpaint_folder`)."""
    image: Path
    mask: Path
    out: Path
    settings: InpaintSettings = InpaintSettings()
    composite: bool = True
    mask_polarity: str = "hole-white"


def inpaint_file(model: PUTModel, request: InpaintRequest, sampler: Sampler | None = None) -> list[Path]:
    image, keep = read_inputs(request.image, request.mask, request.mask_polarity)
    results = inpaint_tensors(model, image, keep, request.settings, str(request.image), sampler=sampler)
    if request.composite:
        results = paste_known(results, keep, image)
    return write_results(request.out, request.image.stem, results)


@dataclass
class FolderReport:
    images: int                                                      # image files found
    done: list[str] = field(default_factory=list)                    # image file names inpainted
    skipped: list[tuple[str, str]] = field(default_factory=list)     # (file name, why), masks included


def files_by_stem(folder: Path) -> dict[str, list[Path]]:
    """The files directly in a folder (hidden ones left out), grouped by name without extension."""
    if not folder.is_dir():
        raise PathError(errno.ENOTDIR, "not a folder", str(folder))
    groups: dict[str, list[Path]] = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.startswith("."):
            groups.setdefault(path.stem, []).append(path)
    return groups


def pair_by_stem(images: Path, masks: Path) -> tuple[list[tuple[Path, Path]], list[tuple[str, str]], int]:
    """(image, mask) pairs with the same file name stem, the files left out with the reason, the image count."""
    image_groups, mask_groups = files_by_stem(images), files_by_stem(masks)
    pairs, skipped = [], []
    for stem, found in image_groups.items():
        candidates = mask_groups.get(stem, [])
        if len(found) > 1:
            skipped += [(p.name, f"several images named {stem}.* ({', '.join(q.name for q in found)}): their "
                                 "results would share names") for p in found]
        elif not candidates:
            skipped.append((found[0].name, f"no mask named {stem}.* in {masks}"))
        elif len(candidates) > 1:
            skipped.append((found[0].name, f"several masks named {stem}.* in {masks}: "
                                           f"{', '.join(q.name for q in candidates)}"))
        else:
            pairs.append((found[0], candidates[0]))
    skipped += [(p.name, f"mask without an image named {stem}.* in {images}")
                for stem, found in mask_groups.items() if stem not in image_groups for p in found]
    return pairs, skipped, sum(len(found) for found in image_groups.values())


def inpaint_folder(model: PUTModel, request: InpaintRequest) -> FolderReport:
    """Every image of `request.image` (a folder) with the mask of the same stem in `request.mask`; a pair that
    cannot be read or does not fit (not an image, mask not binary or of another size, ...) is skipped with
    its reason, and the others are still inpainted."""
    pairs, skipped, images = pair_by_stem(request.image, request.mask)
    if not images:
        raise InputError(f"{request.image}: no image files in this folder")
    report = FolderReport(images, skipped=skipped)
    sampler = Sampler(model)  # one for the folder: its engines serve every image of a size
    for image, mask in tqdm(pairs, desc="inpaint", unit="img"):
        try:
            inpaint_file(model, replace(request, image=image, mask=mask), sampler)
            report.done.append(image.name)
        except (ImageReadError, MaskError) as err:
            report.skipped.append((image.name, str(err)))
    return report

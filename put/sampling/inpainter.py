"""The Python call: a trained model, by checkpoint path or registered name, inpainting an image and a mask (files,
PIL images or arrays) into N results as PIL images or arrays (docs/serving.md, "From Python").

    from put.sampling.inpainter import Inpainter
    model = Inpainter.load("models:/put-demo-put-transformer@current")  # or "runs/demo/put/transformer.pt"
    results = model.inpaint("photo.png", "mask.png", samples=4)       # 4 PIL images
    arrays = model.inpaint(photo_array, hole_array, samples=4, as_arrays=True)  # (H, W, 3) uint8 each
    results[0].save("result.png")
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from put.data.images import from_uint8, read_image, to_rgb, to_uint8
from put.masks.io import keep_mask_from_array, read_mask, validate_keep_mask
from put.models.checkpoint import load_put_model
from put.models.put_model import PUTModel, paste_known
from put.sampling.inpaint import InpaintSettings, inpaint_tensors
from put.sampling.registered import fetch_registered, is_registered
from put.sampling.schedules import SamplingOptions

ImageInput = str | os.PathLike | Image.Image | np.ndarray


def load_model(checkpoint: str | os.PathLike, pvqvae: str | os.PathLike | None = None,
               device: str | torch.device = "cpu", store: str | None = None) -> PUTModel:
    """A transformer checkpoint (a path, or a registered model `models:/NAME@ALIAS` / `models:/NAME/VERSION` of the
    MLflow store `store`, default MLFLOW_TRACKING_URI else ./mlflow.db) with the P-VQVAE it was trained on."""
    if not is_registered(checkpoint):
        return load_put_model(checkpoint, pvqvae, device)
    with tempfile.TemporaryDirectory(prefix="put-model-") as tmp:  # loaded into memory, then the files go
        fetched = fetch_registered(str(checkpoint), Path(tmp), store)
        return load_put_model(fetched.transformer, pvqvae or fetched.pvqvae, device)


def _image(image: ImageInput) -> torch.Tensor:
    if isinstance(image, (str, os.PathLike)):
        return read_image(image)
    pil = image if isinstance(image, Image.Image) else Image.fromarray(np.asarray(image))
    return from_uint8(np.asarray(to_rgb(pil)))


def _keep(mask: ImageInput, polarity: str, size: tuple[int, int]) -> torch.Tensor:
    if isinstance(mask, (str, os.PathLike)):
        return read_mask(mask, polarity, size=size)
    values = np.asarray(mask.convert("L") if isinstance(mask, Image.Image) else mask)
    if values.dtype == bool:
        values = values.astype(np.uint8)
    keep = keep_mask_from_array(values, polarity, "mask")
    validate_keep_mask(keep, "mask", size, polarity)
    return torch.from_numpy(keep).unsqueeze(0)


class Inpainter:
    """A loaded model and the settings `put inpaint` would use (top_k 50, one token per step, composited)."""

    def __init__(self, model: PUTModel, precision: str = "auto") -> None:
        self.model, self.precision = model, precision

    @classmethod
    def load(cls, checkpoint: str | os.PathLike, pvqvae: str | os.PathLike | None = None, device: str = "cpu",
             precision: str = "auto", store: str | None = None) -> Inpainter:
        """By path or registered name (see `load_model`); `precision`: fp32, bf16 or auto."""
        return cls(load_model(checkpoint, pvqvae, device, store), precision)

    def inpaint(self, image: ImageInput, mask: ImageInput, samples: int = 1, *, seed: int = 0,
                polarity: str = "hole-white", composite: bool = True, deterministic: bool = False,
                as_arrays: bool = False, **options: Any) -> list[Image.Image] | list[np.ndarray]:
        """N results of `image` (a file, PIL image or (H, W[, C]) uint8 array; RGBA and grey are made RGB) with the
        holes of `mask` (a file, PIL image or (H, W) array of 0/255, 0/1 or bool; white = hole unless `polarity`
        is keep-white). `options`: SamplingOptions fields (top_k, temperature, tokens_per_step, steps, schedule,
        position_rule). The same seed gives the same results as `put inpaint --seed`."""
        pixels = _image(image)
        keep = _keep(mask, polarity, tuple(pixels.shape[-2:]))
        settings = replace(InpaintSettings(samples=samples, seed=seed, deterministic=deterministic,
                                           precision=self.precision), options=SamplingOptions(**options))
        results = inpaint_tensors(self.model, pixels, keep, settings)
        if composite:
            results = paste_known(results, keep, pixels)
        arrays = [to_uint8(result) for result in results]
        return arrays if as_arrays else [Image.fromarray(a) for a in arrays]

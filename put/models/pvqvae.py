"""P-VQVAE: patch encoder -> dual codebook -> multi-scale guided decoder.

Images enter and leave in [-1, 1]; the networks themselves see them in their pixel space (`pixel_norm`:
[-1, 1] itself, or ImageNet-normalised for TPAMI's ImageNet codecs)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from put.config import PVQVAEConfig
from put.models.decoder import MultiScaleGuidedDecoder
from put.models.encoder import build_encoder
from put.models.quantizer import DualCodebook, GumbelDraw, Quantized

HOLE_VALUE = -1.0  # hole pixels of an image in [-1, 1] before encoding
# ImageNet's RGB statistics on [0, 1] (the TPAMI ImageNet configs' im_process_info).
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def mask_image(images: torch.Tensor, keep_mask: torch.Tensor) -> torch.Tensor:
    return torch.where(keep_mask.bool(), images, torch.full_like(images, HOLE_VALUE))


def patch_is_known(keep_mask: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, 1, H, W) keep-mask -> (B, h, w) bool: True only where all r*r pixels of the patch are known."""
    return -F.max_pool2d(-keep_mask.float(), patch_size).squeeze(1) > 0.5


@dataclass
class Reconstruction:
    images: torch.Tensor       # decoder output x^R, [-1, 1] scale
    target: torch.Tensor       # x^ = x (x) m, the image the encoder saw
    quantized: Quantized
    ref_keep: torch.Tensor | None  # the decoder's keep-mask (m' or m (x) m'); None without a reference branch


class PVQVAE(nn.Module):
    def __init__(self, config: PVQVAEConfig):
        super().__init__()
        self.config = config
        self.encoder = build_encoder(config)
        self.quant_conv = nn.Conv2d(config.embed_dim, config.embed_dim, 1)
        self.codebook = DualCodebook(config)
        self.post_quant_conv = nn.Conv2d(config.embed_dim, config.embed_dim, 1)
        self.decoder = MultiScaleGuidedDecoder(config)
        self.imagenet_norm = config.pixel_norm == "imagenet"
        self.register_buffer("pixel_mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("pixel_std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def to_network(self, images: torch.Tensor) -> torch.Tensor:
        """Images in [-1, 1] -> what the encoder, the reference branch and (TPAMI) the losses see."""
        return ((images + 1) / 2 - self.pixel_mean) / self.pixel_std if self.imagenet_norm else images

    def from_network(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.pixel_std + self.pixel_mean) * 2 - 1 if self.imagenet_norm else x

    def check_size(self, images: torch.Tensor) -> None:
        r = self.config.patch_size
        if images.shape[-1] % r or images.shape[-2] % r:
            raise ValueError(f"image size {tuple(images.shape[-2:])} is not a multiple of the patch size {r}")

    def encode(self, images: torch.Tensor, keep_mask: torch.Tensor) -> torch.Tensor:
        """Un-quantized features f^ = E(x (x) m), (B, C, H/r, W/r)."""
        self.check_size(images)
        return self.quant_conv(self.encoder(self.to_network(mask_image(images, keep_mask))))

    def patch_known(self, keep_mask: torch.Tensor) -> torch.Tensor:
        return patch_is_known(keep_mask, self.config.patch_size)

    def known_fraction(self, keep_mask: torch.Tensor) -> torch.Tensor:
        """(B, 1, H, W) keep-mask -> (B, h, w): the share of each patch's pixels that are known."""
        return F.avg_pool2d(keep_mask.float(), self.config.patch_size).squeeze(1)

    def quantize(self, features: torch.Tensor, keep_mask: torch.Tensor, gumbel: GumbelDraw | None = None) -> Quantized:
        return self.codebook(features, self.patch_known(keep_mask), gumbel)

    def decode(self, vectors: torch.Tensor, keep_mask: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        """Code vectors -> images in [-1, 1] (unclamped); `images` are the reference, masked by `keep_mask`."""
        reference = self.to_network(mask_image(images, keep_mask))
        return self.from_network(self.decoder(self.post_quant_conv(vectors), keep_mask, reference))

    def decode_tokens(self, tokens: torch.Tensor, keep_mask: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        """Tokens index book `e` (the transformer's vocabulary), (B, h, w)."""
        return self.decode(self.codebook.lookup(tokens), keep_mask, images)

    def target_tokens(self, images: torch.Tensor) -> torch.Tensor:
        """Tokens of the full image in book `e`: every patch treated as unmasked (the transformer's target)."""
        keep = torch.ones_like(images[:, :1])
        features = self.encode(images, keep)
        b, c, h, w = features.shape
        flat = features.permute(0, 2, 3, 1).reshape(-1, c)
        book = torch.zeros(len(flat), dtype=torch.long, device=flat.device)
        return self.codebook.nearest(flat, book).view(b, h, w)

    def forward(self, images: torch.Tensor, erase_keep: torch.Tensor, ref_keep: torch.Tensor,
                gumbel: GumbelDraw | None = None) -> Reconstruction:
        """Training pass: x^ = x (x) m is encoded; the decoder's reference image is x^ (x) m' (paper Sec. 3.1).
        Its keep-mask is m' (released: erased pixels are shown to it as known, with x^'s value -1) or m (x) m'
        (paper), see `PVQVAEConfig.decoder_keep`."""
        target = mask_image(images, erase_keep)
        quantized = self.quantize(self.encode(images, erase_keep), erase_keep, gumbel)
        keep = ref_keep if self.config.decoder_keep == "reference" else erase_keep * ref_keep
        images_out = self.decode(quantized.vectors, keep, target)
        return Reconstruction(images_out, target, quantized, keep if self.config.reference_branch else None)

"""P-VQVAE losses (supplementary Sec. B), term by term as the released EdgeConnectLoss computes them:
pixel, gradient, adversarial, perceptual, style, commitment.

Image terms are on clamped [0, 1] images as in the released code (`image_range: model`: unclamped). Gradient,
adversarial, perceptual and style terms start at `LossConfig.delayed_start`. Without a reference branch
(`no_ref`) the released code passes no mask: no hole-fraction division, style over the whole image.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from put.config import LossConfig
from put.models.pvqvae import Reconstruction
from put.models.vgg import PERCEPTUAL_LAYERS, STYLE_LAYERS, VGG19Features


def to_unit(images: torch.Tensor) -> torch.Tensor:
    """[-1, 1] -> [0, 1], clamped as an image would be."""
    return ((images + 1) / 2).clamp(0, 1)


ImageView = Callable[[torch.Tensor], torch.Tensor]  # images in [-1, 1] -> what a loss term sees


def identity(images: torch.Tensor) -> torch.Tensor:
    return images


def image_view(config: LossConfig, to_network: ImageView = identity) -> ImageView:
    """What the generator's image terms see: [0, 1] clamped, or the network's pixel space (`to_network`)."""
    return to_network if config.image_range == "model" else to_unit


def discriminator_view(config: LossConfig, to_network: ImageView = identity) -> ImageView:
    """What the discriminator sees in its own step: as the generator's terms, or (discriminator_inputs
    released, CVPR) the unclamped [-1, 1] images."""
    if config.image_range == "unit" and config.discriminator_inputs == "released":
        return identity
    return image_view(config, to_network)


def image_gradients(images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Magnitudes |x[i+1] - x[i]| of the forward differences along x and y, zero in the last column / row."""
    dx = F.pad((images[..., :, 1:] - images[..., :, :-1]).abs(), (0, 1, 0, 0))
    dy = F.pad((images[..., 1:, :] - images[..., :-1, :]).abs(), (0, 0, 0, 1))
    return dx, dy


def gram(features: torch.Tensor) -> torch.Tensor:
    b, c, h, w = features.shape
    f = features.reshape(b, c, h * w)
    return f @ f.transpose(1, 2) / (c * h * w)


def pixel_loss(fake: torch.Tensor, real: torch.Tensor, ref_keep: torch.Tensor | None) -> torch.Tensor:
    """L1 over the whole image divided by the batch's hole fraction of the decoder's keep-mask (released
    code); not divided without a reference branch (ref_keep None) or for a batch without holes (where the
    released code divides by zero)."""
    if ref_keep is None:
        return F.l1_loss(fake, real)
    hole_fraction = (1 - ref_keep).mean()
    return F.l1_loss(fake, real) / torch.where(hole_fraction > 0, hole_fraction, torch.ones_like(hole_fraction))


def gradient_loss(fake: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    (fdx, fdy), (rdx, rdy) = image_gradients(fake), image_gradients(real)
    return (F.l1_loss(fdx, rdx) + F.l1_loss(fdy, rdy)) / 2


def perceptual_loss(fake_feats: dict, real_feats: dict) -> torch.Tensor:
    return sum(F.l1_loss(fake_feats[name], real_feats[name]) for name in PERCEPTUAL_LAYERS)


def style_loss(fake_feats: dict, real_feats: dict) -> torch.Tensor:
    return sum(F.l1_loss(gram(fake_feats[name]), gram(real_feats[name])) for name in STYLE_LAYERS)


def adversarial_target(logits: torch.Tensor, real: bool) -> torch.Tensor:
    """Non-saturating BCE on the discriminator's logits."""
    target = torch.ones_like(logits) if real else torch.zeros_like(logits)
    return F.binary_cross_entropy_with_logits(logits.float(), target.float())


class GeneratorLoss(nn.Module):
    """The full P-VQVAE objective. `vgg` may be None only when the perceptual and style weights are 0."""

    def __init__(self, config: LossConfig, vgg: VGG19Features | None, to_network: ImageView = identity):
        super().__init__()
        if config.needs_vgg and vgg is None:
            raise ValueError("perceptual/style loss weights are > 0 but no VGG19 was given")
        self.config = config
        self.vgg = vgg
        self.view = image_view(config, to_network)

    def forward(self, rec: Reconstruction, discriminator: nn.Module, step: int) -> dict[str, torch.Tensor]:
        """The weighted terms and their sum `total`; each term is reported unweighted."""
        cfg = self.config
        fake, real = self.view(rec.images), self.view(rec.target)
        terms = {"pixel": pixel_loss(fake, real, rec.ref_keep), "commitment": rec.quantized.commitment}
        if step >= cfg.delayed_start:
            terms["gradient"] = gradient_loss(fake, real)
            if cfg.adversarial > 0 and step >= cfg.adversarial_from:
                terms["adversarial"] = adversarial_target(discriminator(fake), real=True)
            if cfg.needs_vgg:
                # Style only on the holes, where the decoder had to invent the content (whole image: no_ref).
                hole = 1 - rec.ref_keep if rec.ref_keep is not None else torch.ones_like(fake[:, :1])
                feats = self.vgg(torch.cat([fake, real, fake * hole, real * hole]))
                fake_f, real_f, fake_h, real_h = zip(*(v.chunk(4) for v in feats.values()))
                names = list(feats)
                terms["perceptual"] = perceptual_loss(dict(zip(names, fake_f)), dict(zip(names, real_f)))
                terms["style"] = style_loss(dict(zip(names, fake_h)), dict(zip(names, real_h)))
        terms["total"] = sum(getattr(cfg, name) * value for name, value in terms.items())
        return terms


def discriminator_loss(discriminator: nn.Module, rec: Reconstruction, view: ImageView = to_unit) -> torch.Tensor:
    """(BCE(D(real), 1) + BCE(D(fake), 0)) / 2 on the images as `view` shows them (`discriminator_view`)."""
    real_logits = discriminator(view(rec.target))
    fake_logits = discriminator(view(rec.images.detach()))
    return (adversarial_target(real_logits, True) + adversarial_target(fake_logits, False)) / 2

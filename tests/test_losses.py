"""P-VQVAE losses: each term's arithmetic, the delayed start, and the VGG19 weights requirement."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from put.config import LossConfig, apply_variant
from put.io.pretrained import VGG19, MissingWeightsError
from put.models.discriminator import PatchDiscriminator
from put.models.losses import (
    GeneratorLoss,
    discriminator_loss,
    discriminator_view,
    gradient_loss,
    pixel_loss,
    style_loss,
    to_unit,
)
from put.models.pvqvae import PVQVAE
from put.models.vgg import VGG19Features
from tests.conftest import TINY, random_batch


def test_pixel_loss_divides_by_hole_fraction_and_guards_no_holes():
    fake, real = torch.zeros(1, 3, 4, 4), torch.ones(1, 3, 4, 4)
    keep = torch.ones(1, 1, 4, 4)
    assert pixel_loss(fake, real, keep) == 1.0  # no hole: not divided (the released code divides by 0)
    keep[..., :2, :] = 0
    assert pixel_loss(fake, real, keep) == 2.0


def test_gradient_loss_sees_edges_not_offsets():
    flat = torch.zeros(1, 3, 8, 8)
    assert gradient_loss(flat + 0.3, flat) == 0
    edge = flat.clone()
    edge[..., 4:] = 1
    assert gradient_loss(edge, flat) > 0


@pytest.fixture(scope="module")
def untrained_vgg():
    return VGG19Features.untrained()


def test_delayed_terms_switch_on_at_start(untrained_vgg):
    config = LossConfig(delayed_start=10)
    loss = GeneratorLoss(config, untrained_vgg)
    model, disc = PVQVAE(TINY.pvqvae).train(), PatchDiscriminator()
    images, keep = random_batch()
    rec = model(images, keep, keep)
    early = loss(rec, disc, step=9)
    assert set(early) == {"pixel", "commitment", "total"}
    late = loss(rec, disc, step=10)
    assert set(late) == {"pixel", "commitment", "gradient", "adversarial", "perceptual", "style", "total"}
    expected = sum(getattr(config, k) * v for k, v in late.items() if k != "total")
    torch.testing.assert_close(late["total"], expected)
    late["total"].backward()
    assert all(p.grad is None for p in untrained_vgg.parameters())  # VGG stays frozen


@pytest.mark.parametrize("inputs", ["unit", "released"])
def test_discriminator_input_range(inputs):
    """unit: [0, 1] in both steps; released: [0, 1] in the generator step, [-1, 1] unclamped in D's own step."""
    seen = []

    class Spy(PatchDiscriminator):
        def forward(self, x):
            seen.append((x.min().item(), x.max().item()))
            return super().forward(x)

    model = PVQVAE(TINY.pvqvae)
    images, keep = random_batch()
    rec = model(images, keep, keep)
    disc = Spy()
    discriminator_loss(disc, rec, discriminator_view(LossConfig(discriminator_inputs=inputs))).backward()
    GeneratorLoss(LossConfig(delayed_start=0, perceptual=0, style=0), None)(rec, disc, step=0)
    assert len(seen) == 3 and 0 <= seen[2][0] and seen[2][1] <= 1  # the generator step's call
    assert all(lo >= 0 and hi <= 1 for lo, hi in seen[:2]) == (inputs == "unit")
    if inputs == "released":
        assert seen[0] == (rec.target.min().item(), rec.target.max().item())
    assert torch.equal(to_unit(torch.tensor([-2.0, 0.0, 2.0])), torch.tensor([0.0, 0.5, 1.0]))


def test_gradient_loss_compares_magnitudes_as_released():
    ramp = torch.arange(8.0).expand(1, 3, 8, 8)
    assert gradient_loss(ramp.flip(-1), ramp) == 0  # equal |dx|, opposite signs
    fake, real = torch.rand(2, 3, 6, 7), torch.rand(2, 3, 6, 7)

    def released(x):  # image_gradient_loss.py, transcribed
        dx = (F.pad(x, [0, 1, 0, 0])[..., 1:] - x).abs()
        dy = (F.pad(x, [0, 0, 0, 1])[..., 1:, :] - x).abs()
        dx[..., -1] = 0
        dy[..., -1, :] = 0
        return dx, dy

    (fdx, fdy), (rdx, rdy) = released(fake), released(real)
    torch.testing.assert_close(gradient_loss(fake, real), (F.l1_loss(fdx, rdx) + F.l1_loss(fdy, rdy)) / 2)


@pytest.mark.parametrize("variant", ["put", "conv", "one", "no_ref"])
def test_pixel_and_style_losses_cover_the_holes_only_with_a_reference_branch(variant, untrained_vgg):
    """The released code passes no mask without a reference branch: plain L1, style over the whole image."""
    model = PVQVAE(apply_variant(TINY, variant).pvqvae)
    images, keep = random_batch()
    rec = model(images, torch.ones_like(keep), keep)
    terms = GeneratorLoss(LossConfig(delayed_start=0, adversarial=0), untrained_vgg)(rec, None, step=0)
    fake, real = to_unit(rec.images), to_unit(rec.target)
    with_ref = variant != "no_ref"
    hole = (1 - keep) if with_ref else torch.ones_like(keep)
    torch.testing.assert_close(terms["pixel"], F.l1_loss(fake, real) / (hole.mean() if with_ref else 1))
    torch.testing.assert_close(terms["style"], style_loss(untrained_vgg(fake * hole), untrained_vgg(real * hole)))


def test_vgg_losses_without_vgg_are_refused():
    with pytest.raises(ValueError, match="no VGG19"):
        GeneratorLoss(LossConfig(), None)


def test_missing_vgg_weights_name_file_and_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(MissingWeightsError) as err:
        VGG19Features.pretrained()
    assert VGG19.filename in str(err.value) and str(tmp_path / "hub" / "checkpoints") in str(err.value)


def test_pretrained_vgg_loads_from_hub_cache(tmp_path, monkeypatch, untrained_vgg):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    folder = tmp_path / "hub" / "checkpoints"
    folder.mkdir(parents=True)
    state = {f"features.{k}": v for k, v in untrained_vgg.features.state_dict().items()}
    state["classifier.0.weight"] = torch.zeros(1)
    torch.save(state, folder / VGG19.filename)
    loaded = VGG19Features.pretrained()
    assert torch.equal(loaded.features[0].weight, untrained_vgg.features[0].weight)

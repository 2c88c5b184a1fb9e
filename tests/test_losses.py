"""P-VQVAE losses: each term's arithmetic, the delayed start, and the VGG19 weights requirement."""

from __future__ import annotations

import pytest
import torch

from put.config import LossConfig
from put.models.discriminator import PatchDiscriminator
from put.models.losses import GeneratorLoss, discriminator_loss, gradient_loss, pixel_loss, to_unit
from put.models.pvqvae import PVQVAE
from put.models.vgg import VGG19Features
from put.pretrained import VGG19, MissingWeightsError
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


def test_discriminator_sees_both_images_in_unit_range():
    seen = []

    class Spy(PatchDiscriminator):
        def forward(self, x):
            seen.append((x.min().item(), x.max().item()))
            return super().forward(x)

    model = PVQVAE(TINY.pvqvae)
    images, keep = random_batch()
    rec = model(images, keep, keep)
    disc = Spy()
    discriminator_loss(disc, rec).backward()
    GeneratorLoss(LossConfig(delayed_start=0, perceptual=0, style=0), None)(rec, disc, step=0)
    assert len(seen) == 3 and all(lo >= 0 and hi <= 1 for lo, hi in seen)
    assert torch.equal(to_unit(torch.tensor([-2.0, 0.0, 2.0])), torch.tensor([0.0, 0.5, 1.0]))


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

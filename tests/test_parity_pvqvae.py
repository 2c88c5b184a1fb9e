"""P-VQVAE parity with the authors' released code, from committed fixtures (their code need not be present):
encoder features, code indices of both books, decoder output, one training step's loss terms and EMA update."""

from __future__ import annotations

import pytest
import torch

from put.config import LossConfig
from put.models.checkpoint import load_checkpoint, load_pvqvae
from put.models.discriminator import PatchDiscriminator
from put.models.losses import GeneratorLoss, discriminator_loss, discriminator_view
from put.models.pvqvae import PVQVAE
from put.models.vgg import VGG19Features
from put.official import import_official, read_overrides
from tests.official_fixtures import (
    DEMO_OVERRIDES,
    MANIFEST,
    PVQVAE_VARIANTS,
    inputs,
    outputs,
    seeded_weights,
    write_official,
)

ATOL = 1e-5
# Their loss terms (weighted, as EdgeConnectLoss reports them) -> (our term, its LossConfig weight name).
LOSS_TERMS = {"rec_loss": "pixel", "grad_loss": "gradient", "content_loss": "perceptual", "style_loss": "style",
              "adv_loss": "adversarial", "quantize_loss": "commitment"}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """variant -> (our P-VQVAE checkpoint path) imported from their format."""
    root = tmp_path_factory.mktemp("official")
    paths = {}
    for variant in PVQVAE_VARIANTS:
        source = write_official(root / f"{variant}.pth", f"pvqvae_{variant}")
        result = import_official(root / variant, "demo", pvqvae=source, model_overrides=read_overrides(DEMO_OVERRIDES))
        assert result.variant == variant  # read from the tensors
        paths[variant] = result.pvqvae
    return paths


@pytest.fixture(scope="module")
def vgg():
    return VGG19Features(seeded_weights().seeded_vgg19_features(MANIFEST["seed"]))


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape
    return (a.float() - b.float()).abs().max().item()


@pytest.mark.parametrize("variant", PVQVAE_VARIANTS)
def test_features_codes_and_decoder_match_the_released_code(imported, variant):
    model, _ = load_pvqvae(imported[variant])
    theirs = outputs(f"pvqvae_{variant}")
    images, keep, _ = inputs()
    with torch.no_grad():
        features = model.encode(images, keep)
        assert max_diff(features, theirs["features"]) <= ATOL
        assert torch.equal(model.patch_known(keep), theirs["token_known"])
        q = model.quantize(features, keep)
        assert torch.equal(q.indices, theirs["tokens"])
        assert torch.equal(model.target_tokens(images), theirs["target_tokens"])
        search = model.quantize(theirs["search_features"], keep)  # spread-out features: many codes of both books
        assert torch.equal(search.indices, theirs["search_tokens"])
        decoded = model.decode(model.codebook.lookup(theirs["tokens"]), keep, images)
        assert max_diff(decoded, theirs["decoded"]) <= ATOL


@pytest.mark.parametrize("variant", PVQVAE_VARIANTS)
def test_training_step_losses_and_ema_match_the_released_code(imported, vgg, variant):
    """One generator and one discriminator step at the iteration where every term is on, with the released
    code's switches: decoder keep-mask m' (default), EMA over the whole table, [-1, 1] in the D step."""
    model, _ = load_pvqvae(imported[variant])
    released = PVQVAE(model.config.model_copy(update={"ema_update": "released"}))
    released.load_state_dict(model.state_dict())
    disc = PatchDiscriminator()
    disc.load_state_dict(load_checkpoint(imported[variant]).training["discriminator"])
    config = LossConfig(delayed_start=MANIFEST["loss_start"], discriminator_inputs="released")
    theirs = outputs(f"pvqvae_{variant}")
    images, keep, erase = inputs()

    released.train(), disc.train()
    rec = released(images, erase, keep)
    terms = GeneratorLoss(config, vgg)(rec, disc, step=MANIFEST["loss_start"])
    d_loss = discriminator_loss(disc, rec, discriminator_view(config))

    assert max_diff(rec.images, theirs["train_reconstruction"]) <= ATOL
    for their_name, ours in LOSS_TERMS.items():
        torch.testing.assert_close(getattr(config, ours) * terms[ours], theirs[f"generator_{their_name}"],
                                   rtol=1e-5, atol=1e-7, msg=their_name)
    torch.testing.assert_close(terms["total"], theirs["generator_loss"], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(d_loss, theirs["discriminator_loss"], rtol=1e-5, atol=1e-7)
    book = released.codebook
    for ours, their_name in ((book.embed, "embedding"), (book.cluster_size, "cluster_size"),
                             (book.embed_avg, "embedding_avg")):
        torch.testing.assert_close(ours, theirs[f"ema_{their_name}"], rtol=1e-5, atol=1e-5, msg=their_name)

"""UQ-Transformer and sampler parity with the authors' released code, from committed fixtures: logits and
training loss (put, tok), greedy sampling order and tokens (1 and 4 tokens per step, all at once), and
`put inpaint --deterministic --no-composite` against their deterministic inpainting PNG."""

from __future__ import annotations

import pytest
import torch

from put.cli import main
from put.models.checkpoint import load_put_model
from put.models.put_model import masked_token_loss
from put.official import import_official, read_overrides
from put.sampling.eager import sample_all_at_once
from put.sampling.schedules import SamplingOptions
from tests.official_fixtures import (
    DEMO_OVERRIDES,
    FIXTURES,
    TINY_OVERRIDES,
    greedy,
    inputs,
    outputs,
    png_difference,
    write_official,
)

ATOL = 1e-5


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """variant -> our transformer checkpoint, imported from their transformer file alone."""
    root = tmp_path_factory.mktemp("official")
    source = write_official(root / "transformer.pth", "transformer_put")  # tok's weights look the same
    return {variant: import_official(root / variant, "demo", transformer=source, variant=variant,
                                     model_overrides=read_overrides(DEMO_OVERRIDES)).transformer
            for variant in ("put", "tok")}


@pytest.mark.parametrize("variant", ["put", "tok"])
def test_logits_and_loss_match_the_released_code(imported, variant):
    model = load_put_model(imported[variant])
    theirs = outputs(f"transformer_{variant}")
    images, keep, _ = inputs()
    with torch.no_grad():  # their random quantization's draws, replayed (tok: quantized inputs, no draws)
        features, known, target = model.transformer_batch(images, keep, theirs["draws"][:, 0])
        logits = model.transformer(features)
    assert (logits - theirs["logits"]).abs().max() <= ATOL
    torch.testing.assert_close(masked_token_loss(logits, target, known), theirs["loss"], rtol=1e-5, atol=0)


@pytest.mark.parametrize("n", [1, 4])
def test_greedy_sampling_order_and_tokens_match_the_released_code(imported, n):
    model = load_put_model(imported["put"])
    theirs = outputs("transformer_put")
    tokens, filled = greedy(model, SamplingOptions(top_k=1, tokens_per_step=n))
    assert torch.equal(filled, theirs[f"sample_n{n}_fill_step"])
    assert torch.equal(tokens, theirs[f"sample_n{n}_tokens"])


def test_all_at_once_matches_the_released_code(imported):
    model = load_put_model(imported["put"])
    images, keep, _ = inputs()
    features, known, tokens = model.transformer_inputs(images, keep)
    result = sample_all_at_once(model, features, known, tokens)
    assert torch.equal(result.flatten(1), outputs("transformer_put")["sample_all_tokens"])


@pytest.mark.parametrize("pair", ["demo", "tiny"])
def test_inpaint_png_matches_their_deterministic_inpainting(imported, tmp_path, pair):
    """Their inference script truncates to uint8 where ours rounds: at most 1 grey level apart. The tiny pair
    is imported from their committed files through the CLI, as a user would."""
    if pair == "demo":
        checkpoint = imported["put"]
    else:
        assert main(["import-official", "--transformer", str(FIXTURES / "official_tiny_transformer.pth"),
                     "--pvqvae", str(FIXTURES / "official_tiny_pvqvae.pth"), "--preset", "demo",
                     "--model-overrides", str(TINY_OVERRIDES), "--out", str(tmp_path / "imported")]) == 0
        checkpoint = tmp_path / "imported" / "transformer.pt"
    prefix = FIXTURES / f"official_{pair}_inpaint"
    assert main(["inpaint", "--checkpoint", str(checkpoint), "--image", f"{prefix}_image.png",
                 "--mask", f"{prefix}_mask.png", "--deterministic", "--no-composite", "--device", "cpu",
                 "--out", str(tmp_path / "out")]) == 0
    assert png_difference(tmp_path / "out" / f"official_{pair}_inpaint_image_000.png", f"{prefix}_official.png") <= 1

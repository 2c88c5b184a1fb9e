"""Code search and the sampler's decisions stay fp32 inside a caller's bf16 autocast (where matmuls would
run in bf16 and near-tied codes, positions and tokens flip)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from put.config import apply_variant
from put.models.put_model import PUTModel
from put.models.quantizer import DualCodebook
from put.sampling.eager import sample_iterative
from put.sampling.schedules import SamplingOptions
from tests.conftest import TINY, random_batch

BF16 = dict(device_type="cpu", dtype=torch.bfloat16)


@pytest.mark.parametrize("variant", ["put", "one"])
def test_code_search_under_bf16_autocast_equals_fp32(variant):
    config = apply_variant(TINY, variant).pvqvae.model_copy(update={"codebook_size": 64, "embed_dim": 64})
    book = DualCodebook(config)
    g = torch.Generator().manual_seed(0)
    # Codes and features close together far from the origin: distances differ in the 4th digit.
    book.embed.copy_(3 + 0.05 * torch.randn(book.embed.shape, generator=g))
    features = 3 + 0.05 * torch.randn(512, 64, generator=g)
    which = torch.randint(0, book.num_books, (512,), generator=g)
    exact = book.nearest(features, which)
    with torch.autocast(**BF16):
        assert torch.equal(book.nearest(features, which), exact)
        assert torch.equal(book.nearest(features.bfloat16(), which), book.nearest(features.bfloat16().float(), which))
        bf16_distances = book.embed.pow(2).sum(1) - 2 * features @ book.embed.t()  # what autocast would compute
    within = bf16_distances.float().view(len(features), book.num_books, -1)[torch.arange(len(features)), which]
    assert not torch.equal(within.argmin(1) + which * config.codebook_size, exact)  # the data can tell


def greedy_sampling(model: PUTModel, tokens_per_step: int, autocast: bool):
    """Tokens and the order of the inputs replaced, from top-1 iterative sampling of fp32 encoder outputs."""
    images, _ = random_batch(2, size=64)
    keep = torch.ones_like(images[:, :1])
    keep[..., 4:60, 12:] = 0  # 48 of 64 patches masked, none fully
    features, known, tokens = model.transformer_inputs(images, keep)
    seen = []
    forward = model.transformer.forward_embedded
    model.transformer.forward_embedded = lambda x: seen.append(x.clone()) or forward(x)
    try:
        with torch.autocast(**BF16, enabled=autocast):
            result = sample_iterative(model, features, known, tokens,
                                      SamplingOptions(top_k=1, tokens_per_step=tokens_per_step))
    finally:
        del model.transformer.forward_embedded
    return result, torch.stack([(a != b).any(-1) for a, b in zip(seen, seen[1:])])


@pytest.mark.parametrize("variant", ["put", "tok"])
@pytest.mark.parametrize("tokens_per_step", [1, 3])
def test_sampling_under_bf16_autocast_equals_fp32(variant, tokens_per_step):
    """The input projection, the head, position scores and top-K are fp32; only the transformer blocks follow
    the caller's precision, so without blocks bf16 autocast must change nothing."""
    torch.manual_seed(0)
    config = apply_variant(TINY.model_copy(update={"image_size": 64}), variant)
    model = PUTModel(config.model_copy(update={"pvqvae": config.pvqvae.model_copy(update={"codebook_size": 256})}))
    model.eval().transformer.blocks = nn.ModuleList()
    with torch.no_grad():
        model.transformer.pos_emb.normal_(std=3)  # positions far apart, logits of a few units
        model.transformer.head.weight.mul_(5)
    exact = greedy_sampling(model, tokens_per_step, autocast=False)
    tokens, order = greedy_sampling(model, tokens_per_step, autocast=True)
    assert torch.equal(tokens, exact[0]) and torch.equal(order, exact[1])

    logits = model.transformer.logits  # the data can tell: a bf16 head changes the result
    model.transformer.logits = lambda x: model.transformer.head(model.transformer.ln_f(x)).float()
    bf16 = greedy_sampling(model, tokens_per_step, autocast=True)
    model.transformer.logits = logits
    assert not (torch.equal(bf16[0], exact[0]) and torch.equal(bf16[1], exact[1]))

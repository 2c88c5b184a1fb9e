"""Forward/backward of every ablation flag, architecture properties and parameter counts."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from put.config import PRESETS, VARIANTS, PVQVAEConfig, apply_variant, model_config
from put.models.discriminator import PatchDiscriminator
from put.models.encoder import ConvEncoder, ConvResBlock, LinearResBlock, PatchEncoder
from put.models.put_model import PUTModel
from put.models.pvqvae import PVQVAE, patch_is_known
from put.models.transformer import MLP, count_parameters, gelu2
from tests.conftest import TINY, random_batch


@pytest.mark.parametrize("encoder,dual,ref", list(itertools.product(["patch", "conv"], [True, False], [True, False])))
def test_pvqvae_forward_backward_every_flag(encoder, dual, ref):
    config = TINY.pvqvae.model_copy(update={"encoder": encoder, "dual_codebook": dual, "reference_branch": ref})
    model = PVQVAE(config).train()
    images, keep = random_batch()
    ref_keep = torch.ones_like(keep)
    ref_keep[:, :, -8:, -8:] = 0
    rec = model(images, keep, ref_keep)
    assert rec.images.shape == images.shape
    assert rec.quantized.indices.shape == (2, 4, 4)
    loss = rec.images.abs().mean() + rec.quantized.commitment
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None for g in grads)
    assert any(g.abs().sum() > 0 for g in model.encoder.parameters() for g in [g.grad])


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_transformer_forward_backward(variant):
    model = PUTModel(apply_variant(TINY, variant))
    model.pvqvae.eval()
    images, keep = random_batch()
    loss = model.transformer_loss(images, keep)
    assert torch.isfinite(loss) and loss > 0
    loss.backward()
    assert all(p.grad is not None for p in model.transformer.parameters())
    assert all(p.grad is None for p in model.pvqvae.parameters())  # the P-VQVAE is frozen in this stage


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_switches(variant):
    config = model_config("ffhq", variant)
    assert (config.pvqvae.encoder == "conv") == (variant == "conv")
    assert config.pvqvae.dual_codebook == (variant != "one")
    assert config.pvqvae.reference_branch == (variant != "no_ref")
    assert (config.transformer.input == "quantized") == (variant == "tok")
    assert config.transformer.random_quant_prob == (0.0 if variant == "qua0" else 0.3)


def test_unknown_variant_and_preset_are_errors():
    with pytest.raises(ValueError, match="unknown variant 'tok2'"):
        model_config("ffhq", "tok2")
    with pytest.raises(ValueError, match="unknown preset 'ffhhq'"):
        model_config("ffhhq")
    with pytest.raises(ValueError, match="codebok_size"):
        PVQVAEConfig(codebok_size=12)


def test_patch_encoder_is_independent_across_patches():
    torch.manual_seed(0)
    encoder = PatchEncoder(TINY.pvqvae).eval()
    images, _ = random_batch(1)
    changed = images.clone()
    changed[:, :, 8:16, 16:24] = torch.rand(1, 3, 8, 8) * 2 - 1  # one 8x8 patch: token (1, 2)
    a, b = encoder(images), encoder(changed)
    differs = (a != b).any(1)[0]
    assert differs[1, 2]
    differs[1, 2] = False
    assert not differs.any(), "a pixel change leaked into another patch's feature"


def test_conv_encoder_mixes_neighbouring_patches():
    torch.manual_seed(0)
    encoder = ConvEncoder(TINY.pvqvae.model_copy(update={"encoder": "conv"})).eval()
    images, _ = random_batch(1)
    changed = images.clone()
    changed[:, :, 8:16, 16:24] += 0.5
    differs = (encoder(images) != encoder(changed)).any(1)[0]
    assert differs.sum() > 1  # the sliding window spreads the change: what ablation `conv` measures


def test_patch_type_decides_the_book():
    model = PVQVAE(TINY.pvqvae).eval()
    images, keep = random_batch()
    keep[0, 0, 0, 0] = 0  # a single hole pixel makes token (0, 0) masked
    q = model.quantize(model.encode(images, keep), keep)
    known = patch_is_known(keep, 8)
    k = TINY.pvqvae.codebook_size
    assert not known[0, 0, 0]
    assert (q.indices[known] < k).all()
    assert (q.indices[~known] >= k).all()


def test_single_book_serves_every_patch():
    model = PVQVAE(TINY.pvqvae.model_copy(update={"dual_codebook": False})).eval()
    images, keep = random_batch()
    q = model.quantize(model.encode(images, keep), keep)
    assert q.indices.max() < TINY.pvqvae.codebook_size
    assert model.codebook.embed.shape[0] == TINY.pvqvae.codebook_size


def test_ema_moves_codes_towards_features():
    model = PVQVAE(TINY.pvqvae).train()
    book = model.codebook
    features = torch.randn(4, 16, 4, 4) * 0.1 + 3.0
    known = torch.ones(4, 4, 4, dtype=torch.bool)
    before = book.embed.clone()
    for _ in range(50):
        q = book(features, known)
    used = q.indices.unique()
    assert (book.embed[used] - 3.0).abs().mean() < (before[used] - 3.0).abs().mean()
    assert torch.equal(book.embed[16:], before[16:])  # book e' untouched by unmasked patches
    assert book.usage(q.indices)["masked"] == 0.0


def test_decoder_reference_branch_copies_known_pixels_region_only_through_mask():
    model = PVQVAE(TINY.pvqvae).eval()
    images, keep = random_batch(1)
    q = model.quantize(model.encode(images, keep), keep)
    other = images.clone()
    other[:, :, :, :] = torch.where(keep.bool(), images, torch.rand_like(images))
    # Hole pixels are set to -1 before they reach the decoder: their values cannot matter.
    assert torch.equal(model.decode(q.vectors, keep, images), model.decode(q.vectors, keep, other))


def test_fused_mlp_equals_reference_gelu2():
    torch.manual_seed(0)
    mlp = MLP(TINY.transformer)
    x = torch.randn(2, 5, 32)
    reference = mlp.proj(gelu2(mlp.fc(x)))
    torch.testing.assert_close(mlp(x), reference, rtol=1e-5, atol=1e-6)
    with torch.inference_mode():
        torch.testing.assert_close(mlp(x), reference.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("preset,paper_millions,code_millions", [
    ("ffhq", 95.0, 95.49), ("places2", 110.7, 111.25), ("imagenet", 441.7, 442.71)])
def test_paper_transformer_parameter_counts(preset, paper_millions, code_millions):
    with torch.device("meta"):
        model = PUTModel(PRESETS[preset].model)
    n = count_parameters(model.transformer) / 1e6
    assert abs(n - paper_millions) / paper_millions < 0.01
    assert round(n, 2) == code_millions


def test_generator_and_discriminator_parameter_counts():
    with torch.device("meta"):
        model = PUTModel(PRESETS["ffhq"].model)
        disc = PatchDiscriminator()
    assert abs(count_parameters(model.pvqvae) / 1e6 - 7.40) / 7.40 < 0.01
    assert count_parameters(disc) == 2_763_776


def test_position_embedding_resizes_for_other_resolutions():
    model = PUTModel(TINY).eval()
    images, keep = random_batch(1, size=48)
    features, known, tokens = model.transformer_inputs(images, keep)
    assert model.transformer(features).shape == (1, 36, TINY.pvqvae.codebook_size)


@pytest.mark.parametrize("variant", ["put", "conv", "one", "no_ref"])
def test_res_blocks_add_relu_of_their_input_as_the_released_in_place_relu_does(variant):
    """The released blocks open with nn.ReLU(inplace=True), which overwrites the input the skip adds back."""
    model = PVQVAE(apply_variant(TINY, variant).pvqvae)
    blocks = [m for m in model.modules() if isinstance(m, (LinearResBlock, ConvResBlock))]
    assert len(blocks) == 2 * TINY.pvqvae.num_res_blocks
    for block in blocks:
        dim = block.fc1.in_features if isinstance(block, LinearResBlock) else block.conv1.in_channels
        x = torch.randn((3, dim) if isinstance(block, LinearResBlock) else (1, dim, 4, 4))
        assert (x < 0).any()
        first, second = (block.fc1, block.fc2) if isinstance(block, LinearResBlock) else (block.conv1, block.conv2)
        torch.testing.assert_close(block(x), x.relu() + second(first(x.relu()).relu()))


@pytest.mark.parametrize("preset,width,base,ladder", [
    ("ffhq", 256, 64, [64, 128, 256, 256]),   # the released FFHQ / Places2 / ImageNet models
    ("demo", 32, 8, [8, 16, 32, 32]),         # the demo preset's own ladder
    ("demo", 32, 64, [64, 128, 256, 32]),     # an authors'-code model with res_ch 32
])
def test_channel_ladder_is_base_times_two_per_level_and_width_at_the_tokens(preset, width, base, ladder):
    config = PRESETS[preset].model.pvqvae.model_copy(update={"width": width, "base_channels": base})
    assert config.level_channels() == ladder
    with torch.device("meta"):
        model = PVQVAE(config)
        conv = ConvEncoder(config)
    assert [(m.in_channels, m.out_channels) for m in model.decoder.up] == list(zip(ladder[:0:-1], ladder[-2::-1]))
    assert [(m.in_channels, m.out_channels) for m in model.decoder.ref_down] == list(zip(ladder, ladder[1:]))
    assert [m.out_channels for m in conv.down] == [base * 2 ** k for k in range(len(ladder) - 2)] + [width]


@pytest.mark.parametrize("ema_update", ["per_book", "released"])
def test_codes_of_a_training_step_are_read_before_the_ema_update(ema_update):
    book = PVQVAE(TINY.pvqvae.model_copy(update={"ema_update": ema_update, "codebook_init": "randn"})).train().codebook
    features = torch.randn(2, 16, 4, 4)
    known = torch.rand(2, 4, 4) > 0.3
    before = book.embed.clone()
    q = book(features, known)
    assert not torch.equal(book.embed, before)  # the EMA moved the table...
    expected = before[q.indices].permute(0, 3, 1, 2)
    torch.testing.assert_close(q.vectors, features + (expected - features))  # ...after the codes were read


def test_released_ema_smooths_over_the_whole_table_and_decays_every_code():
    """The released update: decayed counts and sums for every code, Laplace smoothing over all 2K codes."""
    config = TINY.pvqvae.model_copy(update={"ema_update": "released", "codebook_init": "randn"})
    book = PVQVAE(config).train().codebook
    book.cluster_size.uniform_(0.5, 2.0)
    size, avg = book.cluster_size.clone(), book.embed_avg.clone()
    features = torch.randn(1, 16, 4, 4)
    known = torch.ones(1, 4, 4, dtype=torch.bool)  # book e' gets nothing, yet decays
    q = book(features, known)
    onehot = F.one_hot(q.indices.flatten(), len(size)).float()
    size = size * 0.99 + onehot.sum(0) * 0.01
    avg = avg * 0.99 + (features.permute(0, 2, 3, 1).reshape(-1, 16).t() @ onehot).t() * 0.01
    n = size.sum()
    torch.testing.assert_close(book.cluster_size, size)
    torch.testing.assert_close(book.embed, avg / ((size + 1e-5) / (n + len(size) * 1e-5) * n).unsqueeze(1))


@pytest.mark.parametrize("decoder_keep", ["reference", "product"])
def test_decoder_keep_mask_in_training(decoder_keep):
    """released: the decoder is told only the reference mask m'; pixels erased by m show -1 there. paper: m x m'."""
    model = PVQVAE(TINY.pvqvae.model_copy(update={"decoder_keep": decoder_keep})).eval()
    images, erase = random_batch()
    ref = torch.ones_like(erase)
    ref[..., -8:, :] = 0
    rec = model(images, erase, ref)
    keep = ref if decoder_keep == "reference" else erase * ref
    assert torch.equal(rec.ref_keep, keep)
    expected = model.decode(model.codebook.lookup(rec.quantized.indices), keep, rec.target)
    torch.testing.assert_close(rec.images, expected)
    no_ref = PVQVAE(TINY.pvqvae.model_copy(update={"decoder_keep": decoder_keep, "reference_branch": False}))
    assert no_ref(images, erase, ref).ref_keep is None  # losses then cover the whole image

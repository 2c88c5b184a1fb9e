"""Parity with the authors' TPAMI 2024 code (branch main), from committed fixtures (their code need not be
present): the P-VQVAE's encoder features, code indices of both (unequal) books, Gumbel-sampled codes and
decoder output at patch 8 and 16 and with ImageNet pixels; the ViT's logits and training loss; the tokens of
their sample() under every schedule form; their inpainting PNG; every key and the parameter count of their
full-size models; `put import-official` on their checkpoint layout, and the generation checks."""

from __future__ import annotations

import json

import pytest
import torch

from put.cli import main
from put.config import PRESETS
from put.config.training import GumbelConfig
from put.models.checkpoint import load_put_model, load_pvqvae
from put.models.discriminator import PatchDiscriminator
from put.models.put_model import PUTModel, masked_token_loss
from put.models.quantizer import GumbelDraw
from put.models.transformer import count_parameters
from put.official import import_official
from put.official.keys import (
    KeyMappingError,
    check_against,
    pvqvae_state,
    split_transformer_checkpoint,
    transformer_state,
)
from put.sampling.schedules import SamplingOptions
from tests.official_fixtures import (
    FIXTURES,
    TPAMI_FIXTURES,
    TPAMI_MANIFEST,
    greedy,
    inputs,
    png_difference,
    write_official,
)
from tests.official_fixtures import outputs as read_outputs

ATOL = 1e-5
PRESET = "demo_tpami"  # the fixtures' sizes are given as overrides of this TPAMI preset
CODECS = tuple(TPAMI_MANIFEST["codecs"])
FULL = json.loads((TPAMI_FIXTURES / "official_full_layouts.json").read_text())
TPAMI_PRESETS = {f"{name}_tpami{res}": f"{theirs}_res{res}" for name, theirs in
                 (("ffhq", "ffhq"), ("places2", "naturalscene"), ("imagenet", "imagenet")) for res in (256, 512)}


def outputs(name: str) -> dict[str, torch.Tensor]:
    return read_outputs(name, TPAMI_FIXTURES)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """name -> our checkpoint, imported from their checkpoint layout: P-VQVAEs from their codec files,
    transformers from their transformer files alone (content_codec inside)."""
    root = tmp_path_factory.mktemp("tpami")
    paths = {}
    for name in TPAMI_MANIFEST["layouts"]:
        source = write_official(root / f"{name}.pth", name, TPAMI_MANIFEST)
        kind = "pvqvae" if name.startswith("pvqvae") else "transformer"
        result = import_official(root / name, PRESET, **{kind: source},
                                 model_overrides=TPAMI_MANIFEST["overrides"][name])
        assert result.variant == "put" and result.config.generation == "tpami2024"
        paths[name] = getattr(result, kind)
    return paths


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape
    return (a.float() - b.float()).abs().max().item()


@pytest.mark.parametrize("codec", CODECS)
def test_features_codes_and_decoder_match_their_tpami_codec(imported, codec):
    model, _ = load_pvqvae(imported[f"pvqvae_{codec}"])
    theirs = outputs(f"pvqvae_{codec}")
    images, keep, _ = inputs()
    with torch.no_grad():
        features = model.encode(images, keep)
        assert max_diff(features, theirs["features"]) <= ATOL
        assert torch.equal(model.patch_known(keep), theirs["token_known"])
        assert torch.equal(model.known_fraction(keep), theirs["unmask_ratio"])
        assert torch.equal(model.quantize(features, keep).indices, theirs["tokens"])
        assert torch.equal(model.target_tokens(images), theirs["target_tokens"])
        assert torch.equal(model.quantize(theirs["search_features"], keep).indices, theirs["search_tokens"])
        decoded = model.to_network(model.decode(model.codebook.lookup(theirs["tokens"]), keep, images))
        # float32 rounding through the deeper decoder grows with its outputs (up to 30 with these weights):
        # 1e-5 of the largest; in float64 the two agree to 3e-13 (docs/fidelity.md)
        assert max_diff(decoded, theirs["decoded"]) <= ATOL * theirs["decoded"].abs().max()


def test_gumbel_sampled_codes_match_their_training_quantizer(imported):
    """Their training-mode quantizer draws -log(Exp(1)) noise per candidate (known patches, then masked ones):
    the same noise, given to ours as uniforms u = exp(-e), picks the same codes, whatever their temperature."""
    model, _ = load_pvqvae(imported["pvqvae_p8"])
    theirs = outputs("pvqvae_p8")
    _, keep, _ = inputs()
    gumbel = TPAMI_MANIFEST["gumbel"]
    schedule = GumbelConfig(scale=(gumbel["gumbel_scale_init"], gumbel["gumbel_scale_dest"]),
                            ramp=tuple(gumbel["gumbel_scale_step_range"]), until=gumbel["gumbel_sample_stop_step"])
    known = model.patch_known(keep).reshape(-1)
    k = model.config.codebook_size
    uniform = torch.full((len(known), len(model.codebook.embed)), 0.5)
    uniform[known, :k] = torch.exp(-theirs["gumbel_exponential_known"])
    uniform[~known, k:] = torch.exp(-theirs["gumbel_exponential_masked"])
    flat = theirs["search_features"].permute(0, 2, 3, 1).reshape(-1, model.config.embed_dim)
    draw = GumbelDraw(schedule.noise_scale(TPAMI_MANIFEST["gumbel_step"]), uniform)
    indices = model.codebook.nearest(flat, model.codebook.book_of(known), draw)
    assert torch.equal(indices.view_as(theirs["gumbel_tokens"]), theirs["gumbel_tokens"])
    assert not torch.equal(theirs["gumbel_tokens"], theirs["search_tokens"])  # the noise changed some codes


@pytest.mark.parametrize("name", tuple(TPAMI_MANIFEST["transformers"]))
def test_vit_logits_and_loss_match_their_tpami_transformer(imported, name):
    model = load_put_model(imported[f"transformer_{name}"])
    theirs = outputs(f"transformer_{name}")
    images, keep, _ = inputs()
    poly = 1.0 if TPAMI_MANIFEST["transformers"][name]["poly"] else 0.0
    with torch.no_grad():  # their random quantization's draws, replayed
        features, known, target = model.transformer_batch(images, keep, theirs["draws"][:, 0])
        logits = model.transformer(features, model.pvqvae.known_fraction(keep))
    assert max_diff(logits, theirs["logits"].flatten(1, 2)) <= ATOL
    torch.testing.assert_close(masked_token_loss(logits, target, known, poly_epsilon=poly), theirs["loss"],
                               rtol=1e-5, atol=0)


def ranks(filled: torch.Tensor) -> torch.Tensor:
    """Fill steps as dense ranks (known positions stay -1): their loop spends forwards on steps that fix
    nothing (a count rounded to 0), which ours skips; the order is what must agree."""
    steps = torch.unique(filled[filled >= 0])
    return torch.where(filled >= 0, torch.searchsorted(steps, filled.clamp_min(0)), -1)


@pytest.mark.parametrize("schedule", [str(s) for s in TPAMI_MANIFEST["schedules"]])
def test_greedy_tokens_of_their_sample_under_each_schedule(imported, schedule):
    model = load_put_model(imported["transformer_vit"])
    theirs = outputs("transformer_vit")
    key = schedule.replace("-1", "all")
    tokens, filled = greedy(model, SamplingOptions(top_k=1, schedule=schedule, schedule_scope="batch"))
    assert torch.equal(tokens, theirs[f"sample_{key}_tokens"])
    assert torch.equal(ranks(filled), ranks(theirs[f"sample_{key}_fill_step"]))


def test_inpaint_png_matches_their_tpami_inpainting(imported, tmp_path):
    """`put inpaint --deterministic --no-composite` on their all-at-once top-1 inpainting (truncated to uint8
    where ours rounds: at most one grey level apart)."""
    prefix = TPAMI_FIXTURES / "official_vit_inpaint"
    assert main(["inpaint", "--checkpoint", str(imported["transformer_vit"]), "--image", f"{prefix}_image.png",
                 "--mask", f"{prefix}_mask.png", "--deterministic", "--no-composite", "--device", "cpu",
                 "--out", str(tmp_path)]) == 0
    assert png_difference(tmp_path / "official_vit_inpaint_image_000.png", f"{prefix}_official.png") <= 1


def meta_state(layout: dict) -> dict[str, torch.Tensor]:
    return {k: torch.empty(shape, device="meta") for k, shape in layout.items()}


@pytest.mark.parametrize("preset", TPAMI_PRESETS)
def test_full_size_tpami_models_map_key_for_key_with_their_parameter_counts(preset):
    """Their configs' P-VQVAE (with its losses) and ViT (with its content_codec), built by their code: every
    tensor lands on one of ours with its shape, and the parameter counts are theirs."""
    official = FULL[TPAMI_PRESETS[preset]]
    with torch.device("meta"):
        model, disc = PUTModel(PRESETS[preset].model), PatchDiscriminator()
    ours, theirs_disc = pvqvae_state(meta_state(official["pvqvae"]["layout"]))
    ours.add("codebook.initialized", model.pvqvae.codebook.initialized, "(set by the importer)")
    check_against(ours, model.pvqvae.state_dict(), "P-VQVAE")
    check_against(theirs_disc, disc.state_dict(), "discriminator")
    _, own = split_transformer_checkpoint(meta_state(official["transformer"]["layout"]))
    check_against(transformer_state(own), model.transformer.state_dict(), "transformer")
    assert count_parameters(model.transformer) == official["transformer"]["parameters"]
    assert count_parameters(model.pvqvae) == official["pvqvae"]["parameters"]


@pytest.mark.parametrize("preset", ["ffhq_tpami256", "ffhq_tpami512"])
def test_put_info_prints_the_released_sizes(preset, capsys):
    assert main(["info", "--preset", preset, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    official = FULL[TPAMI_PRESETS[preset]]
    assert printed["parameters"]["transformer"] == official["transformer"]["parameters"] == 92_331_008
    assert printed["parameters"]["pvqvae_generator"] == official["pvqvae"]["parameters"]
    assert printed["token_grid"] == [32, 32]


def test_a_checkpoint_of_the_other_generation_is_refused_naming_the_presets_that_fit(tmp_path, capsys):
    tpami = write_official(tmp_path / "tpami.pth", "transformer_vit", TPAMI_MANIFEST)
    cvpr = FIXTURES / "official_tiny_transformer.pth"
    out = tmp_path / "out"
    assert main(["import-official", "--transformer", str(tpami), "--preset", "ffhq", "--out", str(out)]) == 2
    message = capsys.readouterr().err.strip()
    assert "holds a TPAMI 2024 model, but preset 'ffhq' is CVPR 2022" in message and "ffhq_tpami256" in message
    assert len(message.splitlines()) == 1 and not out.exists()
    assert main(["import-official", "--transformer", str(cvpr), "--preset", "ffhq_tpami256", "--out", str(out)]) == 2
    assert "holds a CVPR 2022 model, but preset 'ffhq_tpami256' is TPAMI 2024" in capsys.readouterr().err
    with pytest.raises(KeyMappingError, match="expected a CVPR 2022 preset"):
        import_official(out, "demo_tpami", transformer=cvpr)

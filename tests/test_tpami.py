"""The TPAMI 2024 pieces on tiny CPU tensors: every switch forward and backward, Gumbel sampling of codes, the
unequal books' EMA, drop path, the mask embedding's input, the release's schedules through the one sampler and
engine, the tpami variant's settings, and bad input (a schedule, a checkpoint of the other release, a cache of
the wrong size)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from put.cli import main
from put.config import TPAMI_VARIANT, ModelConfig, PVQVAEConfig, TransformerConfig, model_config
from put.config.evaluation import SampleConfig, parse_schedule
from put.config.params import ParamsError, load_params, params_from_mapping
from put.config.training import GumbelConfig
from put.errors import InputError
from put.masks.strokes import stroke_keep_mask
from put.models.checkpoint import CheckpointError, load_put_model
from put.models.put_model import PUTModel, masked_token_loss
from put.models.pvqvae import PVQVAE
from put.models.quantizer import GumbelDraw
from put.sampling.eager import sample_iterative
from put.sampling.engine import SamplingEngine
from put.sampling.schedules import SamplingOptions, released_counts, static_shape, step_counts
from tests.conftest import random_batch

TINY_TPAMI = ModelConfig(
    generation="tpami2024", image_size=32,
    pvqvae=PVQVAEConfig(embed_dim=16, width=16, base_channels=4, num_res_blocks=1, decoder_res_blocks=1,
                        decoder_level_res_blocks=1, upsample="nearest", codebook_size=16, masked_codebook_size=4),
    transformer=TransformerConfig(n_layer=2, n_head=2, n_embd=32, attention_bias="qv", drop_path=0.1,
                                  mask_embedding=True, init="beit"),
)


@pytest.mark.parametrize("pixel_norm", ["signed", "imagenet"])
@pytest.mark.parametrize("gumbel", [False, True])
def test_tpami_pvqvae_forward_backward(pixel_norm, gumbel):
    config = TINY_TPAMI.pvqvae.model_copy(update={"pixel_norm": pixel_norm})
    model = PVQVAE(config).train()
    images, keep = random_batch()
    draw = GumbelDraw(0.5, torch.rand(2 * 16, 20)) if gumbel else None
    rec = model(images, keep, keep, draw)
    assert rec.images.shape == images.shape and len(model.codebook.embed) == 20
    known = model.patch_known(keep)
    assert (rec.quantized.indices[known] < 16).all() and (rec.quantized.indices[~known] >= 16).all()
    (rec.images.abs().mean() + rec.quantized.commitment).backward()
    assert all(p.grad is not None for p in model.parameters())
    if pixel_norm == "signed":  # the identity: CVPR parity and the demo's numbers stay bit for bit
        assert torch.equal(model.to_network(images), images)
    torch.testing.assert_close(model.from_network(model.to_network(images)), images)


def test_gumbel_noise_scale_follows_the_released_step_schedule():
    gumbel = GumbelConfig(scale=(1.0, 0.1), ramp=(3000, 3001), until=30000)
    assert [gumbel.noise_scale(s) for s in (0, 3000, 3001, 20000)] == [1.0, 1.0, 0.1, 0.1]
    assert gumbel.noise_scale(30001) is None and GumbelConfig().noise_scale(10 ** 9) == pytest.approx(0.1)


def test_gumbel_codes_stay_in_their_book_and_vary_with_the_noise():
    model = PVQVAE(TINY_TPAMI.pvqvae).train()
    features = torch.randn(64, 16)
    book = torch.arange(64) % 2
    nearest = model.codebook.nearest(features, book)
    drawn = model.codebook.nearest(features, book, GumbelDraw(5.0, torch.rand(64, 20)))
    assert ((drawn >= 16) == (book == 1)).all() and not torch.equal(drawn, nearest)
    assert torch.equal(model.codebook.nearest(features, book, GumbelDraw(0.0, torch.rand(64, 20))), nearest)


def test_per_book_ema_leaves_a_book_without_features_as_it_is():
    model = PVQVAE(TINY_TPAMI.pvqvae.model_copy(update={"codebook_init": "randn"})).train()
    before = model.codebook.embed.clone()
    model.codebook._ema_update(torch.randn(8, 16), torch.arange(8))  # book e only
    assert torch.equal(model.codebook.embed[16:], before[16:]) and not torch.equal(model.codebook.embed[:16],
                                                                                    before[:16])
    assert model.codebook.usage(torch.tensor([0, 1, 16])) == {"unmasked": 2 / 16, "masked": 1 / 4}


def test_tpami_transformer_switches():
    model = PUTModel(TINY_TPAMI)
    blocks = model.transformer.blocks
    assert [b.drop_path for b in blocks] == [0.0, 0.1] and blocks[0].attn.qkv.bias is None
    assert torch.equal(blocks[0].attn.q_bias, torch.zeros(32))  # their init; the key has no bias at all
    images, keep = random_batch()
    features, known, target = model.transformer_batch(images, keep)
    with pytest.raises(ValueError, match="pass known_fraction"):
        model.transformer(features)
    model.transformer.eval()
    fraction = model.pvqvae.known_fraction(keep)
    assert ((fraction > 0) & (fraction < 1)).any()  # partly known patches get part of the mask embedding
    model.transformer.mask_emb.data.normal_()
    partial = model.transformer(features, fraction)
    binary = model.transformer(features, known.float())
    assert not torch.allclose(partial, binary)
    model.transformer.train()
    loss = model.transformer_loss(images, keep, poly_epsilon=1.0)
    loss.backward()
    assert all(p.grad is not None for p in model.transformer.parameters())


def test_poly_loss_adds_epsilon_times_one_minus_the_target_probability():
    logits, target = torch.randn(2, 5, 7), torch.randint(7, (2, 5))
    known = torch.zeros(2, 5, dtype=torch.bool)
    ce = masked_token_loss(logits, target, known)
    p = logits.softmax(-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(masked_token_loss(logits, target, known, poly_epsilon=1.0), ce + (1 - p).mean())


def test_rectangles_are_cleared_from_each_stroke_alone():
    common = dict(keep_ratio=(0.3, 0.6), min_vertices=5, max_vertices=10, max_length=100, min_brush=10,
                  max_brush=30, max_angle=360, min_area=64)
    plain = stroke_keep_mask((64, 64), np.random.default_rng(0), **common)
    again = stroke_keep_mask((64, 64), np.random.default_rng(0), **common, rectangles=(0, 0))
    assert np.array_equal(plain, again)  # no rectangle: the same draws as before
    carved = [stroke_keep_mask((64, 64), np.random.default_rng(s), **common, rectangles=(3, 3)) for s in range(5)]
    assert all(m.mean() >= 0.3 for m in carved)


@pytest.mark.parametrize("schedule", ["cosine_4", "linear_3", "average_5", "cosine-1_4", "linear-1_6"])
def test_released_schedules_fix_every_position_in_their_steps(schedule):
    name, steps = parse_schedule(schedule)
    masked = torch.tensor([0, 1, 3, 17, 64])
    for scope in ("image", "batch"):
        counts = step_counts(masked, schedule=schedule, scope=scope)
        assert counts.shape[0] == steps and (counts >= 0).all() and torch.equal(counts.sum(0), masked)
    assert released_counts("cosine", 4, 577) == [231, 197, 115, 34]  # many first: cos(pi s / S) + 1
    assert static_shape(SamplingOptions(schedule=schedule), 64)[0] == steps


def test_schedule_strings_and_their_errors():
    assert SamplingOptions(schedule="4").tokens_per_step == 4 and SamplingOptions(schedule="4").schedule is None
    assert SamplingOptions(schedule="-1").tokens_per_step >= 2 ** 31
    for bad in ("cosin_4", "cosine_0", "cosine", "fast"):
        with pytest.raises(InputError, match="unknown sampling schedule"):
            SamplingOptions(schedule=bad)
    with pytest.raises(ValueError, match="unknown sampling schedule"):
        SampleConfig(schedule="cosine-4")


def test_a_schedule_runs_through_the_one_sampler_and_the_engine_alike():
    torch.manual_seed(0)
    model = PUTModel(TINY_TPAMI).eval()
    images, keep = random_batch(3)
    keep[2] = 1
    keep[2, :, :8, :8] = 0  # fewer masked patches: image scope gives it its own schedule
    features, known, tokens = model.transformer_inputs(images, keep)
    fraction = model.pvqvae.known_fraction(keep)
    options = SamplingOptions(top_k=3, schedule="cosine_3")
    calls = []
    forward = model.transformer.forward_embedded
    model.transformer.forward_embedded = lambda x: calls.append(1) or forward(x)
    eager = sample_iterative(model, features, known, tokens, options, seed=1, known_fraction=fraction)
    del model.transformer.forward_embedded
    assert len(calls) == 3 and torch.equal(eager[known], tokens[known])
    engine = SamplingEngine(model, 3, (4, 4), options).run(features, known, tokens, seed=1, known_fraction=fraction)
    assert torch.equal(engine, eager)


def test_the_tpami_variant_trains_its_tpami_presets_model_and_settings(tmp_path):
    params = load_params(None)  # demo
    assert params.variant_config(TPAMI_VARIANT) == model_config("demo_tpami")
    assert model_config("demo", TPAMI_VARIANT) == model_config("demo_tpami")
    tpami = params.resolved_for(TPAMI_VARIANT)
    assert tpami.transformer_train.poly_epsilon == 1.0 and tpami.pvqvae_train.gumbel is not None
    assert tpami.sample == params.resolved().sample and tpami.data == params.resolved().data  # same protocol
    assert params.resolved_for("put").transformer_train.poly_epsilon == 0.0
    assert params.replicate(2).resolved_for(TPAMI_VARIANT).transformer_train.seed == 2
    assert params.resolved_document()["tpami"]["transformer_train"]["poly_epsilon"] == 1.0
    own = load_params(None, preset="ffhq_tpami512")
    assert own.variant_config(TPAMI_VARIANT) == own.variant_config("put")  # in a TPAMI preset: the preset itself
    with pytest.raises(ParamsError, match="names no TPAMI preset"):
        params_from_mapping({"preset": "ffhq", "overrides": {"tpami_preset": None}}, "test")


def test_a_checkpoint_of_the_other_release_is_refused(tmp_path, tiny_checkpoints):
    _, _, transformer = tiny_checkpoints  # a CVPR model
    with pytest.raises(CheckpointError, match="holds a CVPR 2022 model, but --variant tpami expects a TPAMI 2024"):
        load_put_model(transformer, variant=None, label="tpami", generation="tpami2024")


def test_a_prepared_cache_of_another_size_is_refused(tmp_path, capsys):
    """A 512 px preset given 256 px prepared images, in small: prepared at 32 px, trained at 64."""
    small = tmp_path / "small.yaml"
    small.write_text("preset: demo\noverrides: {model: {image_size: 32}, data: {eval_count: 4}}\n")
    assert main(["split", "--params", str(small), "--out", str(tmp_path / "splits")]) == 0
    assert main(["prepare", "--params", str(small), "--split", str(tmp_path / "splits"),
                 "--out", str(tmp_path / "prepared")]) == 0
    capsys.readouterr()
    out = tmp_path / "pvqvae.pt"
    assert main(["train-pvqvae", "--preset", "demo", "--variant", "tpami", "--split", str(tmp_path / "splits"),
                 "--prepared", str(tmp_path / "prepared"), "--out", str(out)]) == 2
    message = capsys.readouterr().err.strip().splitlines()
    assert len(message) == 1 and "prepared with other settings" in message[0] and "64" in message[0]
    assert not out.exists()


def test_the_releases_side_by_side_with_intervals_marks_and_both_frontiers(tmp_path):
    """The report's comparison: CVPR and TPAMI rows per metric and mode with their intervals, a dagger where the
    paired difference survives its family's correction; diversity per bin; the two frontiers in one figure."""
    import pandas as pd

    from put.report.generations import diversity_table, generations_table, plot_generations_frontier
    from put.report.latex import render_latex
    from tests.report_data import synthetic_curves, synthetic_metrics

    metrics = synthetic_metrics()
    metrics = pd.concat([metrics, metrics[metrics["variant"] == "put"].assign(variant="tpami", psnr=30.123)])
    metrics["psnr_lo"], metrics["psnr_hi"] = metrics["psnr"] - 0.5, metrics["psnr"] + 0.5
    differences = pd.DataFrame([{"variant": "tpami", "reference": "put", "mode": "k50", "group": group,
                                 "metric": "psnr", "p": p, "significant": p < 0.01, "method": "holm",
                                 "no_interval": ""} for group, p in (("40-60", 1e-4), ("20-40", 0.2))])
    latex = render_latex(generations_table(metrics, "demo", differences, SampleConfig()))
    assert latex.count("PUT, CVPR 2022") == 8 and latex.count("PUT, TPAMI 2024") == 8  # 4 metrics x 2 modes
    assert r"\textbf{30.123}$^{\dagger}${\scriptsize$\pm$0.50}" in latex and latex.count(r"$^{\dagger}$") == 2
    assert "the TPAMI model differs from the CVPR one: a mark where the difference survives Holm" in latex
    assert "over the family of the 2 differences (2 tested; 1 marked;" in latex
    curves = pd.concat([synthetic_curves(lpips_unavailable=False)]).query("variant == 'put'")
    curves = pd.concat([curves, curves.assign(variant="tpami", lpips=0.2)])
    assert render_latex(diversity_table(curves, "demo")).count("0.2000") == 5
    frame = pd.DataFrame([{"setting": "tps1_k50", "label": "1", "family": "tokens_per_step", "value": 1,
                           "top_k": 50, "group": "40-60", "forward_passes": f, "seconds_per_image": 0.1,
                           "psnr": p, "ssim": 0.5, "mae": 0.1, "lpips": float("nan"), "fid": float("nan")}
                          for f, p in ((10, 20.0), (2, 18.0))])
    assert plot_generations_frontier({"put": frame, "tpami": frame.assign(psnr=21.0)},
                                     tmp_path / "both.png").stat().st_size > 0


def test_the_speed_table_names_the_tpami_transformer_at_both_sizes():
    from put.report.latex import render_latex
    from put.report.speed import speed_table
    from tests.report_data import bench_result

    rows = [bench_result("ffhq", tokens_per_second=0.9, generation="cvpr2022"),
            bench_result("ffhq_tpami256", tokens_per_second=1.4, generation="tpami2024"),
            bench_result("ffhq_tpami512", tokens_per_second=1.3, generation="tpami2024"),
            bench_result("demo_tpami", tokens_per_second=70.0, generation="tpami2024")]
    latex = render_latex(speed_table(rows))
    assert r"demo\_tpami preset" in latex  # a preset name with an underscore, escaped for LaTeX
    assert "TPAMI 2024 size, 12 layers x 768, 256 px" in latex and "TPAMI 2024 size, 12 layers x 768, 512 px" in latex
    assert "paper size, 30 layers x 512, 256 px" in latex


def test_an_official_entry_runs_their_tpami_weights_under_a_cvpr_presets_protocol(tmp_path):
    """params.yaml's `official` entry names the preset its weights belong to: `put import-official --official`
    converts their TPAMI checkpoint layout (the parity weights) and the stages then expect a TPAMI model."""
    import json

    import yaml

    from tests.official_fixtures import TPAMI_MANIFEST, write_official

    source = write_official(tmp_path / "vit.pth", "transformer_vit", TPAMI_MANIFEST)
    entry = {"transformer": str(source), "preset": "demo_tpami",
             "model": TPAMI_MANIFEST["overrides"]["transformer_vit"]}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"preset": "demo", "official": {"release": entry}}))
    assert main(["import-official", "--params", str(path), "--official", "release", "--out", str(tmp_path / "o")]) == 0
    params = load_params(path)
    assert params.label_generation("official_release") == "tpami2024" and params.label_generation("put") == "cvpr2022"
    model = load_put_model(tmp_path / "o" / "transformer.pt", generation=params.label_generation("official_release"),
                           label="official_release")
    assert model.config.transformer.mask_embedding and json.dumps(params.resolved_document())

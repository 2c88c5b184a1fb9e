"""Model / loss / sampler parity fixtures from the authors' released PUT code (branch cvpr2022).

Builds their P-VQVAE (variants put, conv, one, no_ref) and UQ-Transformer (put, tok) at the demo preset's
sizes with seeded weights (tools/parity/seeded_weights.py), runs them on CPU on fixed inputs, and writes
what they compute to tests/fixtures/parity/models/; the parity tests compare ours against it without
the authors' code present. Their files are only read and imported, never edited; the shims of common.py adapt
the environment (current numpy / Python, no network for VGG19 weights).

    .venv/bin/python tools/parity/make_model_fixtures.py --official /path/to/PUT

See tests/fixtures/parity/models/README.md for what each file holds.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    CODEC,
    aliases,
    arguments,
    decoded,
    forward_outputs,
    generate,
    inputs,
    instantiate,
    layout,
    manifest_header,
    released_config,
    seed_module,
    spread_features,
    write_png_inputs,
)

LOSS_START = 10  # disc/content/style/gradient start of the loss fixtures (all terms on at that step)
# The demo preset's sizes; the authors' code fixes the ladder at 64 * 2^level.
DEMO = dict(image=64, patch=8, e_dim=64, res_ch=32, num_res_block=2, K=128, n_layer=4, n_head=4, n_embd=128)
# A pair small enough to commit as files in the authors' checkpoint format.
TINY = dict(image=16, patch=2, e_dim=8, res_ch=8, num_res_block=1, K=8, n_layer=1, n_head=2, n_embd=16)
PVQVAE_VARIANTS = ("put", "conv", "one", "no_ref")
TRANSFORMER = "image_synthesis.modeling.models.masked_image_inpainting_transformer_in_feature"
FULL_SIZE = {"ffhq": "ffhq/{}_ffhq.yaml", "places2": "naturalscene/{}_naturalscene.yaml",
             "imagenet": "imagenet/{}_imagenet.yaml"}


def codec_config(s: dict, variant: str, with_loss: bool, ckpt_path: str | None = None) -> dict:
    """Their PatchVQGAN config as in configs/put_cvpr2022 (FFHQ), at the sizes `s`."""
    dual = variant != "one"
    common = dict(res_ch=s["res_ch"], num_res_block=s["num_res_block"], res_block_bottleneck=2, stride=s["patch"])
    encoder = dict(target=f"{CODEC}.{'PatchConvEncoder2' if variant == 'conv' else 'PatchEncoder2'}",
                   params=dict(in_ch=3, out_ch=s["e_dim"], **common))
    decoder = dict(target=f"{CODEC}.PatchConvDecoder2",
                   params=dict(in_ch=s["e_dim"], out_ch=3, up_layer_with_image=variant != "no_ref",
                               encoder_downsample_layer="conv", **common))
    quantizer = dict(target=f"{CODEC}.VectorQuantizer", params=dict(
        n_e=2 * s["K"] if dual else s["K"], e_dim=s["e_dim"], masked_embed_start=s["K"] if dual else None,
        embed_ema=True, get_embed_type="retrive", distance_type="euclidean"))
    side = s["image"] // s["patch"]
    params = dict(trainable=with_loss, token_shape=[side, side], quantizer_config=quantizer,
                  encoder_config=encoder, decoder_config=decoder, ckpt_path=ckpt_path)
    if with_loss:
        params["lossconfig"] = dict(target="image_synthesis.modeling.modules.edge_connect.losses.EdgeConnectLoss",
                                    params=dict(gan_loss="nsgan", g_gradient_loss_weight=5.0, disc_start=LOSS_START,
                                                content_start=LOSS_START, style_start=LOSS_START,
                                                gradient_start=LOSS_START))
    return dict(target=f"{CODEC}.PatchVQGAN", params=params)


def transformer_config(s: dict, variant: str, codec: dict) -> dict:
    return dict(target=f"{TRANSFORMER}.MaskedImageInpaintingTransformer", params=dict(
        n_layer=s["n_layer"], content_seq_len=(s["image"] // s["patch"]) ** 2, n_embd=s["n_embd"],
        n_head=s["n_head"], num_token=s["K"], embd_pdrop=0.0, attn_pdrop=0.0, resid_pdrop=0.0,
        attn_content_with_mask=False, mlp_hidden_times=4, block_activate="GELU2", random_quantize=0.3,
        weight_decay=0.01, input_feature_type="quantized" if variant == "tok" else "origin",
        content_codec_config=codec))


def our_model_overrides(s: dict) -> dict:
    """The same sizes as ModelConfig fields: what `put import-official --model-overrides` takes."""
    return {"image_size": s["image"],
            "pvqvae": {"patch_size": s["patch"], "embed_dim": s["e_dim"], "width": s["res_ch"], "base_channels": 64,
                       "num_res_blocks": s["num_res_block"], "codebook_size": s["K"]},
            "transformer": {"n_layer": s["n_layer"], "n_head": s["n_head"], "n_embd": s["n_embd"]}}


def pvqvae_outputs(codec, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from image_synthesis.modeling.utils.misc import get_token_type

    images = torch.from_numpy(data["images"]).float()
    keep, erase = torch.from_numpy(data["keep"]), torch.from_numpy(data["erase"])
    out = {}
    codec.eval()
    with torch.no_grad():
        got = codec.get_features(images, mask=keep, return_token=True)
        token_shape = got["token_shape"]
        out["features"] = got["feature"]
        out["tokens"] = got["token"]
        out["token_known"] = (get_token_type(keep, token_shape) == 1)[:, 0]
        out["target_tokens"] = codec.get_features(images, return_token=True)["token"]
        out["decoded"] = decoded(codec, got["token"], images, keep)
        out["search_features"] = spread_features(out["features"])
        token_type = out["token_known"][:, None].long()  # 1: unmasked patch
        out["search_tokens"] = codec.quantize(out["search_features"], token_type=token_type)["index"]

    # One training batch with every loss term on: the image erased by `erase`, reference mask `keep`.
    codec.train()
    batch = {"image": images * erase.float(), "erase_mask": erase.float(), "mask": keep}
    gen = codec(batch, name="generator", step=LOSS_START)
    out["train_reconstruction"] = codec.rec_tmp
    disc = codec(batch, name="discriminator", step=LOSS_START)
    for name, value in gen.items():
        if "loss" in name:
            out[f"generator_{name}"] = value
    for name, value in disc.items():
        out[f"discriminator_{name}"] = value
    for name in ("embedding", "cluster_size", "embedding_avg"):  # after one EMA update
        out[f"ema_{name}"] = getattr(codec.quantize, name)
    return {k: v.detach().numpy() for k, v in out.items()}


@contextlib.contextmanager
def recording_positions(steps: list):
    """Their sample_largest one-hot encodes the positions it picks each step: record them."""
    one_hot = torch.nn.functional.one_hot

    def spy(index, num_classes=-1):
        steps.append(index.clone())
        return one_hot(index, num_classes)

    torch.nn.functional.one_hot = spy
    try:
        yield
    finally:
        torch.nn.functional.one_hot = one_hot


def fill_steps_from_picks(known: torch.Tensor, steps: list[torch.Tensor]) -> np.ndarray:
    """(B, L) step at which each position got its token (-1: known), from the positions picked per step
    for the rows still unfinished (their batch_idx); picks of already known positions are skipped, as they do.
    Not make_tpami_fixtures.fill_steps_from_inputs: this loop forwards only the unfinished rows, so the inputs of
    two steps do not line up row by row."""
    filled = torch.where(known, -1, -2)
    for step, index in enumerate(steps):
        active = torch.nonzero((filled == -2).any(1)).flatten()
        for row, picks in zip(active.tolist(), index.tolist()):
            for position in picks:
                if filled[row, position] == -2:
                    filled[row, position] = step
    assert not (filled == -2).any(), "a masked position was never filled"
    return filled.numpy()


def sample(model, images: torch.Tensor, keep: torch.Tensor,
           tokens_per_step: int) -> tuple[np.ndarray, list, np.ndarray]:
    """Their greedy (top-1) sample_largest: tokens (B, L), positions picked per step, completed images."""
    steps: list = []
    tokens, completed = generate(model, images, keep, recording_positions(steps), sample_largest=True,
                                 num_token_per_iter=tokens_per_step)
    return tokens.numpy(), steps, completed


def transformer_outputs(model, data: dict[str, np.ndarray], sampling: bool) -> dict[str, np.ndarray]:
    from image_synthesis.modeling.utils.misc import get_token_type

    out = forward_outputs(model, data)
    if sampling:
        images = torch.from_numpy(data["images"]).float()
        keep = torch.from_numpy(data["keep"])
        known = (get_token_type(keep, model.content_codec.token_shape) == 1).view(len(images), -1)
        for n, name in ((1, "n1"), (4, "n4")):
            tokens, steps, _ = sample(model, images, keep, n)
            out[f"sample_{name}_tokens"] = tokens
            out[f"sample_{name}_fill_step"] = fill_steps_from_picks(known, steps)
        tokens, _, completed = sample(model, images, keep, -1)
        out["sample_all_tokens"] = tokens
        out["sample_all_completed"] = completed
    return out


def solver_checkpoint(model: torch.nn.Module, optimizers: dict) -> dict:
    """The dict their Solver.save writes (image_synthesis/engine/solver.py), optimizer and scheduler included."""
    return {"last_epoch": 0, "last_iter": 0, "spend_time": 1.0, "model": model.state_dict(),
            "optimizer_and_scheduler": {
                name: {"name": name, "start_epoch": 0, "end_epoch": -1, "start_iteration": 0, "end_iteration": -1,
                       "optimizer": {"step_iteration": 1, "module": opt.state_dict()},
                       "scheduler": {"step_iteration": 1, "module": sched.state_dict()}}
                for name, (opt, sched) in optimizers.items()}}


def tiny_pair(out: Path) -> None:
    """A P-VQVAE and a transformer (whose content_codec is that P-VQVAE, loaded by their init_from_ckpt)
    saved in their format after one optimizer step each, plus their deterministic inpainting of one image."""
    from image_synthesis.engine.lr_scheduler import CosineAnnealingLRWithWarmup

    s = TINY
    codec = instantiate(codec_config(s, "put", with_loss=False))
    seed_module(codec)
    opt = torch.optim.Adam(codec.parameters(name="generator"), lr=0.0, betas=(0.0, 0.9))
    sched = CosineAnnealingLRWithWarmup(opt, T_max=100, min_lr=1e-6, warmup_lr=2e-4, warmup=10)
    sched.step()
    pvqvae_path = out / "official_tiny_pvqvae.pth"
    torch.save(solver_checkpoint(codec, {"generator": (opt, sched)}), pvqvae_path)

    model = instantiate(transformer_config(s, "put", codec_config(s, "put", False, str(pvqvae_path))))
    seed_module(model, keep_prefixes=("content_codec.",))
    data = {k: v[:1] for k, v in inputs(s).items()}
    opt = torch.optim.AdamW(model.parameters(name="transformer"), lr=0.0, betas=(0.9, 0.95))
    sched = CosineAnnealingLRWithWarmup(opt, T_max=100, min_lr=1e-5, warmup_lr=3e-4, warmup=10)
    model.train()
    sched.step()
    model({"image": torch.from_numpy(data["images"]).float(), "mask": torch.from_numpy(data["keep"])},
          return_loss=True)["loss"].backward()
    opt.step()
    torch.save(solver_checkpoint(model, {"transformer": (opt, sched)}), out / "official_tiny_transformer.pth")
    _, _, completed = sample(model, torch.from_numpy(data["images"]).float(), torch.from_numpy(data["keep"]), -1)
    write_png_inputs(out / "official_tiny_inpaint", data["images"][0], data["keep"][0], completed[0])


def full_size_layouts(official: Path) -> dict:
    """Every state-dict key and shape of their full-size models, per their configs, built on the meta device."""
    layouts = {}
    for preset, pattern in FULL_SIZE.items():
        layouts[preset] = {}
        for kind in ("pvqvae", "transformer"):
            config = released_config(official / "configs/put_cvpr2022" / pattern.format(kind))
            with torch.device("meta"):
                layouts[preset][kind] = layout(instantiate(config))
    return layouts


def main() -> None:
    args = arguments(__doc__, "branch cvpr2022", "models")

    data = inputs(DEMO)
    layouts, alias_groups = {}, {}
    np.savez_compressed(args.out / "inputs.npz", **data)
    for variant in PVQVAE_VARIANTS:
        codec = instantiate(codec_config(DEMO, variant, with_loss=True))
        seed_module(codec)
        layouts[f"pvqvae_{variant}"] = layout(codec)
        alias_groups[f"pvqvae_{variant}"] = aliases(codec)
        np.savez_compressed(args.out / f"pvqvae_{variant}.npz", **pvqvae_outputs(codec, data))
    for variant in ("put", "tok"):
        model = instantiate(transformer_config(DEMO, variant, codec_config(DEMO, "put", with_loss=False)))
        seed_module(model)
        layouts[f"transformer_{variant}"] = layout(model)
        outputs = transformer_outputs(model, data, sampling=variant == "put")
        if variant == "put":
            write_png_inputs(args.out / "official_demo_inpaint", data["images"][0], data["keep"][0],
                             outputs.pop("sample_all_completed")[0])
        np.savez_compressed(args.out / f"transformer_{variant}.npz", **outputs)
    tiny_pair(args.out)

    manifest = {
        **manifest_header("python tools/parity/make_model_fixtures.py --official <authors' code>"),
        "loss_start": LOSS_START, "demo_sizes": DEMO, "tiny_sizes": TINY, "layouts": layouts,
        "aliases": alias_groups,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for name, sizes in (("demo", DEMO), ("tiny", TINY)):
        overrides = json.dumps(our_model_overrides(sizes), indent=1)
        (args.out / f"official_{name}_overrides.json").write_text(overrides + "\n")
    (args.out / "official_full_layouts.json").write_text(json.dumps(full_size_layouts(args.official)) + "\n")
    print(f"fixtures written to {args.out}")


if __name__ == "__main__":
    main()

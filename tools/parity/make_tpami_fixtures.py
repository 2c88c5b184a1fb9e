"""Model / sampler parity fixtures from the authors' TPAMI 2024 code (branch main of github.com/liuqk3/PUT).

Builds their TPAMI P-VQVAE (PatchVQGAN: PatchEncoder2, PatchConvDecoder2 with res blocks after every upsampling
and nearest-neighbour upsampling, a quantizer of K + K' codes) and their ViT transformer
(masked_image_inpainting_transformer.py) at small sizes with seeded weights, runs them on CPU on the CVPR
fixtures' inputs, and writes what they compute to tests/fixtures/parity/tpami/. Their files are only read and
imported, never edited; the CVPR script's shims and helpers are shared (common.py). Their code also
needs timm (DropPath, trunc_normal_), which the put package does not: install it into the environment that runs
this script only (tools/parity/README.md).

    .venv/bin/python tools/parity/make_tpami_fixtures.py --official /path/to/PUT-main

See tests/fixtures/parity/tpami/README.md for what each file holds.
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
    SEED,
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

TRANSFORMER = "image_synthesis.modeling.models.masked_image_inpainting_transformer"
# Small TPAMI models: 64 px, patch 8 (their 256 px layout: 3 upsamplings) and patch 16 (their 512 px layout:
# 4 upsamplings), two books of unequal size, a decoder with res blocks after every upsampling.
CODECS = {
    "p8": dict(image=64, patch=8, e_dim=64, res_ch=32, enc_blocks=2, dec_blocks=1, level_blocks=1, K=128, Km=32,
               imagenet=False),
    "p16": dict(image=64, patch=16, e_dim=64, res_ch=32, enc_blocks=2, dec_blocks=1, level_blocks=1, K=128, Km=32,
                imagenet=False),
    "imagenet": dict(image=64, patch=8, e_dim=64, res_ch=32, enc_blocks=2, dec_blocks=1, level_blocks=1, K=128,
                     Km=32, imagenet=True),
}
# Transformers on a codec: FFHQ / Places2 style (mask embedding, PolyLoss) and ImageNet 256 style (neither).
TRANSFORMERS = {
    "vit": dict(codec="p8", n_layer=2, n_head=4, dim=128, mask_emb=True, poly=True),
    "vit_imagenet": dict(codec="imagenet", n_layer=2, n_head=4, dim=128, mask_emb=False, poly=False),
}
# Sampling schedules of their sample() compared (num_token_per_iter), all with top-1 so the draws are greedy.
SCHEDULES = (1, 4, "cosine_4", "linear_3", "average_5", -1)
# Gumbel sampling of codes in training: their quantizer's settings, at a step inside the scale ramp.
GUMBEL = dict(adjust_logits_for_gumbel="log", temperature_step_range=[0, 8], temperature_init=20,
              temperature_dest=1e-6, gumbel_scale_init=1.0, gumbel_scale_dest=0.1, gumbel_scale_step_range=[3, 7],
              gumbel_scale_scheduler_type="step", gumbel_sample_stop_step=30)
GUMBEL_STEP = 5
IMAGENET = {"scale": [255.0, 255.0, 255.0], "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
FULL_SIZE = [(name, res) for name in ("ffhq", "imagenet", "naturalscene") for res in (256, 512)]


def codec_config(s: dict, gumbel: bool = False) -> dict:
    """Their PatchVQGAN as in configs/put_tpami2024, at the sizes `s` (no losses: parity of the networks)."""
    quantizer = dict(n_e=s["K"] + s["Km"], e_dim=s["e_dim"], masked_embed_start=s["K"], embed_ema=True,
                     get_embed_type="retrive", distance_type="euclidean")
    if gumbel:
        quantizer.update(gumbel_sample=True, **GUMBEL)
    side = s["image"] // s["patch"]
    params = dict(
        trainable=False, token_shape=[side, side],
        quantizer_config=dict(target=f"{CODEC}.VectorQuantizer", params=quantizer),
        encoder_config=dict(target=f"{CODEC}.PatchEncoder2", params=dict(
            in_ch=3, res_ch=s["res_ch"], out_ch=s["e_dim"], num_res_block=s["enc_blocks"], stride=s["patch"])),
        decoder_config=dict(target=f"{CODEC}.PatchConvDecoder2", params=dict(
            in_ch=s["e_dim"], out_ch=3, res_ch=s["res_ch"], num_res_block=s["dec_blocks"],
            num_res_block_after_resolution_change=s["level_blocks"], stride=s["patch"], up_layer_with_image=True,
            upsample_type="nearest")))
    if s["imagenet"]:
        params["im_process_info"] = IMAGENET
    return dict(target=f"{CODEC}.PatchVQGAN", params=params)


def transformer_config(t: dict) -> dict:
    s = CODECS[t["codec"]]
    params = dict(content_seq_len=(s["image"] // s["patch"]) ** 2, n_layer=t["n_layer"], dim=t["dim"],
                  num_heads=t["n_head"], learn_mask_emb=t["mask_emb"], num_token=s["K"], act_layer="GELU2",
                  input_feature_type="origin", attn_content_with_mask=False, drop_path=0.1, random_quantize=0.3,
                  weight_decay=0.05, content_codec_config=codec_config(s))
    if t["poly"]:
        params["loss_config"] = dict(target="image_synthesis.modeling.modules.losses.poly_loss.PolyLoss",
                                     params=dict(epsilons=[1]))
    return dict(target=f"{TRANSFORMER}.MaskedImageInpaintingTransformer", params=params)


def our_model_overrides(s: dict, t: dict | None = None) -> dict:
    """The same sizes as ModelConfig fields (`put import-official --model-overrides`), over a tpami preset."""
    pvqvae = {"patch_size": s["patch"], "embed_dim": s["e_dim"], "width": s["res_ch"], "base_channels": 64,
              "num_res_blocks": s["enc_blocks"], "decoder_res_blocks": s["dec_blocks"],
              "decoder_level_res_blocks": s["level_blocks"], "codebook_size": s["K"], "masked_codebook_size": s["Km"],
              "pixel_norm": "imagenet" if s["imagenet"] else "signed"}
    out = {"image_size": s["image"], "pvqvae": pvqvae}
    if t is not None:
        out["transformer"] = {"n_layer": t["n_layer"], "n_head": t["n_head"], "n_embd": t["dim"],
                              "mask_embedding": t["mask_emb"]}
    return out


def codec_outputs(codec, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Encoder features, code indices (masked image, spread-out features, full image), token types and
    the decoder's output from the codes and the masked image."""
    from image_synthesis.modeling.utils.misc import get_token_type

    images = torch.from_numpy(data["images"]).float()
    keep = torch.from_numpy(data["keep"])
    out = {}
    codec.eval()
    with torch.no_grad():
        got = codec.get_features(images, mask=keep, return_token=True)
        token_shape = got["token_shape"]
        token_type, unmask_ratio = get_token_type(keep, token_shape)
        out.update(features=got["feature"], tokens=got["token"], token_known=(token_type == 1)[:, 0],
                   unmask_ratio=unmask_ratio[:, 0])
        out["target_tokens"] = codec.get_features(images, return_token=True)["token"]
        out["decoded"] = decoded(codec, got["token"], images, keep)
        out["search_features"] = spread_features(out["features"])
        out["search_tokens"] = codec.quantize(out["search_features"], token_type=token_type.long())["index"]
    return {k: v.detach().numpy() for k, v in out.items()}


@contextlib.contextmanager
def recording_exponentials(draws: list):
    """Their gumbel_softmax draws its noise with Tensor.exponential_: record each draw."""
    exponential = torch.Tensor.exponential_

    def spy(self, *args, **kwargs):
        result = exponential(self, *args, **kwargs)
        draws.append(result.clone())
        return result

    torch.Tensor.exponential_ = spy
    try:
        yield
    finally:
        torch.Tensor.exponential_ = exponential


def gumbel_outputs(s: dict, data: dict[str, np.ndarray], features: np.ndarray) -> dict[str, np.ndarray]:
    """Their training-mode quantizer with Gumbel sampling on the spread-out features at GUMBEL_STEP: the codes it
    draws and the exponential noise behind them (known patches' draw, then masked patches')."""
    from image_synthesis.modeling.utils.misc import get_token_type

    codec = instantiate(codec_config(s, gumbel=True))
    seed_module(codec)
    quantizer = codec.quantize.train()
    token_type, _ = get_token_type(torch.from_numpy(data["keep"]), (features.shape[-2], features.shape[-1]))
    draws: list = []
    torch.manual_seed(SEED)
    with torch.no_grad(), recording_exponentials(draws):
        out = quantizer(torch.from_numpy(features), token_type=token_type.long(), step=GUMBEL_STEP, total_steps=100)
    assert len(draws) == 2, "one draw for the known patches, one for the masked ones"
    return {"gumbel_tokens": out["index"].numpy(), "gumbel_exponential_known": draws[0].numpy(),
            "gumbel_exponential_masked": draws[1].numpy()}


@contextlib.contextmanager
def recording_block_inputs(model, seen: list):
    """The first block's input at every forward of their sampling loop."""
    handle = model.blocks[0].register_forward_pre_hook(lambda module, args: seen.append(args[0].clone()))
    try:
        yield
    finally:
        handle.remove()


def fill_steps_from_inputs(known: torch.Tensor, seen: list[torch.Tensor]) -> np.ndarray:
    """(B, L) forward after which each position got its token (-1: known): its input changed between forwards
    s and s + 1 (the last forward fills what is still open). Not make_model_fixtures.fill_steps_from_picks: this
    loop picks positions with topk, not one_hot, and forwards the whole batch every step."""
    inputs = [x.flatten(1, 2) for x in seen]  # (B, L, D) each
    filled = torch.where(known, -1, len(inputs) - 1)
    for step in range(len(inputs) - 2, -1, -1):
        filled[(inputs[step + 1] != inputs[step]).any(-1)] = step
    return filled.numpy()


def sample(model, images: torch.Tensor, keep: torch.Tensor, schedule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Their sample() with top-1 (filter_ratio 1): tokens (B, L), fill steps, completed images (uint8)."""
    from image_synthesis.modeling.utils.misc import get_token_type

    seen: list = []
    tokens, completed = generate(model, images, keep, recording_block_inputs(model, seen),
                                 num_token_per_iter=schedule, calculate_acc_and_prob=False)
    known = (get_token_type(keep, model.content_codec.token_shape)[0] == 1).view(len(images), -1)
    return tokens.view(len(images), -1).numpy(), fill_steps_from_inputs(known, seen), completed


def sampling_outputs(model, data: dict[str, np.ndarray], prefix: Path) -> dict[str, np.ndarray]:
    images, keep = torch.from_numpy(data["images"]).float(), torch.from_numpy(data["keep"])
    out = {}
    for schedule in SCHEDULES:
        name = str(schedule).replace("-1", "all")
        tokens, filled, completed = sample(model, images, keep, schedule)
        out[f"sample_{name}_tokens"], out[f"sample_{name}_fill_step"] = tokens, filled
        if schedule == -1:
            write_png_inputs(prefix, data["images"][0], data["keep"][0], completed[0])
    return out


def full_size(official: Path) -> dict:
    """Every state-dict key and shape of their full-size TPAMI P-VQVAE (with its losses) and transformer (with
    its content_codec), per their configs, and their parameter counts. The P-VQVAE is built on the meta device;
    the transformer on the CPU (its drop-path rates are read with .item(), which meta tensors lack)."""
    result = {}
    for name, res in FULL_SIZE:
        entry = {}
        for kind, file in (("pvqvae", f"p_vqvae_{name}_res{res}.yaml"),
                           ("transformer", f"vit_base_{name}_res{res}.yaml")):
            config = released_config(official / "configs/put_tpami2024" / name / file)
            with torch.device("meta" if kind == "pvqvae" else "cpu"):
                module = instantiate(config)
            prefix = "content_codec." if kind == "transformer" else ""
            own = {k: p for k, p in module.named_parameters() if not k.startswith(("loss.", "content_codec."))}
            codec = {k: p for k, p in module.named_parameters() if k.startswith(prefix) and "loss." not in k}
            entry[kind] = {"layout": layout(module), "parameters": sum(p.numel() for p in own.values()),
                           "codec_parameters": sum(p.numel() for p in codec.values())}
        result[f"{name}_res{res}"] = entry
    return result


def install_round_shim() -> None:
    """Their 'average_N' schedule rounds 0-d tensors with Python's round(), which current torch does not define
    for tensors (TypeError): round the value, as the code means."""
    if not hasattr(torch.Tensor, "__round__"):
        torch.Tensor.__round__ = lambda self, ndigits=None: round(self.item(), ndigits)


def main() -> None:
    args = arguments(__doc__, "branch main", "tpami")
    install_round_shim()

    layouts, overrides = {}, {}
    data = inputs(CODECS["p8"])  # the CVPR fixtures' inputs (64 px: the same arrays)
    for name, sizes in CODECS.items():
        codec = instantiate(codec_config(sizes))
        seed_module(codec)
        layouts[f"pvqvae_{name}"] = layout(codec)
        overrides[f"pvqvae_{name}"] = our_model_overrides(sizes)
        outputs = codec_outputs(codec, data)
        if name == "p8":
            outputs.update(gumbel_outputs(sizes, data, outputs["search_features"]))
        np.savez_compressed(args.out / f"pvqvae_{name}.npz", **outputs)
    for name, t in TRANSFORMERS.items():
        model = instantiate(transformer_config(t))
        seed_module(model)
        layouts[f"transformer_{name}"] = layout(model)
        overrides[f"transformer_{name}"] = our_model_overrides(CODECS[t["codec"]], t)
        outputs = forward_outputs(model, data)
        if name == "vit":
            outputs.update(sampling_outputs(model, data, args.out / "official_vit_inpaint"))
        np.savez_compressed(args.out / f"transformer_{name}.npz", **outputs)

    manifest = {
        **manifest_header("python tools/parity/make_tpami_fixtures.py --official <authors' code, branch main>"),
        "codecs": CODECS, "transformers": TRANSFORMERS,
        "schedules": list(SCHEDULES), "gumbel": GUMBEL, "gumbel_step": GUMBEL_STEP, "layouts": layouts,
        "overrides": overrides,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (args.out / "official_full_layouts.json").write_text(json.dumps(full_size(args.official)) + "\n")
    print(f"fixtures written to {args.out}")


if __name__ == "__main__":
    main()

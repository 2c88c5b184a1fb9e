"""What the two model-fixture scripts share (make_model_fixtures.py: the CVPR 2022 release, make_tpami_fixtures.py:
the TPAMI 2024 release): the shims that run the authors' code unedited, seeded weights, the fixed inputs, the
transformer's forward pass, their sampling loop with the tokens it decodes, the full-size layouts read from their
configs, and the scripts' command line and manifest header.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
import torchvision
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from seeded_weights import seeded_state, seeded_vgg19_features  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SEED = 0
CODEC = "image_synthesis.modeling.codecs.image_codec.patch_vqgan"


def install_shims(official: Path) -> None:
    """Run their code as it is on current Python / numpy / torchvision, offline."""
    if importlib.util.find_spec("audioop") is None:  # removed in Python 3.13; patch_vqgan imports `bias` from it
        sys.modules["audioop"] = types.ModuleType("audioop")
        sys.modules["audioop"].bias = None
    if importlib.util.find_spec("torch._six") is None:  # removed in torch 2.0; their lr_scheduler imports inf
        sys.modules["torch._six"] = types.ModuleType("torch._six")
        sys.modules["torch._six"].inf = float("inf")
    for name, alias in (("bool", bool), ("int", int), ("float", float)):
        if name not in np.__dict__:
            setattr(np, name, alias)

    def vgg19(*args, **kwargs):  # their losses call models.vgg19(pretrained=True).features
        if torch.empty(0).device.type == "meta":
            from torchvision.models.vgg import cfgs, make_layers
            return SimpleNamespace(features=make_layers(cfgs["E"]))
        return SimpleNamespace(features=seeded_vgg19_features(SEED))

    torchvision.models.vgg19 = vgg19
    sys.path.insert(0, str(official))


def arguments(doc: str, branch: str, out: str) -> argparse.Namespace:
    """The scripts' command line (--official, --out under tests/fixtures/parity/), with the shims installed and
    torch on one thread."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--official", required=True, type=Path, help=f"export of the authors' code ({branch})")
    parser.add_argument("--out", type=Path, default=ROOT / "tests/fixtures/parity" / out)
    args = parser.parse_args()
    install_shims(args.official.resolve())
    torch.set_num_threads(1)  # fixed reduction orders
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def manifest_header(command: str) -> dict[str, Any]:
    """How and with what a fixture folder was made: the first entries of its manifest.json."""
    return {"command": command, "made": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "numpy": np.__version__, "python": sys.version.split()[0], "seed": SEED}


def instantiate(config: dict):
    from image_synthesis.utils.misc import instantiate_from_config
    return instantiate_from_config(config)


def released_config(path: Path) -> dict:
    """A model of their config files, without the checkpoint its content codec would load."""
    import yaml

    with open(path) as f:
        config = yaml.load(f, Loader=yaml.FullLoader)["model"]
    config["params"].get("content_codec_config", {}).get("params", {}).pop("ckpt_path", None)
    return config


def layout(module: torch.nn.Module) -> dict[str, list[int]]:
    return {k: list(v.shape) for k, v in module.state_dict().items()}


def aliases(module: torch.nn.Module) -> list[list[str]]:
    """Groups of state-dict keys naming one tensor (their discriminator registers conv1 also as `features`)."""
    groups: dict[int, list[str]] = {}
    for name, tensor in module.state_dict(keep_vars=True).items():
        groups.setdefault(id(tensor), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def seed_module(module: torch.nn.Module, keep_prefixes: tuple[str, ...] = ()) -> None:
    """Seeded weights everywhere except the BCE labels, the VGG trunks and `keep_prefixes`."""
    keep = ("loss.perceptual_loss.", "loss.style_loss.", "loss.adversarial_loss.") + keep_prefixes
    current = module.state_dict()
    fixed = {k: v for k, v in current.items() if k.startswith(keep)}
    module.load_state_dict(seeded_state(layout(module), SEED, fixed, aliases(module)))


def inputs(s: dict, batch: int = 2) -> dict[str, np.ndarray]:
    """Images (uint8, smooth + noise), keep-masks with holes crossing patch borders, erase masks."""
    rng = np.random.RandomState(SEED)
    size = s["image"]
    low = rng.uniform(0, 255, (batch, 3, 12, 12)).astype(np.float32)
    smooth = torch.nn.functional.interpolate(torch.from_numpy(low), size=(size, size), mode="bicubic",
                                             align_corners=False).numpy()
    images = np.clip(smooth + rng.normal(0, 20, smooth.shape), 0, 255).round().astype(np.uint8)
    keep = np.ones((batch, 1, size, size), dtype=bool)
    erase = np.ones((batch, 1, size, size), dtype=bool)
    u = size // 16
    keep[0, :, 3 * u:11 * u + 1, 2 * u:9 * u] = False
    keep[1, :, 9 * u:15 * u, 5 * u:14 * u + 3] = False
    keep[1, :, u:5 * u, u:3 * u] = False
    keep[1, :, 12 * u, u] = False  # a single hole pixel: its patch goes to book e'
    erase[1, :, 2 * u:7 * u, 8 * u:13 * u] = False
    return {"images": images, "keep": keep, "erase": erase}


def decoded(codec, tokens: torch.Tensor, images: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Their decoder's output from the codes `tokens` and, where it has a reference branch, the masked image."""
    codes = codec.quantize.get_codebook_entry(tokens.view(-1), shape=tokens.shape)
    quant = codec.post_quant_conv(codes)
    if not codec.decoder.requires_image:
        return codec.decoder(quant)
    return codec.decoder(quant, codec.multi_pixels_with_mask(codec.pre_process(images), keep), mask=keep)


def spread_features(features: torch.Tensor) -> torch.Tensor:
    """The encoder's features plus wide noise: a code search that finds many distinct codes in both books."""
    spread = np.random.RandomState(SEED + 1).normal(0, 3, features.shape).astype(np.float32)
    return features + torch.from_numpy(spread)


def forward_outputs(model, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Their transformer's random-quantization draws (prepare_data's first torch.rand), logits and training
    loss on the inputs."""
    images = torch.from_numpy(data["images"]).float()
    keep = torch.from_numpy(data["keep"])
    out = {}
    model.eval()
    torch.manual_seed(SEED)
    out["draws"] = torch.rand(len(images), 1, *model.content_codec.token_shape)
    torch.manual_seed(SEED)
    with torch.no_grad():
        result = model({"image": images, "mask": keep}, return_loss=True)
    out["logits"], out["loss"] = result["logits"], result["loss"]
    return {k: v.numpy() for k, v in out.items()}


@contextlib.contextmanager
def decoded_tokens(model, captured: dict) -> Iterator[None]:
    """The tokens their sampling loop hands to the codec's decoder, as captured["tokens"]."""
    decode = model.content_codec.decode

    def spy_decode(token, **kwargs):
        captured["tokens"] = token.clone()
        return decode(token, **kwargs)

    model.content_codec.decode = spy_decode
    try:
        yield
    finally:
        del model.content_codec.decode


def generate(model, images: torch.Tensor, keep: torch.Tensor, recording: contextlib.AbstractContextManager,
             **options: Any) -> tuple[torch.Tensor, np.ndarray]:
    """Their generate_content with top-1 (filter_ratio 1, greedy) and `options`, seeded, under `recording` (what
    each script observes of the loop): the tokens handed to the decoder and the completed images (uint8, as
    their inference script writes them)."""
    captured: dict = {}
    torch.manual_seed(SEED)
    with recording, decoded_tokens(model, captured):
        out = model.generate_content({"image": images.clone(), "mask": keep.clone()}, filter_ratio=1,
                                     filter_type="count", **options)
    completed = out["completed"].permute(0, 2, 3, 1).numpy().astype(np.uint8)
    return captured["tokens"], completed


def write_png_inputs(prefix: Path, image: np.ndarray, keep: np.ndarray, completed: np.ndarray) -> None:
    """The inpainting check's files: RGB image, mask (white = hole, our default polarity), their result."""
    Image.fromarray(image.transpose(1, 2, 0)).save(f"{prefix}_image.png")
    Image.fromarray(np.where(keep[0], 0, 255).astype(np.uint8)).save(f"{prefix}_mask.png")
    Image.fromarray(completed).save(f"{prefix}_official.png")

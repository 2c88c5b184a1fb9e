"""What tools/parity/make_data_fixtures.py and tests/test_parity_data.py share: the stand-in PConv mask set,
the metric image pairs, and the training-mask settings compared with the authors' released code.

Everything here is a pure function of fixed seeds and of our own code, so the fixture script (which runs the
released code on these inputs) and the tests (which run ours) see identical inputs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from skimage import data as skdata

from put.config import PRESETS
from put.config.bins import hole_ratio
from put.masks.generate import mask_with_ratio
from put.masks.io import write_mask
from put.masks.strokes import stroke_keep_mask

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "parity"
METRICS_FIXTURE = FIXTURES / "metrics_released.json"
MASKS_FIXTURE = FIXTURES / "masks_released.json"

# ------------------------------------------------------------------------------------------ stand-in PConv set
# NVIDIA's set (12,000 masks, 2,000 per hole-ratio group, sorted by group) is not on this machine: a stand-in
# of the same structure, STANDIN_PER_GROUP masks per group in generation order (random in ratio within a
# group, as NVIDIA's are assumed to be). The released code indexes 12,000 files, so its copy repeats each
# mask 2000 / STANDIN_PER_GROUP times in a row.
STANDIN_SIZE = (256, 256)
STANDIN_GROUPS = ((0.01, 0.1), (0.1, 0.2), (0.2, 0.3), (0.3, 0.4), (0.4, 0.5), (0.5, 0.6))
STANDIN_PER_GROUP = 100
NVIDIA_PER_GROUP = 2000


def standin_keep(index: int) -> np.ndarray:
    group, k = divmod(index, STANDIN_PER_GROUP)
    lo, hi = STANDIN_GROUPS[group]
    return mask_with_ratio(STANDIN_SIZE, lo, hi, np.random.default_rng([2024, group, k]))


def build_standin(root: Path) -> str:
    """Write the stand-in set (hole-white PNGs 000.png, 001.png, ... sorted by group); returns its digest."""
    root.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    for index in range(len(STANDIN_GROUPS) * STANDIN_PER_GROUP):
        keep = standin_keep(index)
        write_mask(root / f"{index:03d}.png", keep)
        digest.update(np.packbits(keep > 0.5).tobytes())
    return digest.hexdigest()


def standin_of_nvidia_index(index: int) -> int:
    """The stand-in mask that file `index` of the released code's 12,000-file copy repeats."""
    group, within = divmod(index, NVIDIA_PER_GROUP)
    return group * STANDIN_PER_GROUP + within * STANDIN_PER_GROUP // NVIDIA_PER_GROUP


def hole_count(keep: np.ndarray) -> int:
    return int(round(hole_ratio(keep) * keep.size))


# ------------------------------------------------------------------------------------------ metric pairs

def metric_pairs() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{name: (result, target)} HxWx3 uint8 pairs: photos shipped with scikit-image and deterministic
    degradations of them (noise, a filled hole, a colour change, a shifted copy); widths not a multiple
    of 16 exercise the scalar tail of OpenCV's vectorised colour conversion."""
    astronaut = skdata.astronaut()[100:356, 150:406]
    coffee = skdata.coffee()[50:307, 100:391]  # 257 x 291
    chelsea = skdata.chelsea()[:, :451]  # 300 x 451
    rng = np.random.default_rng(7)

    def noisy(image: np.ndarray, sigma: float) -> np.ndarray:
        return np.clip(image + rng.normal(0, sigma, image.shape), 0, 255).round().astype(np.uint8)

    def hole_filled(image: np.ndarray) -> np.ndarray:
        out = image.copy()
        h, w = image.shape[:2]
        out[h // 4:h // 2, w // 3:2 * w // 3] = image.reshape(-1, 3).mean(0).astype(np.uint8)
        return out

    return {
        "astronaut_noise8": (noisy(astronaut, 8), astronaut),
        "astronaut_noise30": (noisy(astronaut, 30), astronaut),
        "astronaut_hole": (hole_filled(astronaut), astronaut),
        "coffee_channels_swapped": (coffee[..., ::-1].copy(), coffee),
        "coffee_noise15": (noisy(coffee, 15), coffee),
        "chelsea_shifted": (np.roll(chelsea, (3, -5), axis=(0, 1)), chelsea),
        "chelsea_hole_noise": (noisy(hole_filled(chelsea), 5), chelsea),
        "astronaut_vs_chelsea": (skdata.chelsea()[:256, :256], astronaut),
    }


def pair_digest(result: np.ndarray, target: np.ndarray) -> str:
    return hashlib.sha256(result.tobytes() + target.tobytes()).hexdigest()


# ------------------------------------------------------------------------------------------ mask settings
# Our presets' stages and the released configs they reproduce (configs/put_cvpr2022/<folder>/<file>).
PIPELINES: dict[str, tuple[str, str, str]] = {
    # name: (our preset, our stage, released config)
    "ffhq_pvqvae": ("ffhq", "pvqvae", "ffhq/pvqvae_ffhq.yaml"),
    "ffhq_transformer": ("ffhq", "transformer", "ffhq/transformer_ffhq.yaml"),
    "places2_pvqvae": ("places2", "pvqvae", "naturalscene/pvqvae_naturalscene.yaml"),
    "places2_transformer": ("places2", "transformer", "naturalscene/transformer_naturalscene.yaml"),
    "imagenet_pvqvae": ("imagenet", "pvqvae", "imagenet/pvqvae_imagenet.yaml"),
    "imagenet_transformer": ("imagenet", "transformer", "imagenet/transformer_imagenet.yaml"),
}
# The distinct PConv windows and stroke keep ratios among them (one pipeline each stands for it).
WINDOWS = {"ffhq_pvqvae": "ffhq_pvqvae", "ffhq_transformer": "ffhq_transformer", "places2_imagenet": "imagenet_pvqvae"}
STROKES = {"keep_0.0_0.5": "imagenet_pvqvae", "keep_0.3_0.6": "imagenet_transformer"}
BLOCKY_SEEDS = tuple(range(12))


def stage_config(pipeline: str):
    preset_name, stage, _ = PIPELINES[pipeline]
    preset = PRESETS[preset_name]
    return preset, (preset.pvqvae_train if stage == "pvqvae" else preset.transformer_train)


def blocky_inputs() -> list[np.ndarray]:
    """Masks on which token-resolution resampling (mask_low_to_high) is compared mask by mask: strokes of
    the ImageNet transformer's settings and stand-in PConv masks."""
    stroke = stage_config("imagenet_transformer")[1].masks.stroke
    strokes = [stroke_keep_mask(STANDIN_SIZE, np.random.default_rng([7, s]), **stroke.model_dump())
               for s in BLOCKY_SEEDS]
    return strokes + [standin_keep(100 * group + 1) for group in range(len(STANDIN_GROUPS))]

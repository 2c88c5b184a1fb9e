"""The paper's reported numbers, as data, in one place (Table 1, Table 3, supplementary speed table).

Transcribed exactly as printed (FFHQ, Places2, ImageNet; 20-40 / 40-60 / 10-60 %), returned as fresh tidy
DataFrames so that no caller's edit leaks to the next. Kept as printed: Table 3's FFHQ PUT SSIM (0.945 / 0.857 /
0.914) differs from Table 1's PUT_50, the same model (0.936 / 0.845 / 0.906).
"""

from __future__ import annotations

import pandas as pd

from put.config import PRESETS

DATASETS: tuple[str, ...] = ("FFHQ", "Places2", "ImageNet")
GROUPS: tuple[str, ...] = ("20-40", "40-60", "10-60")
METRICS: tuple[str, ...] = ("fid", "psnr", "ssim", "mae")
# Lower is better for these; higher for the others (the paper's arrows).
LOWER_IS_BETTER: frozenset[str] = frozenset({"fid", "mae"})

# Our presets -> the paper's dataset whose numbers they reproduce; `demo` has no counterpart.
PRESET_DATASET: dict[str, str | None] = {"ffhq": "FFHQ", "places2": "Places2", "imagenet": "ImageNet", "demo": None}
# Reference rows shown beside a preset without a counterpart (for scale only, labelled as such): the paper's
# numbers of the TPAMI presets' dataset (the TPAMI paper's own are not part of this reproduction), else FFHQ's.
SCALE_DATASET: dict[str, str] = {f"{preset}_tpami{size}": dataset for size in (256, 512) for preset, dataset in
                                 (("ffhq", "FFHQ"), ("places2", "Places2"), ("imagenet", "ImageNet"))}
FALLBACK_DATASET = "FFHQ"

# Table 1: method -> (family, {metric: 9 values}). Families follow the paper's two row blocks.
_TABLE1: dict[str, tuple[str, dict[str, tuple[float, ...]]]] = {
    "DFv2": ("deterministic", {
        "fid": (27.344, 47.894, 30.509, 53.107, 83.979, 59.280, 49.900, 102.111, 64.056),
        "psnr": (27.937, 22.984, 26.783, 26.292, 22.412, 25.391, 24.464, 20.157, 23.387),
        "ssim": (0.945, 0.850, 0.912, 0.878, 0.741, 0.831, 0.876, 0.719, 0.819),
        "mae": (0.0187, 0.0429, 0.0270, 0.0230, 0.0461, 0.0304, 0.0303, 0.0638, 0.0415)}),
    "EC": ("deterministic", {
        "fid": (12.949, 26.217, 16.961, 20.180, 34.965, 23.206, 27.821, 63.768, 39.199),
        "psnr": (27.484, 22.574, 26.181, 26.536, 22.755, 25.975, 24.703, 20.459, 23.596),
        "ssim": (0.941, 0.826, 0.899, 0.881, 0.734, 0.840, 0.882, 0.714, 0.824),
        "mae": (0.0177, 0.0430, 0.0263, 0.0207, 0.0419, 0.0261, 0.0271, 0.0582, 0.0375)}),
    "MED": ("deterministic", {
        "fid": (13.999, 26.252, 17.061, 28.671, 46.815, 32.494, 40.643, 93.983, 54.854),
        "psnr": (27.117, 22.499, 26.111, 25.401, 21.543, 24.510, 23.730, 19.560, 22.752),
        "ssim": (0.936, 0.840, 0.903, 0.854, 0.685, 0.796, 0.861, 0.675, 0.795),
        "mae": (0.0200, 0.0430, 0.0277, 0.0255, 0.0505, 0.0336, 0.0320, 0.0676, 0.0434)}),
    "ICT_all": ("deterministic", {
        "fid": (10.442, 23.946, 15.363, 19.309, 33.510, 23.331, 23.889, 54.327, 32.624),
        "psnr": (29.847, 23.041, 26.736, 25.836, 22.120, 24.986, 24.249, 20.045, 23.317),
        "ssim": (0.964, 0.863, 0.917, 0.870, 0.723, 0.819, 0.876, 0.711, 0.818),
        "mae": (0.0129, 0.0368, 0.0232, 0.0221, 0.0433, 0.0289, 0.0362, 0.0578, 0.0378)}),
    "PUT_all": ("deterministic", {
        "fid": (11.221, 19.934, 13.248, 19.776, 38.206, 24.605, 19.411, 43.239, 26.223),
        "psnr": (28.356, 24.125, 27.473, 26.580, 22.945, 25.749, 25.721, 21.551, 24.726),
        "ssim": (0.953, 0.888, 0.908, 0.885, 0.756, 0.840, 0.904, 0.772, 0.838),
        "mae": (0.0159, 0.0328, 0.0213, 0.0205, 0.0398, 0.0269, 0.0233, 0.0487, 0.0321)}),
    "PIC": ("pluralistic", {
        "fid": (22.847, 37.762, 25.902, 31.361, 44.289, 34.520, 49.215, 102.561, 63.955),
        "psnr": (25.157, 20.424, 24.093, 24.073, 20.656, 23.469, 22.921, 18.368, 21.623),
        "ssim": (0.910, 0.769, 0.865, 0.824, 0.648, 0.775, 0.842, 0.623, 0.766),
        "mae": (0.0251, 0.0571, 0.0350, 0.0284, 0.0544, 0.0353, 0.0361, 0.0785, 0.0509)}),
    "ICT_50": ("pluralistic", {
        "fid": (13.536, 23.756, 16.202, 20.900, 33.696, 24.138, 25.235, 55.598, 34.247),
        "psnr": (26.462, 21.816, 25.515, 24.947, 21.126, 24.373, 23.252, 19.025, 22.123),
        "ssim": (0.931, 0.822, 0.896, 0.850, 0.682, 0.803, 0.852, 0.666, 0.786),
        "mae": (0.0196, 0.0445, 0.0270, 0.0245, 0.0487, 0.0312, 0.0312, 0.0677, 0.0440)}),
    "PUT_50": ("pluralistic", {
        "fid": (12.784, 21.382, 14.554, 19.617, 31.485, 22.121, 21.272, 45.153, 27.648),
        "psnr": (26.877, 22.375, 25.943, 25.452, 21.528, 24.492, 24.238, 19.742, 23.264),
        "ssim": (0.936, 0.845, 0.906, 0.861, 0.703, 0.806, 0.875, 0.704, 0.818),
        "mae": (0.0191, 0.0417, 0.0263, 0.0235, 0.0479, 0.0317, 0.0281, 0.0641, 0.0401)}),
}
# Our evaluation modes -> the paper's PUT rows of Table 1.
MODE_METHOD: dict[str, str] = {"all": "PUT_all", "k50": "PUT_50"}

# Table 3 (all K=50): variant -> {metric: 6 values, FFHQ then Places2}. The paper has no ImageNet ablation.
TABLE3_DATASETS: tuple[str, ...] = ("FFHQ", "Places2")
_TABLE3: dict[str, dict[str, tuple[float, ...]]] = {
    "conv": {"fid": (163.610, 226.437, 173.351, 178.057, 216.235, 179.294),
             "psnr": (12.783, 9.735, 12.360, 12.207, 9.347, 11.799),
             "ssim": (0.495, 0.266, 0.445, 0.417, 0.212, 0.373),
             "mae": (0.1420, 0.3017, 0.1912, 0.1447, 0.2995, 0.1941)},
    "one": {"fid": (12.112, 20.298, 13.960, 26.015, 38.011, 28.634),
            "psnr": (26.887, 22.335, 25.903, 24.507, 20.571, 23.600),
            "ssim": (0.937, 0.844, 0.906, 0.836, 0.660, 0.776),
            "mae": (0.0191, 0.0418, 0.0264, 0.0256, 0.0526, 0.0345)},
    "no_ref": {"fid": (15.014, 22.736, 16.469, 22.821, 32.281, 25.084),
               "psnr": (26.487, 22.249, 25.547, 25.053, 21.398, 24.185),
               "ssim": (0.932, 0.841, 0.901, 0.851, 0.695, 0.798),
               "mae": (0.0202, 0.0426, 0.0274, 0.0249, 0.0488, 0.0329)},
    "tok": {"fid": (22.824, 38.384, 26.098, 58.643, 120.482, 75.625),
            "psnr": (23.916, 18.936, 22.879, 20.940, 14.685, 19.429),
            "ssim": (0.893, 0.745, 0.843, 0.742, 0.453, 0.652),
            "mae": (0.0289, 0.0689, 0.0418, 0.0467, 0.1337, 0.0779)},
    "qua0": {"fid": (43.621, 96.648, 54.879, 35.127, 71.629, 44.588),
             "psnr": (24.188, 19.564, 23.174, 24.340, 20.239, 23.353),
             "ssim": (0.879, 0.704, 0.820, 0.831, 0.637, 0.763),
             "mae": (0.0281, 0.0627, 0.0393, 0.0269, 0.0562, 0.0367)},
    "put": {"fid": (12.784, 21.382, 14.554, 19.617, 31.485, 22.121),
            "psnr": (26.877, 22.375, 25.943, 25.452, 21.528, 24.492),
            "ssim": (0.945, 0.857, 0.914, 0.861, 0.703, 0.806),
            "mae": (0.0191, 0.0417, 0.0263, 0.0235, 0.0479, 0.0317)},
}

# Supplementary "Inference speed" table, measured by the authors on one RTX 3090.
SPEED_DEVICE = "RTX 3090"
_TOKENS_PER_SECOND: dict[str, float] = {"FFHQ": 37.138, "Places2": 32.048, "ImageNet": 17.186}
_PVQVAE_IMAGES_PER_SECOND = 62.949  # one figure for all datasets (same P-VQVAE size)


def _cells(datasets: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(d, g) for d in datasets for g in GROUPS]


def table1_reported() -> pd.DataFrame:
    """Tidy Table 1: columns dataset, method, family, metric, group, value."""
    rows = [{"dataset": d, "method": method, "family": family, "metric": metric, "group": g, "value": v}
            for method, (family, by_metric) in _TABLE1.items()
            for metric, values in by_metric.items()
            for (d, g), v in zip(_cells(DATASETS), values, strict=True)]
    return pd.DataFrame(rows)


def table3_reported() -> pd.DataFrame:
    """Tidy Table 3 (K=50): columns dataset, variant, metric, group, value."""
    rows = [{"dataset": d, "variant": variant, "metric": metric, "group": g, "value": v}
            for variant, by_metric in _TABLE3.items()
            for metric, values in by_metric.items()
            for (d, g), v in zip(_cells(TABLE3_DATASETS), values, strict=True)]
    return pd.DataFrame(rows)


def speed_reported() -> pd.DataFrame:
    """Tidy speed table: columns dataset, model, unit, value, device (dataset "all" for the P-VQVAE)."""
    rows = [{"dataset": d, "model": "UQ-Transformer", "unit": "tokens/s", "value": v, "device": SPEED_DEVICE}
            for d, v in _TOKENS_PER_SECOND.items()]
    rows.append({"dataset": "all", "model": "P-VQVAE", "unit": "images/s", "value": _PVQVAE_IMAGES_PER_SECOND,
                 "device": SPEED_DEVICE})
    return pd.DataFrame(rows)


def reference_dataset(preset: str) -> tuple[str, bool]:
    """The paper dataset whose numbers sit beside `preset`'s, and whether it is the preset's own
    (False: no counterpart, so the rows are shown for scale only and must be labelled as such)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    own = PRESET_DATASET.get(preset)
    return (own, True) if own is not None else (SCALE_DATASET.get(preset, FALLBACK_DATASET), False)

"""Per-image PSNR / SSIM / MAE under an explicit, recorded protocol (the paper's Table 1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from put.config.evaluation import MetricProtocol
from put.data.images import read_rgb
from put.errors import FileMismatchError, InputError


def _check_rgb_uint8(name: str, a: np.ndarray) -> None:
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"{name} must be an HxWx3 uint8 array, got {a.dtype} {a.shape}")


def paste_known(result: np.ndarray, image: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The result with the known pixels (keep > 0) of the input `image` pasted back over its own: the evaluation's
    compositing rule "pasted" (put.config.evaluation), applied alike to every method's results, PUT's raw samples
    and another codebase's folder (pasting twice changes nothing)."""
    _check_rgb_uint8("result", result)
    _check_rgb_uint8("image", image)
    keep = np.asarray(keep).reshape(image.shape[:2]) > 0
    if result.shape != image.shape:
        raise ValueError(f"result {result.shape} and image {image.shape} differ in size")
    return np.where(keep[..., None], image, result)


def opencv_gray(rgb: np.ndarray) -> np.ndarray:
    """OpenCV's cvtColor(RGB2GRAY) of an HxWx3 uint8 RGB image, bit-exact (its uint8 path is this 15-bit
    fixed-point sum; checked on all 2^24 colours against opencv-python-headless 4.5.5 and 5.0.0)."""
    r, g, b = (rgb[..., k].astype(np.uint32) for k in range(3))
    return ((9798 * r + 19235 * g + 3735 * b + (1 << 14)) >> 15).astype(np.uint8)


def _prepare(a: np.ndarray, grayscale: str) -> np.ndarray:
    if grayscale == "opencv":
        return opencv_gray(a)
    if grayscale == "pil":
        return np.asarray(Image.fromarray(a, "RGB").convert("L"))
    return a


def relative_mae(a: np.ndarray, b: np.ndarray) -> float:
    """sum|a-b| / sum(a+b) on [0,1] (scale-free). Two all-black images count as identical: 0. (The released
    code sums in float32, here float64: on the parity fixtures the two differ by less than 4e-8.)"""
    a = a.astype(np.float64) / 255.0
    b = b.astype(np.float64) / 255.0
    denom = float(np.sum(a + b))
    return float(np.sum(np.abs(a - b)) / denom) if denom > 0 else 0.0


def image_metrics(result: np.ndarray, target: np.ndarray, protocol: MetricProtocol) -> dict[str, float]:
    """PSNR, SSIM and MAE of a result against its target (HxWx3 uint8), as the released cal_psnr.py: PSNR on
    float32 images in [0, 1], SSIM on uint8, target first. Identical images give PSNR +inf, kept unclipped.
    """
    _check_rgb_uint8("result", result)
    _check_rgb_uint8("target", target)
    if result.shape != target.shape:
        raise ValueError(f"result {result.shape} and target {target.shape} differ in size")
    h, w = result.shape[:2]
    if min(h, w) < protocol.ssim_window:
        raise InputError(f"image {h}x{w} is smaller than the SSIM window {protocol.ssim_window}; "
                         "choose a smaller odd ssim_window in the protocol")
    a, b = _prepare(result, protocol.grayscale), _prepare(target, protocol.grayscale)
    scale = np.float32(protocol.data_range)
    with np.errstate(divide="ignore"):  # identical images: log10(x / 0) -> inf, intended
        psnr = peak_signal_noise_ratio(b.astype(np.float32) / scale, a.astype(np.float32) / scale, data_range=1.0)
    ssim = structural_similarity(
        b, a, win_size=protocol.ssim_window, gaussian_weights=protocol.ssim_gaussian,
        data_range=protocol.data_range, channel_axis=2 if protocol.grayscale == "none" else None)
    return {"psnr": float(psnr), "ssim": float(ssim), "mae": relative_mae(a, b)}


def metrics_table(pairs: list[tuple[Path, Path]], protocol: MetricProtocol) -> pd.DataFrame:
    """One row per (result, target) file pair: result, target, psnr, ssim, mae.

    The protocol is attached as `df.attrs["protocol"]` so it travels with the numbers.
    """
    rows = []
    for result_path, target_path in pairs:
        result, target = read_rgb(result_path), read_rgb(target_path)
        if result.shape != target.shape:
            raise FileMismatchError(f"size mismatch: result {result_path} is {result.shape[1]}x{result.shape[0]}, "
                             f"target {target_path} is {target.shape[1]}x{target.shape[0]}")
        try:
            values = image_metrics(result, target, protocol)
        except ValueError as e:
            raise InputError(f"{result_path} vs {target_path}: {e}") from e
        rows.append({"result": str(result_path), "target": str(target_path), **values})
    df = pd.DataFrame(rows, columns=["result", "target", "psnr", "ssim", "mae"])
    df.attrs["protocol"] = protocol.model_dump()
    return df

"""The built-in classical baselines of params.yaml's `external`: OpenCV's Telea (fast marching) and scikit-image's
biharmonic inpainting, deterministic, on a test image with its mask's holes blanked (docs/external.md)."""

from __future__ import annotations

import numpy as np

TELEA_RADIUS = 3  # pixels around a hole pixel that its value is marched from (OpenCV's usual choice)


def _telea(rgb: np.ndarray, hole: np.ndarray) -> np.ndarray:
    import cv2

    # cv2.inpaint takes every non-zero mask pixel as hole; all channels in one call.
    return cv2.inpaint(rgb, hole.astype(np.uint8) * 255, TELEA_RADIUS, cv2.INPAINT_TELEA)


def _biharmonic(rgb: np.ndarray, hole: np.ndarray) -> np.ndarray:
    from skimage.restoration import inpaint_biharmonic

    filled = inpaint_biharmonic(rgb.astype(np.float64) / 255.0, hole, channel_axis=-1)  # channels in one call
    return np.clip(np.rint(filled * 255.0), 0, 255).astype(np.uint8)


METHODS = {"telea": _telea, "biharmonic": _biharmonic}


def inpaint(method: str, rgb: np.ndarray, hole: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 completed by `method` where `hole` (H, W bool) is True; the known pixels kept exactly. The
    hole's pixels are zeroed first, so that nothing of the ground truth under the hole reaches the method."""
    if method not in METHODS:
        raise ValueError(f"unknown built-in method {method!r}; expected one of {', '.join(METHODS)}")
    blanked = np.where(hole[..., None], 0, rgb).astype(np.uint8)
    filled = METHODS[method](blanked, hole)
    return np.where(hole[..., None], filled, rgb).astype(np.uint8)

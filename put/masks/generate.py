"""Random keep-masks (float32, 1 = known, 0 = hole): PConv-style irregular holes, masks of irregular holes
or DeepFill-style strokes with a hole ratio in a given range, and the token-resolution blocky mask. (The
released training pipeline's strokes, drawn as known pixels up to a keep ratio, are in put.masks.strokes.)

Randomness comes from the Generator passed in. Lengths are given at 256x256 and scaled by `unit` =
sqrt(H * W) / 256, so a mask looks alike at any size. Shapes are drawn with PIL on one canvas, never per pixel.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw

from put.masks.io import MaskError

Size = tuple[int, int]
# An element draws one shape (holes = 255) onto a canvas: (draw, size, rng, scale) -> None.
Element = Callable[[ImageDraw.ImageDraw, Size, np.random.Generator, float], None]
MaskKind = Literal["irregular", "stroke"]

# A generator redraws a mask that came out hole-free or all-hole (possible at tiny sizes); this bounds it.
_REDRAWS = 100


def _check_size(size: Size) -> tuple[int, int]:
    if len(size) != 2 or int(size[0]) < 1 or int(size[1]) < 1:
        raise ValueError(f"mask size must be (H, W) with positive sides, got {size!r}")
    return int(size[0]), int(size[1])


def _unit(size: Size) -> float:
    return math.sqrt(size[0] * size[1]) / 256


def _canvas(size: Size) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    img = Image.new("L", (size[1], size[0]), 0)
    return img, ImageDraw.Draw(img)


def _holes(img: Image.Image) -> np.ndarray:
    return np.asarray(img) > 0


def _thick_polyline(draw: ImageDraw.ImageDraw, points: np.ndarray, width: float) -> None:
    """A brush stroke through `points` (N, 2) as (x, y): segments plus round caps and joints."""
    w = max(1, int(round(width)))
    if len(points) > 1:
        draw.line([tuple(p) for p in points], fill=255, width=w, joint="curve")
    r = w / 2
    for x, y in points:
        draw.ellipse([x - r, y - r, x + r, y + r], fill=255)


def _walk(start: np.ndarray, angles: np.ndarray, lengths: np.ndarray, size: Size) -> np.ndarray:
    """Vertices of a walk from `start`, clipped to the image after each step (as DeepFill v2 does)."""
    hi = np.array([size[1] - 1, size[0] - 1], dtype=np.float64)
    steps = np.stack([np.cos(angles), np.sin(angles)], axis=1) * lengths[:, None]
    points = [start]
    for step in steps:  # sequential: the clip of one step moves the origin of the next
        points.append(np.clip(points[-1] + step, 0, hi))
    return np.array(points)


def _random_point(size: Size, rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(0, 1, 2) * np.array([size[1] - 1, size[0] - 1])


# ---------------------------------------------------------------------------------------------------
# Strokes (DeepFill v2 / ICT free-form masks), an element of mask_with_ratio

def _stroke_part(draw: ImageDraw.ImageDraw, size: Size, rng: np.random.Generator, scale: float = 1.0, *,
                 max_vertices: int = 25, max_length: float = 100, min_length: float = 0, min_brush: int = 10,
                 max_brush: int = 24) -> None:
    """One brush stroke: a walk of random vertices, angles and lengths with one brush width."""
    unit = _unit(size) * scale
    n = int(rng.integers(1, max_vertices + 1))
    angles = rng.uniform(0, 2 * np.pi, n)
    lengths = rng.uniform(min_length, max_length, n) * unit
    brush = (int(rng.integers(min_brush, max_brush + 1)) // 2 * 2) * unit
    _thick_polyline(draw, _walk(_random_point(size, rng), angles, lengths, size), brush)


# ---------------------------------------------------------------------------------------------------
# Irregular blobs (PConv-style holes, for when no PConv mask set is configured)

def _blob_walk(draw: ImageDraw.ImageDraw, size: Size, rng: np.random.Generator, scale: float = 1.0) -> None:
    """A thick, smoothly turning random walk (a scratch or smear)."""
    unit = _unit(size) * scale
    n = int(rng.integers(3, 12))
    angles = rng.uniform(0, 2 * np.pi) + np.cumsum(rng.normal(0, 0.6, n))
    lengths = rng.uniform(10, 40, n) * unit
    _thick_polyline(draw, _walk(_random_point(size, rng), angles, lengths, size), rng.uniform(6, 30) * unit)


def _blob_polygon(draw: ImageDraw.ImageDraw, size: Size, rng: np.random.Generator, scale: float = 1.0) -> None:
    """A filled star-shaped polygon; with many smooth radii it is a rotated ellipse-like blob."""
    unit = _unit(size) * scale
    n = int(rng.integers(5, 16))
    theta = np.sort(rng.uniform(0, 2 * np.pi, n))
    axes = rng.uniform(10, 60, 2) * unit
    rotation = rng.uniform(0, np.pi)
    radii = rng.uniform(0.6, 1.0, n)
    x, y = np.cos(theta) * axes[0] * radii, np.sin(theta) * axes[1] * radii
    c, s = np.cos(rotation), np.sin(rotation)
    points = np.stack([c * x - s * y, s * x + c * y], axis=1) + _random_point(size, rng)
    draw.polygon([tuple(p) for p in points], fill=255, outline=255)


def _blob_line(draw: ImageDraw.ImageDraw, size: Size, rng: np.random.Generator, scale: float = 1.0) -> None:
    """A straight thick line (PConv masks have many thin straight cuts)."""
    unit = _unit(size) * scale
    start = _random_point(size, rng)
    angle = rng.uniform(0, 2 * np.pi)
    end = start + rng.uniform(30, 160) * unit * np.array([np.cos(angle), np.sin(angle)])
    _thick_polyline(draw, np.stack([start, end]), rng.uniform(4, 20) * unit)


_BLOBS: tuple[Element, ...] = (_blob_walk, _blob_polygon, _blob_line)


def _blob(draw: ImageDraw.ImageDraw, size: Size, rng: np.random.Generator, scale: float = 1.0) -> None:
    _BLOBS[int(rng.integers(len(_BLOBS)))](draw, size, rng, scale)


def irregular_mask(size: Size, rng: np.random.Generator, *, min_blobs: int = 1, max_blobs: int = 28) -> np.ndarray:
    """PConv-style irregular keep-mask (H, W): a random number of walks, blobs and lines of varied thickness."""
    size = _check_size(size)

    def draw_once() -> np.ndarray:
        img, draw = _canvas(size)
        for _ in range(int(rng.integers(min_blobs, max_blobs + 1))):
            _blob(draw, size, rng)
        return _holes(img)

    return _non_trivial(draw_once, "irregular_mask", size)


def _non_trivial(draw_once: Callable[[], np.ndarray], name: str, size: Size) -> np.ndarray:
    """Redraw until the mask has a hole and a known pixel (every consumer rejects the other two)."""
    for _ in range(_REDRAWS):
        holes = draw_once()
        if holes.any() and not holes.all():
            return (~holes).astype(np.float32)
    raise MaskError(f"{name}: no mask with both holes and known pixels in {_REDRAWS} draws at size {size}")


# ---------------------------------------------------------------------------------------------------
# Masks with a prescribed hole ratio

_ELEMENTS: dict[str, Element] = {"irregular": _blob, "stroke": _stroke_part}


def _reachable(lo: float, hi: float, n_pixels: int) -> bool:
    """Whether some hole count k in [1, N-1] has k/N in [lo, hi) (a mask neither empty nor full)."""
    k = max(1, math.ceil(lo * n_pixels) - 1)
    while k / n_pixels < lo:  # ceil of a float product may be off by one; settle it with the exact test
        k += 1
    return k <= n_pixels - 1 and k / n_pixels < hi


def mask_with_ratio(size: Size, lo: float, hi: float, rng: np.random.Generator, *, kind: MaskKind = "irregular",
                    max_tries: int = 20, max_elements: int = 2000) -> np.ndarray:
    """Keep-mask (H, W) whose hole ratio lies in [lo, hi).

    Grows elements towards a target drawn uniformly in [lo, hi), so ratios do not pile up at lo. An element
    reaching hi is dropped and later ones drawn smaller (or the mask returned if already in range); a stalled
    try starts again.
    """
    size = _check_size(size)
    if kind not in _ELEMENTS:
        raise ValueError(f"mask_with_ratio: kind must be one of {', '.join(_ELEMENTS)}, got {kind!r}")
    n_pixels = size[0] * size[1]
    if not (0 <= lo < hi) or not _reachable(lo, hi, n_pixels):
        raise MaskError(f"mask_with_ratio: no mask of {size[0]}x{size[1]} pixels with both holes and known "
                        f"pixels has a hole ratio in [{lo}, {hi})")
    element = _ELEMENTS[kind]
    target = rng.uniform(lo, hi)
    for _ in range(max_tries):
        holes = np.zeros(size, dtype=bool)
        count, scale = 0, 1.0
        for _ in range(max_elements):
            img, draw = _canvas(size)
            element(draw, size, rng, scale)
            grown = holes | _holes(img)
            grown_count = int(np.count_nonzero(grown))
            if grown_count / n_pixels >= hi or grown_count == n_pixels:
                if count and count / n_pixels >= lo:
                    return (~holes).astype(np.float32)
                scale *= 0.8  # overshoot: smaller elements from now on
                continue
            holes, count = grown, grown_count
            if count and count / n_pixels >= max(lo, target):
                return (~holes).astype(np.float32)
    raise MaskError(f"mask_with_ratio: no {kind} mask of {size[0]}x{size[1]} with hole ratio in [{lo}, {hi}) "
                    f"after {max_tries} tries of {max_elements} elements")


# ---------------------------------------------------------------------------------------------------
# Token-resolution blocky masks

def blocky(keep: np.ndarray, patch_size: int) -> np.ndarray:
    """Keep-mask (..., H, W) resampled at token resolution and back by nearest neighbour, as the released
    `mask_low_to_high`: OpenCV's nearest-neighbour downsampling picks each patch's top-left pixel, and every
    pixel of the patch takes its value. The hole ratio is kept on average (not grown)."""
    keep = np.asarray(keep)
    *lead, height, width = keep.shape
    p = int(patch_size)
    if p < 1 or height % p or width % p:
        raise ValueError(f"blocky: mask of {height}x{width} (HxW) is not divisible into {patch_size}x{patch_size} "
                         "patches")
    corners = keep[..., ::p, ::p]
    return np.repeat(np.repeat(corners, p, axis=-2), p, axis=-1).astype(np.float32)

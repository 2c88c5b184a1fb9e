"""Free-form stroke masks as the released PUT training pipeline draws them (`generate_stroke_mask` with a
`keep_ratio`, image_synthesis/data/utils/util.py of the authors' code), reimplemented on a numpy Generator: the
strokes are the *known* pixels, added up to a keep ratio (docs/model.md, "Training masks")."""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import ndimage

from put.masks.generate import Size, _check_size, _unit


@functools.cache
def _disk(radius: int) -> np.ndarray:
    """OpenCV's filled circle of an integer radius: the lattice points within the radius."""
    offsets = np.arange(-radius, radius + 1)
    return offsets[:, None] ** 2 + offsets[None, :] ** 2 <= radius**2


def _mark_disk(known: np.ndarray, x: int, y: int, radius: int) -> None:
    h, w = known.shape
    top, left = y - radius, x - radius
    rows, cols = slice(max(top, 0), min(y + radius + 1, h)), slice(max(left, 0), min(x + radius + 1, w))
    known[rows, cols] |= _disk(radius)[rows.start - top:rows.stop - top, cols.start - left:cols.stop - left]


def _segment(known: np.ndarray, x0: int, y0: int, x1: int, y1: int, thickness: int) -> None:
    """Mark cv2.line's thick line from (x0, y0) to (x1, y1) as known: circles of radius (thickness + 1) // 2 at
    both ends and pixel centres within thickness / 2 + 0.5 (OpenCV fills scanlines inclusively; differs from
    cv2.line in 0.7 % of pixels). The released start ring lies inside the circle."""
    radius = (thickness + 1) // 2
    _mark_disk(known, x0, y0, radius)
    _mark_disk(known, x1, y1, radius)
    dx, dy = x1 - x0, y1 - y0
    if not (dx or dy):
        return
    h, w = known.shape
    half = thickness / 2 + 0.5
    reach = math.ceil(half)
    top, left = max(min(y0, y1) - reach, 0), max(min(x0, x1) - reach, 0)
    bottom, right = min(max(y0, y1) + reach + 1, h), min(max(x0, x1) + reach + 1, w)
    ys = np.arange(top - y0, bottom - y0)[:, None]
    xs = np.arange(left - x0, right - x0)[None, :]
    length2 = dx * dx + dy * dy
    along = xs * dx + ys * dy
    across = xs * dy - ys * dx
    known[top:bottom, left:right] |= (along >= 0) & (along <= length2) & (across * across <= half * half * length2)


def _stroke(known: np.ndarray, rng: np.random.Generator, unit: float, *, min_vertices: int, max_vertices: int,
            max_length: int, min_brush: int, max_brush: int, max_angle: int, rectangles: tuple[int, int] = (0, 0),
            rectangle_ratio: tuple[float, float] = (0.1, 0.8)) -> None:
    """One stroke (the released `np_free_form_mask`), marked in `known`. With `rectangles` (TPAMI), a number of
    rectangles drawn from that range is then cleared from this stroke alone (not from earlier ones)."""
    if rectangles[1] > 0:
        part = np.zeros_like(known)
        _stroke(part, rng, unit, min_vertices=min_vertices, max_vertices=max_vertices, max_length=max_length,
                min_brush=min_brush, max_brush=max_brush, max_angle=max_angle)
        _clear_rectangles(part, rng, rectangles, rectangle_ratio)
        known |= part
        return
    h, w = known.shape
    n = int(rng.integers(min_vertices, max_vertices + 1))
    y, x = int(rng.integers(h)), int(rng.integers(w))
    angles = rng.integers(max_angle + 1, size=n) / 360.0 * 2 * np.pi
    angles[::2] = 2 * np.pi - angles[::2]  # the released code mirrors the angle of every even segment
    lengths = rng.integers(max_length + 1, size=n) * unit
    brushes = np.round(rng.integers(min_brush, max_brush + 1, size=n) // 2 * 2 * unit).astype(int)
    # Each segment starts where the clipped previous one ended.
    for angle, length, brush in zip(angles.tolist(), lengths.tolist(), brushes.tolist()):
        next_y = int(min(max(y + length * math.cos(angle), 0), h - 1))
        next_x = int(min(max(x + length * math.sin(angle), 0), w - 1))
        _segment(known, x, y, next_x, next_y, brush)
        y, x = next_y, next_x


def _clear_rectangles(known: np.ndarray, rng: np.random.Generator, count: tuple[int, int],
                      ratio: tuple[float, float]) -> None:
    """Clear a number of axis-aligned rectangles drawn from `count`, each side a fraction of the image's side
    drawn from `ratio` (minRectangle, maxRectangle, minRectangleRatio, maxRectangleRatio)."""
    h, w = known.shape
    for _ in range(int(rng.integers(count[0], count[1] + 1))):
        rw = int(rng.integers(int(w * ratio[0]), int(w * ratio[1]) + 1))
        rh = int(rng.integers(int(h * ratio[0]), int(h * ratio[1]) + 1))
        x, y = int(rng.integers(0, w - rw + 1)), int(rng.integers(0, h - rh + 1))
        known[y:y + rh, x:x + rw] = False


def fill_small_holes(known: np.ndarray, min_area: float) -> np.ndarray:
    """Known (bool, H x W) with every enclosed hole whose contour area is below min_area made known.

    As the released code's RETR_TREE contours below min_area: an enclosed hole's contour runs through its
    4-adjacent known pixels, so by Pick's theorem its area is holes + boundary / 2 - 1. (Its fillConvexPoly of
    small outer contours only closes concavities of specks; not reproduced.)
    """
    labels, count = ndimage.label(~known)
    if count == 0:
        return known
    area = np.bincount(labels.ravel(), minlength=count + 1)
    small = area + 1 < min_area
    small[0] = False
    small[np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))] = False  # not enclosed
    # A hole's 4-neighbours outside it are known (a hole neighbour would belong to it), and an enclosed hole's
    # neighbours lie inside its bounding box grown by one pixel.
    fill = np.zeros_like(small)
    boxes = ndimage.find_objects(labels)
    for label in np.flatnonzero(small):
        rows, cols = boxes[label - 1]
        window = labels[rows.start - 1:rows.stop + 1, cols.start - 1:cols.stop + 1] == label
        boundary = np.count_nonzero(ndimage.binary_dilation(window) & ~window)
        fill[label] = area[label] + boundary / 2 - 1 < min_area
    return known | fill[labels]


def stroke_keep_mask(size: Size, rng: np.random.Generator, *, keep_ratio: tuple[float, float], min_vertices: int,
                     max_vertices: int, max_length: int, min_brush: int, max_brush: int, max_angle: int,
                     min_area: int, rectangles: tuple[int, int] = (0, 0),
                     rectangle_ratio: tuple[float, float] = (0.1, 0.8)) -> np.ndarray:
    """Keep-mask (H, W) float32 (1 = known) of strokes covering at least a keep ratio drawn uniformly from
    `keep_ratio`; released parameter names: minVertex, maxVertex, maxLength, minBrushWidth, maxBrushWidth,
    maxAngle, min_area. A target of exactly 0 draws no stroke (an all-hole mask), as released."""
    size = _check_size(size)
    lo, hi = keep_ratio
    if not 0 <= lo < hi <= 1:
        raise ValueError(f"stroke_keep_mask: keep_ratio must be (lo, hi) with 0 <= lo < hi <= 1, got {keep_ratio!r}")
    if not (1 <= min_vertices <= max_vertices and 1 <= min_brush <= max_brush and max_length >= 0
            and max_angle >= 0 and min_area >= 0):
        raise ValueError(f"stroke_keep_mask: need 1 <= min_vertices <= max_vertices, 1 <= min_brush <= max_brush and "
                         f"non-negative max_length, max_angle, min_area; got vertices {min_vertices}..{max_vertices}, "
                         f"brush {min_brush}..{max_brush}, max_length {max_length}, max_angle {max_angle}, "
                         f"min_area {min_area}")
    unit = _unit(size)
    target = rng.uniform(lo, hi)
    known = np.zeros(size, dtype=bool)
    while np.count_nonzero(known) / known.size < target:
        _stroke(known, rng, unit, min_vertices=min_vertices, max_vertices=max_vertices, max_length=max_length,
                min_brush=min_brush, max_brush=max_brush, max_angle=max_angle, rectangles=rectangles,
                rectangle_ratio=rectangle_ratio)
    return fill_small_holes(known, min_area * unit**2).astype(np.float32)

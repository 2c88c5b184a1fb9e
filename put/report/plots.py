"""Figures: metrics against the fine hole-ratio bins, and grids of inpainted samples.

Built on `matplotlib.figure.Figure`, never pyplot: no global backend switch, no figure registry to leak.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from put.config import PALETTE, VARIANT_COLOURS, VARIANTS
from put.config.bins import FINE_BINS
from put.io.files import atomic_path
from put.metrics.image import paste_known

CURVE_METRICS: dict[str, str] = {"psnr": "PSNR (dB, higher is better)", "ssim": "SSIM (higher is better)",
                                 "mae": "MAE (lower is better)", "fid": "FID (lower is better)",
                                 "lpips": "LPIPS diversity (higher is more diverse)"}


def save_figure(fig: Figure, path: str | os.PathLike, dpi: float = 100) -> Path:
    """Save via a temporary file + os.replace, so a reader never sees half a PNG."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".").lower() or "png", dpi=dpi)
    return path


def series_colours(names: Sequence[str]) -> dict[str, str]:
    """Each variant in its colour (the same in dvc plots and on the serve page); other series (official weights)
    in the palette's colours after the variants'."""
    others = iter(PALETTE[len(VARIANTS):] * len(names))
    return {name: VARIANT_COLOURS.get(name) or next(others) for name in names}


def measurable(curves: pd.DataFrame, metric: str) -> bool:
    """Whether any fine bin has a value of `metric` (a curve can be drawn)."""
    return metric in curves.columns and bool(curves[metric].notna().any())


def plot_curves(curves: pd.DataFrame, metrics: Sequence[str], path: str | os.PathLike) -> Path:
    """One panel per metric against the hole ratio, a line per variant with its interval as a band (variants with
    no value left out). Every metric must be measurable: the report says why a curve is missing. One row per
    variant and bin."""
    for column in ("variant", "bin"):
        if column not in curves.columns:
            raise ValueError(f"curves frame lacks column {column!r}")
    if curves.duplicated(["variant", "bin"]).any():
        raise ValueError("curves frame has more than one row per (variant, bin): select one seed replicate")
    for metric in metrics:
        if metric not in CURVE_METRICS:
            raise ValueError(f"unknown curve metric {metric!r}; expected one of {', '.join(CURVE_METRICS)}")
        if not measurable(curves, metric):
            raise ValueError(f"no value of {metric!r} in any bin: nothing to draw")
    bins = [b for b in FINE_BINS if b in set(curves["bin"])]
    x = np.array([100 * sum(FINE_BINS[b]) / 2 for b in bins])
    variants = [v for v in VARIANTS if v in set(curves["variant"])]
    variants += sorted(set(curves["variant"]) - set(variants))  # unknown names still drawn, last
    colours = series_colours(variants)
    fig = Figure(figsize=(4.2 * len(metrics), 3.6), layout="constrained")
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics):
        for variant in variants:
            rows = curves[curves["variant"] == variant].set_index("bin").reindex(bins)
            values = rows[metric].astype(float)
            if not values.notna().any():
                continue
            line, = ax.plot(x, values.to_numpy(), marker="o", label=variant, color=colours[variant])
            if {f"{metric}_lo", f"{metric}_hi"} <= set(rows.columns):
                ax.fill_between(x, rows[f"{metric}_lo"].astype(float).to_numpy(),
                                rows[f"{metric}_hi"].astype(float).to_numpy(), color=line.get_color(), alpha=0.15,
                                linewidth=0)
        ax.set_title(CURVE_METRICS[metric], fontsize="medium")
        ax.set_xticks(x, [f"{b}%" for b in bins], fontsize="small")
        ax.set_xlabel("hole ratio (fine bin)")
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize="small")
    return save_figure(fig, path)


def masked_input(image: np.ndarray, keep_mask: np.ndarray, color: Sequence[int] = (255, 255, 255)) -> np.ndarray:
    """The masked input as a viewer should see it: hole pixels (keep_mask == 0) painted `color`."""
    image = _check_image(image)
    keep = np.asarray(keep_mask)
    if keep.ndim == 3 and keep.shape[-1] == 1:
        keep = keep[..., 0]
    if keep.shape != image.shape[:2]:
        raise ValueError(f"keep mask of shape {keep.shape} does not match image of shape {image.shape}")
    out = image.copy()
    out[keep == 0] = np.asarray(color, dtype=np.uint8)
    return out


def pasted_back(result: np.ndarray, image: np.ndarray, keep_mask: np.ndarray) -> np.ndarray:
    """The result with the known pixels (keep_mask == 1) of `image` pasted back over the decoder's."""
    return paste_known(_check_image(result), _check_image(image), keep_mask)


def _check_image(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(f"expected a uint8 HxWx3 image, got {image.dtype} of shape {image.shape}")
    return image


def sample_grid(rows: Sequence[Sequence[np.ndarray]], column_titles: Sequence[str], path: str | os.PathLike,
                row_titles: Sequence[str] | None = None) -> Path:
    """A PNG grid, one row per input (e.g. masked input, samples..., ground truth), images shown pixel
    for pixel at their size (nearest-neighbour, no smoothing)."""
    if not rows:
        raise ValueError("sample_grid needs at least one row")
    ncols = len(column_titles)
    if any(len(r) != ncols for r in rows):
        raise ValueError(f"every row must have {ncols} images (one per column title)")
    if row_titles is not None and len(row_titles) != len(rows):
        raise ValueError("row_titles must have one entry per row")
    images = [[_check_image(im) for im in row] for row in rows]
    height = max(im.shape[0] for row in images for im in row)
    cell = 2.0  # inches; dpi chosen so that the tallest image keeps its pixels
    dpi = max(72.0, height / (cell * 0.85))
    fig = Figure(figsize=(cell * ncols, cell * len(rows) + 0.3), layout="constrained")
    axes = fig.subplots(len(rows), ncols, squeeze=False)
    for r, row in enumerate(images):
        for c, im in enumerate(row):
            ax = axes[r][c]
            ax.imshow(im, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(column_titles[c], fontsize="small")
            if c == 0 and row_titles is not None:
                ax.set_ylabel(row_titles[r], fontsize="small")
    return save_figure(fig, path, dpi=dpi)

"""Figures: FID / LPIPS curves over the fine mask-ratio bins, and grids of inpainted samples.

Figures are built on `matplotlib.figure.Figure` directly (rendered by Agg on save), never through pyplot:
no global backend switch, no figure registry to leak from a long-running stage.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from put.config import VARIANTS
from put.fileio import atomic_path
from put.masks.bins import FINE_BINS

CURVE_METRICS: dict[str, str] = {"fid": "FID (lower is better)", "lpips": "LPIPS diversity (higher is more diverse)"}


def _save(fig: Figure, path: str | os.PathLike, dpi: float = 100) -> Path:
    """Save via a temporary file + os.replace, so a reader never sees half a PNG."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".").lower() or "png", dpi=dpi)
    return path


def _reasons(frame: pd.DataFrame, metric: str) -> list[str]:
    column = f"{metric}_unavailable"
    if column not in frame.columns:
        return []
    found = frame.loc[frame[metric].isna(), column]
    return list(dict.fromkeys(str(r) for r in found if isinstance(r, str) and r.strip()))


def plot_curves(curves: pd.DataFrame, metric: str, path: str | os.PathLike, title: str | None = None) -> Path:
    """`metric` (fid or lpips) against the mask-ratio bin, one line per variant. If no value is available,
    the figure says "unavailable: <reason>" instead; partly missing lines are drawn where they have values."""
    if metric not in CURVE_METRICS:
        raise ValueError(f"unknown curve metric {metric!r}; expected one of {', '.join(CURVE_METRICS)}")
    for column in ("variant", "bin", metric):
        if column not in curves.columns:
            raise ValueError(f"curves frame lacks column {column!r}")
    bins = [b for b in FINE_BINS if b in set(curves["bin"])]
    variants = [v for v in VARIANTS if v in set(curves["variant"])]
    variants += sorted(set(curves["variant"]) - set(variants))  # unknown names still drawn, last
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title or CURVE_METRICS[metric])
    reasons = _reasons(curves, metric)
    if not curves[metric].notna().any():
        text = "unavailable: " + ("; ".join(reasons) if reasons else "no values")
        ax.text(0.5, 0.5, textwrap.fill(text, 60), ha="center", va="center", transform=ax.transAxes, wrap=True)
        ax.set_axis_off()
        return _save(fig, path)
    x = np.arange(len(bins))
    for variant in variants:
        values = curves[curves["variant"] == variant].set_index("bin")[metric].reindex(bins).astype(float)
        label = variant if values.notna().any() else f"{variant} (n/a)"
        ax.plot(x, values.to_numpy(), marker="o", label=label)
    ax.set_xticks(x, [f"{b}%" for b in bins])
    ax.set_xlabel("mask ratio")
    ax.set_ylabel(metric.upper())
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    if reasons:
        fig.text(0.01, 0.01, textwrap.fill("n/a: " + "; ".join(reasons), 100), fontsize="x-small", va="bottom")
    return _save(fig, path)


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
    return _save(fig, path, dpi=dpi)

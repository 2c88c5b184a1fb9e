"""The two releases side by side: PUT as in the CVPR 2022 paper (variant `put`) and as in its TPAMI 2024
extension (variant `tpami`), trained on the same data and measured on the same masks under one protocol.

`generations_table` (a dagger where TPAMI's paired difference survives its family's correction),
`diversity_table` and `plot_generations_frontier` (both speed/quality frontiers in one figure).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from put.config import GENERATION_NAMES, TPAMI_VARIANT
from put.config.evaluation import SampleConfig
from put.report.differences import marks_sentence, significant_cells
from put.report.frontier import QUALITY, label_panel, panels
from put.report.latex import Table, latex_escape
from put.report.plots import save_figure
from put.report.tables import (
    METRICS,
    MODE_LABELS,
    Row,
    cell_text,
    footnotes,
    interval_sentence,
    measured,
    sample_sizes,
    styled,
)

RELEASES: dict[str, str] = {"put": f"PUT, {GENERATION_NAMES['cvpr2022']}",
                            TPAMI_VARIANT: f"PUT, {GENERATION_NAMES['tpami2024']}"}
GENERATIONS_FIGURE = "generations_frontier.png"


def sampling_sentence(sample: SampleConfig) -> str:
    per_step = (f"schedule {sample.schedule}" if sample.schedule else
                f"{sample.tokens_per_step} token{'s' * (sample.tokens_per_step > 1)} per forward")
    return (f"Both sampled alike: $\\mathcal{{K}}={sample.top_k}$, {latex_escape(per_step)}, temperature "
            f"{sample.temperature:g}; deterministic: every token at once by argmax.")


def generations_table(metrics: pd.DataFrame, preset: str, differences: pd.DataFrame | None, sample: SampleConfig,
                      level: float = 0.95) -> Table:
    """Per metric and sampling mode, the CVPR row then the TPAMI row, over the Table 1 mask groups; a dagger where
    the TPAMI model's paired difference from the CVPR one survives its family's correction (`differences`: the
    releases' own families, put.stats.differences.paired_differences of `put` and `tpami` only)."""
    family = differences[(differences["variant"] == TPAMI_VARIANT) & differences["mode"].isin(list(MODE_LABELS))] \
        if differences is not None else None
    rows = [Row(metric, block, label, *measured(metrics, variant, mode, metric),
                key=(mode,) if variant == TPAMI_VARIANT else None)
            for metric in METRICS for mode, block in MODE_LABELS.items() for variant, label in RELEASES.items()]
    tested = marks_sentence(
        family, level, "the TPAMI model differs from the CVPR one", per="sampling mode", more=" A family: PSNR, SSIM, "
        "MAE x mask group in one sampling mode (the paired difference of the TPAMI model's mean per-image value "
        "from the CVPR one's on the same test images, masks and sample draws). FID is not tested.")
    caption = (f"The two releases side by side, preset \\texttt{{{latex_escape(preset)}}}: PUT as in the CVPR 2022 "
               "paper and as in its TPAMI 2024 extension, each trained with its authors' settings on the same "
               f"images and evaluated on the same masks. {sampling_sentence(sample)} Bold: the better per column and "
               f"metric.{sample_sizes(metrics, list(RELEASES))}{interval_sentence(metrics, level)}{tested}")
    return styled(rows, ("Sampling", "Release"), caption, significant_cells(family, "mode", "metric", "group"))


def diversity_table(curves: pd.DataFrame, preset: str, level: float = 0.95) -> Table:
    """LPIPS diversity (mean pairwise LPIPS of the samples of one input) per hole-ratio bin, each release a row."""
    bins = list(dict.fromkeys(curves["bin"])) if len(curves) else []
    values, halves, reasons = [], [], []
    for variant in RELEASES:
        part = curves[curves["variant"] == variant].set_index("bin").reindex(bins)
        value = part.get("lpips", pd.Series(np.nan, index=bins)).astype(float)
        lo, hi = (part.get(f"lpips_{end}", pd.Series(np.nan, index=bins)).astype(float) for end in ("lo", "hi"))
        why = part.get("lpips_unavailable", pd.Series("", index=bins)).fillna("")
        values.append(value.to_numpy())
        halves.append(((hi - lo) / 2).to_numpy())
        reasons.append([(w or "not measured") if np.isnan(v) else "" for v, w in zip(value, why)])
    index = pd.Index(list(RELEASES.values()), name="Release")
    columns = pd.Index([f"{b}" for b in bins], name=r"Holes (\%)")
    frame = pd.DataFrame(values, index=index, columns=columns, dtype=float)
    marks, notes = footnotes(pd.DataFrame(reasons, index=index, columns=columns))
    decimals = np.full(frame.shape, 4)
    shown = cell_text(frame, decimals, marks, pd.DataFrame(halves, index=index, columns=columns))
    styler = shown.style
    styler.hide(axis="index", names=True)
    styler.set_table_styles([{"selector": "column_format", "props": f":l{'r' * len(bins)};"}], overwrite=False)
    interval = (rf" Small type: $\pm$ half the width of the {level:.0%} percentile bootstrap interval over the test "
                "images.".replace("%", r"\%") if np.isfinite(np.asarray(halves, float)).any() else "")
    caption = (f"Diversity of the two releases, preset \\texttt{{{latex_escape(preset)}}}: mean pairwise LPIPS of "
               f"the samples of one input, per hole-ratio bin (higher: more diverse).{interval}")
    return Table(styler.set_caption(f"{caption} {notes}".strip()), notes)


def plot_generations_frontier(frames: dict[str, pd.DataFrame], path: str | os.PathLike) -> Path:
    """Each measured quality metric against forward passes per image (log x) for every release's frontier
    (`frames`: variant -> its frontier.csv), one colour per release, one marker per sampling family."""
    metrics = [m for m in QUALITY if any(f[m].notna().any() for f in frames.values())]
    if not metrics:
        raise ValueError("no quality metric was measured: nothing to plot")
    groups = list(dict.fromkeys(g for f in frames.values() for g in f["group"]))
    fig, axes = panels(metrics, groups)
    markers = {"tokens_per_step": "o", "cosine": "s", "schedule": "D", "argmax": "*"}
    for colour, (variant, frame) in zip(("C0", "C3"), frames.items()):
        for row, group in zip(axes, groups):
            part = frame[frame["group"] == group]
            for ax, metric in zip(row, metrics):
                for (family, k), line in part.groupby(["family", "top_k"], sort=False, dropna=False):
                    line = line.sort_values("forward_passes")
                    label = f"{RELEASES.get(variant, variant)}: {family}" + ("" if pd.isna(k) else f", K={int(k)}")
                    ax.plot(line["forward_passes"], line[metric], marker=markers.get(family, "."), color=colour,
                            linestyle="-" if family != "argmax" else "", alpha=1.0 if pd.isna(k) or k == 50 else 0.5,
                            label=label)
                label_panel(ax, metric, group)
    axes[0][-1].legend(fontsize="xx-small")
    return save_figure(fig, path)


GENERATIONS_CAPTION = ("Speed/quality frontiers of the two releases: quality against the transformer forward passes an "
                       "image needs (log scale), the CVPR model in blue, the TPAMI model in red (solid: top-K 50, "
                       "faded: other K; circles: N tokens per step, squares: cosine over S steps, diamonds: the TPAMI "
                       "release's schedules, stars: argmax at once).")

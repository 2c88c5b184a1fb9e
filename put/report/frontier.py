"""The speed/quality frontier as a LaTeX table and a figure (quality against transformer forward passes)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from pandas.io.formats.style import Styler

from put.report.plots import save_figure
from put.report.tables import BOLD, best_cells, cell_text, footnotes, latex_escape, reason_latex

FRONTIER_TABLE = "frontier.tex"
FRONTIER_FIGURE = "frontier.png"
FRONTIER_CAPTION = ("Speed/quality frontier of the full model: quality against the transformer forward passes an "
                    "image needs (log scale); the ringed point is Algorithm 1, one token per step.")
# column -> (header, decimals, lower is better; None: not ranked)
COLUMNS: dict[str, tuple[str, int, bool | None]] = {
    "forward_passes": ("Forwards / image", 1, None), "ms_per_image": ("ms / image", 1, None),
    "psnr": (r"PSNR $\uparrow$", 3, False), "ssim": (r"SSIM $\uparrow$", 3, False), "mae": (r"MAE $\downarrow$", 4, True),
    "lpips": (r"LPIPS $\uparrow$", 4, False), "fid": (r"FID $\downarrow$", 3, True),
}
QUALITY = ("psnr", "ssim", "mae", "lpips", "fid")
YLABELS = {"psnr": "PSNR (dB)", "ssim": "SSIM", "mae": "MAE", "lpips": "LPIPS diversity", "fid": "FID"}


def _check(frame: pd.DataFrame) -> pd.DataFrame:
    needed = ["setting", "label", "family", "value", "top_k", "group", "forward_passes", "seconds_per_image", *QUALITY]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"frontier frame lacks column(s) {', '.join(missing)}")
    return frame


def frontier_table(frame: pd.DataFrame, preset: str, variant: str = "put") -> Styler:
    """One row per setting (and mask group): cost, then quality; the best quality per column and group in
    bold (every row is measured), one footnote per reason a value is n/a."""
    frame = _check(frame).assign(ms_per_image=1000 * frame["seconds_per_image"])
    order = {g: i for i, g in enumerate(dict.fromkeys(frame["group"]))}
    frame = frame.sort_values("group", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
    # A quality metric measured for no setting gets a sentence, not a column of n/a.
    absent = [c for c in QUALITY if frame[c].isna().all()]
    columns = {c: v for c, v in COLUMNS.items() if c not in absent}
    k = frame["top_k"].map(lambda v: "" if pd.isna(v) else rf", $\mathcal{{K}}={int(v)}$")
    # Two index levels: a rule only where the mask group changes.
    index = pd.MultiIndex.from_arrays([frame["group"] + r"\%", frame["label"] + k], names=["Holes", "Sampling"])
    values = pd.DataFrame(frame[list(columns)].to_numpy(float), index=index,
                          columns=[header for header, _, _ in columns.values()])
    reasons = pd.DataFrame([[frame[f"{c}_unavailable"].iloc[i] if f"{c}_unavailable" in frame and pd.isna(
        frame[c].iloc[i]) else "" for c in columns] for i in range(len(frame))], index=index, columns=values.columns)
    decimals = np.tile([d for _, d, _ in columns.values()], (len(frame), 1))
    best = np.zeros(values.shape, dtype=bool)
    for j, (_, _, lower) in enumerate(columns.values()):
        if lower is not None:
            column = values.iloc[:, [j]]
            best[:, j] = best_cells(column, decimals[:, [j]], np.full(len(frame), lower), frame["group"].to_numpy(),
                                    np.ones(len(frame), dtype=bool))[:, 0]
    marks, notes = footnotes(reasons)
    styler = cell_text(values, decimals, marks).style.apply(lambda _: np.where(best, BOLD, ""), axis=None)
    styler.set_table_styles([{"selector": "footnotesize", "props": ":;"},
                             {"selector": "column_format", "props": f":ll{'r' * len(columns)};"}], overwrite=False)
    first = frame.iloc[0]
    n = int(frame["n"].max()) if "n" in frame else 0
    samples = int(frame["samples"].max()) if "samples" in frame else 1
    caption = (f"Speed against quality, preset \\texttt{{{latex_escape(preset)}}}, variant "
               f"\\texttt{{{latex_escape(variant)}}}: {n} test "
               f"images per mask group, {samples} sample(s) per image (argmax: one). Forwards: transformer forward "
               "passes one image needs on its own (Algorithm 1: one per masked patch). Time: wall time per image "
               f"of encoding, sampling and decoding, in batches of {int(first.get('batch_size', 0))} on "
               f"{latex_escape(first.get('device', '?'))} ({latex_escape(first.get('precision', '?'))}). "
               "Bold: best quality per column and mask group."
               + "".join(f" {COLUMNS[c][0].split()[0]} not measured: " + "; ".join(
                   reason_latex(r) for r in dict.fromkeys(frame[f"{c}_unavailable"]) if r) + "." for c in absent))
    styler.unavailable_notes = notes
    return styler.set_caption(f"{caption} {notes}".strip())


def plot_frontier(frame: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Each measurable quality metric against forward passes per image (log x), one panel per metric and one
    row per mask group; a line per sampling family and K, argmax as a single point, Algorithm 1 ringed."""
    frame = _check(frame)
    metrics = [m for m in QUALITY if frame[m].notna().any()]
    if not metrics:
        raise ValueError("no quality metric was measured: nothing to plot")
    groups = list(dict.fromkeys(frame["group"]))
    fig = Figure(figsize=(4.0 * len(metrics), 3.4 * len(groups) + 0.4), layout="constrained")
    axes = fig.subplots(len(groups), len(metrics), squeeze=False)
    styles = {"tokens_per_step": ("o", "-", "N tokens/step"), "cosine": ("s", "--", "cosine, S steps"),
              "schedule": ("D", ":", "TPAMI schedule, S steps")}
    colours = {k: f"C{i}" for i, k in enumerate(sorted(frame["top_k"].dropna().unique()))}
    for row, group in zip(axes, groups):
        part = frame[frame["group"] == group]
        for ax, metric in zip(row, metrics):
            for (family, k), line in part[part["family"] != "argmax"].groupby(["family", "top_k"], sort=False):
                marker, dash, name = styles[family]
                line = line.sort_values("forward_passes")
                ax.plot(line["forward_passes"], line[metric], marker=marker, linestyle=dash, color=colours[k],
                        label=f"{name}, K={int(k)}")
                for _, r in line.iterrows():  # N or S beside each point
                    ax.annotate(str(int(r["value"])), (r["forward_passes"], r[metric]), xytext=(3, 3),
                                textcoords="offset points", fontsize=6, color=colours[k])
            for _, r in part[part["family"] == "argmax"].iterrows():
                ax.plot([r["forward_passes"]], [r[metric]], marker="*", markersize=12, color="black", linestyle="",
                        label="argmax, all at once")
            for _, r in part[(part["family"] == "tokens_per_step") & (part["value"] == 1)].iterrows():
                ax.plot([r["forward_passes"]], [r[metric]], marker="o", markersize=15, fillstyle="none",
                        color="crimson", linestyle="", label="1 token/step (Algorithm 1)" if r["top_k"] == min(
                            colours) else None)
            ax.set_xscale("log")
            ax.set_xlabel("forward passes per image")
            ax.set_ylabel(YLABELS[metric])
            ax.set_title(f"{group}% holes", fontsize="small")
            ax.grid(alpha=0.3, which="both")
    axes[0][-1].legend(fontsize="x-small")
    return save_figure(fig, path)

"""The speed/quality frontier as a LaTeX table and a figure (quality against transformer forward passes), each
point with the paired interval of its difference from the exact schedule (one token per step at its K)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from put.errors import InputError
from put.report.differences import SIGNIFICANT, family_sentence
from put.report.latex import Table, latex_escape, reason_latex
from put.report.plots import save_figure
from put.report.tables import best_cells, cell_text, footnotes

FRONTIER_TABLE = "frontier.tex"
FRONTIER_FIGURE = "frontier.png"
FRONTIER_CAPTION = ("Speed/quality frontier of the full model: quality against the transformer forward passes an "
                    "image needs (log scale); the ringed point is Algorithm 1, one token per step. Error bars: "
                    "Algorithm 1's value plus the paired bootstrap interval of the setting's difference from it "
                    "(same test images and masks, their sources resampled), where enough sources allow one; a filled "
                    "marker: the difference survives the family's correction (the frontier table's daggers).")
def frontier_stem(variant: str) -> str:
    """frontier (PUT's, as before) or frontier_<variant>."""
    return Path(FRONTIER_TABLE).stem + ("" if variant == "put" else f"_{variant}")


# column -> (header, decimals, lower is better; None: not ranked)
COLUMNS: dict[str, tuple[str, int, bool | None]] = {
    "forward_passes": ("Forwards / image", 1, None), "ms_per_image": ("ms / image", 1, None),
    "psnr": (r"PSNR $\uparrow$", 3, False), "ssim": (r"SSIM $\uparrow$", 3, False),
    "mae": (r"MAE $\downarrow$", 4, True),
    "lpips": (r"LPIPS $\uparrow$", 4, False), "fid": (r"FID $\downarrow$", 3, True),
}
QUALITY = ("psnr", "ssim", "mae", "lpips", "fid")
# per metric, beside its value: the difference from the reference setting, its interval, raw and adjusted p-value,
# whether it survives the family's correction and why there is no interval
DIFFERENCE_COLUMNS = ("diff", "diff_lo", "diff_hi", "p", "p_adjusted", "significant", "resamples",
                      "no_interval")
YLABELS = {"psnr": "PSNR (dB)", "ssim": "SSIM", "mae": "MAE", "lpips": "LPIPS diversity", "fid": "FID"}


def _check(frame: pd.DataFrame) -> pd.DataFrame:
    needed = ["setting", "label", "family", "value", "top_k", "group", "forward_passes", "seconds_per_image", *QUALITY]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"frontier frame lacks column(s) {', '.join(missing)}")
    return frame


def frontier_table(frame: pd.DataFrame, preset: str, variant: str = "put", level: float = 0.95) -> Table:
    """One row per setting and group: cost, then quality with its paired half width from the exact schedule and a
    dagger where it survives the correction; the best bold only if it survives too. One footnote per reason."""
    frame = _check(frame).assign(ms_per_image=1000 * frame["seconds_per_image"])
    order = {g: i for i, g in enumerate(dict.fromkeys(frame["group"]))}
    frame = frame.sort_values("group", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
    # A quality metric measured for no setting gets a sentence, not a column of n/a.
    absent = [c for c in QUALITY if frame[c].isna().all()]
    columns = {c: v for c, v in COLUMNS.items() if c not in absent}
    k = frame["top_k"].map(lambda v: "" if pd.isna(v) else rf", $\mathcal{{K}}={int(v)}$")
    # Two index levels: a rule only where the mask group changes.
    index = pd.MultiIndex.from_arrays([frame["group"] + r"\%", frame["label"] + k], names=["Holes", "Sampling"])
    headers = [header for header, _, _ in columns.values()]
    values = pd.DataFrame(frame[list(columns)].to_numpy(float), index=index, columns=headers)

    def per_cell(column: str, default: object) -> pd.DataFrame:
        return pd.DataFrame({h: frame[f"{c}_{column}"] if f"{c}_{column}" in frame else default
                             for h, c in zip(headers, columns)}, index=frame.index).set_axis(index)

    unavailable, no_interval = per_cell("unavailable", ""), per_cell("no_interval", "")
    reasons = pd.DataFrame(np.where(values.isna(), unavailable.fillna(""), no_interval.fillna("")), index=index,
                           columns=headers)
    halves = (per_cell("diff_hi", np.nan).astype(float) - per_cell("diff_lo", np.nan).astype(float)) / 2
    significant = per_cell("significant", False).fillna(False).astype(bool)
    decimals = np.tile([d for _, d, _ in columns.values()], (len(frame), 1))
    best = np.zeros(values.shape, dtype=bool)
    for j, (_, _, lower) in enumerate(columns.values()):
        if lower is not None:
            best[:, j] = best_cells(values.iloc[:, [j]], decimals[:, [j]], np.full(len(frame), lower),
                                    frame["group"].to_numpy(), np.ones(len(frame), dtype=bool))[:, 0]
    best &= significant.to_numpy()  # "best" only where it is told apart from exact sampling
    marks, notes = footnotes(reasons)
    styler = cell_text(values, decimals, marks, halves, best, significant).style
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
               f"{differences_sentence(frame, level)} Bold: the best quality per column and mask group, only where its "
               "difference survives that correction."
               + "".join(f" {COLUMNS[c][0].split()[0]} not measured: " + "; ".join(
                   reason_latex(r) for r in dict.fromkeys(frame[f"{c}_unavailable"]) if r) + "." for c in absent))
    return Table(styler.set_caption(f"{caption} {notes}".strip()), notes)


def differences_sentence(frame: pd.DataFrame, level: float) -> str:
    """What the small numbers and daggers of the frontier table are (LaTeX)."""
    long = pd.DataFrame([{"metric": m, "p": row.get(f"{m}_p", np.nan),
                          "significant": bool(row.get(f"{m}_significant", False)),
                          "no_interval": row.get(f"{m}_no_interval", "") if isinstance(row.get(f"{m}_no_interval"),
                                                                                       str) else ""}
                         for _, row in frame[frame["reference"].notna()].iterrows() for m in QUALITY
                         if pd.notna(row[m])]) if "reference" in frame else pd.DataFrame()
    if long.empty:
        return "No setting has a reference to be compared with (frontier.tokens_per_step lacks 1)."
    method = frame["method"].dropna().iloc[0] if "method" in frame and frame["method"].notna().any() else "holm"
    return (rf"Small type: $\pm$ half the width of the paired {level:.0%} bootstrap interval of the setting's "
            "difference from Algorithm 1 (one token per step) at the same $\\mathcal{K}$ (argmax: the preset's), on "
            "the same test images and masks, their sources resampled. ".replace("%", r"\%")
            + SIGNIFICANT + reason_latex(family_sentence(long, method, level, "the setting differs from Algorithm 1")))


def error_bars(rows: pd.DataFrame, metric: str) -> np.ndarray:
    """(2, N) below/above each point: its reference's value plus the paired interval of its difference, as
    distances from the point (0 where there is no interval)."""
    if f"{metric}_diff_lo" not in rows:
        return np.zeros((2, len(rows)))
    below = rows[f"{metric}_diff"] - rows[f"{metric}_diff_lo"]
    above = rows[f"{metric}_diff_hi"] - rows[f"{metric}_diff"]
    return np.nan_to_num(np.stack([below.to_numpy(float), above.to_numpy(float)]), nan=0.0)


def panels(metrics: list[str], groups: list[str]) -> tuple[Figure, np.ndarray]:
    """A figure of frontier panels: one row per mask group, one column per metric."""
    fig = Figure(figsize=(4.0 * len(metrics), 3.4 * len(groups) + 0.4), layout="constrained")
    return fig, fig.subplots(len(groups), len(metrics), squeeze=False)


def label_panel(ax, metric: str, group: str) -> None:
    """A frontier panel's axes: forward passes per image (log) against the metric, titled by its mask group."""
    ax.set_xscale("log")
    ax.set_xlabel("forward passes per image")
    ax.set_ylabel(YLABELS[metric])
    ax.set_title(f"{group}% holes", fontsize="small")
    ax.grid(alpha=0.3, which="both")


def plot_frontier(frame: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Each quality metric against forward passes per image (log x), a panel per metric and group: a line per family
    and K, argmax a point, Algorithm 1 ringed; error bars of the paired difference, filled where it survives."""
    frame = _check(frame)
    metrics = [m for m in QUALITY if frame[m].notna().any()]
    if not metrics:
        raise InputError("no quality metric was measured: nothing to plot")
    groups = list(dict.fromkeys(frame["group"]))
    fig, axes = panels(metrics, groups)
    styles = {"tokens_per_step": ("o", "-", "N tokens/step"), "cosine": ("s", "--", "cosine, S steps"),
              "schedule": ("D", ":", "TPAMI schedule, S steps")}
    colours = {k: f"C{i}" for i, k in enumerate(sorted(frame["top_k"].dropna().unique()))}

    def survives(rows: pd.DataFrame, metric: str) -> np.ndarray:
        column = f"{metric}_significant"
        return rows[column].fillna(False).astype(bool).to_numpy() if column in rows else np.zeros(len(rows), bool)

    for row, group in zip(axes, groups):
        part = frame[frame["group"] == group]
        for ax, metric in zip(row, metrics):
            for (family, k), line in part[part["family"] != "argmax"].groupby(["family", "top_k"], sort=False):
                marker, dash, name = styles[family]
                line = line.sort_values("forward_passes")
                ax.errorbar(line["forward_passes"], line[metric], yerr=error_bars(line, metric), marker=marker,
                            linestyle=dash, color=colours[k], mfc="white", capsize=2, elinewidth=0.8,
                            label=f"{name}, K={int(k)}")
                strong = survives(line, metric)
                ax.plot(line["forward_passes"][strong], line[metric][strong], marker=marker, linestyle="",
                        color=colours[k])
                for _, r in line.iterrows():  # N or S beside each point
                    ax.annotate(str(int(r["value"])), (r["forward_passes"], r[metric]), xytext=(3, 3),
                                textcoords="offset points", fontsize=6, color=colours[k])
            argmax = part[part["family"] == "argmax"]
            if len(argmax):
                ax.errorbar(argmax["forward_passes"], argmax[metric], yerr=error_bars(argmax, metric), marker="*",
                            markersize=12, color="black", linestyle="", capsize=2, elinewidth=0.8,
                            label="argmax, all at once")
            for _, r in part[(part["family"] == "tokens_per_step") & (part["value"] == 1)].iterrows():
                ax.plot([r["forward_passes"]], [r[metric]], marker="o", markersize=15, fillstyle="none",
                        color="crimson", linestyle="", label="1 token/step (Algorithm 1)" if r["top_k"] == min(
                            colours) else None)
            label_panel(ax, metric, group)
    axes[0][-1].legend(fontsize="x-small")
    return save_figure(fig, path)

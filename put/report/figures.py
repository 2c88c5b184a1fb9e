"""The report's figures: the caption of the grid of PUT's samples, and the metrics' curves against the hole ratio
(with what could not be drawn, and why)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from put.metrics.summary import PIXEL_METRICS
from put.report.latex import reason_latex
from put.report.plots import CURVE_METRICS, measurable, plot_curves


def grid_caption(composited: bool) -> str:
    if composited:
        return "PUT: masked inputs (40--50\\% holes), samples (known pixels pasted back), ground truth."
    return ("PUT: masked inputs (40--50\\% holes); each sample as the decoder outputs it (raw: what the metrics are "
            "computed on, as in the paper's evaluation; the decoder redraws the known region too, so it differs "
            "from the input there) and beside it with the known pixels pasted back (what \\texttt{put inpaint} "
            "returns); ground truth.")


CURVE_CAPTIONS = {
    "fid": "FID against the hole ratio ($\\mathcal{K}$ sampling, first sample per input).",
    "lpips": "Diversity (mean pairwise LPIPS of the samples of one input) against the hole ratio.",
}


def curve_figures(curves: pd.DataFrame, out_dir: Path, level: float = 0.95) -> tuple[dict[Path, str], list[str]]:
    """PSNR/SSIM/MAE curves, and FID and LPIPS ones where measured: (figure -> caption, notes on what is not
    drawn)."""
    figures, notes = {}, []
    shaded = any(curves.get(f"{m}_lo", pd.Series(dtype=float)).notna().any() for m in CURVE_METRICS)
    band = (f" Shaded: the {level:.0%} percentile bootstrap interval over the test images of the bin."
            .replace("%", r"\%") if shaded else "")
    pixel = [m for m in PIXEL_METRICS if measurable(curves, m)]
    if pixel:
        figures[plot_curves(curves, pixel, out_dir / "curves_psnr_ssim_mae.png")] = (
            "PSNR, SSIM and MAE against the hole ratio (mean over every sample of the fine bin), one line per "
            f"variant.{band}")
    for metric, caption in CURVE_CAPTIONS.items():
        if measurable(curves, metric):
            figures[plot_curves(curves, [metric], out_dir / f"curve_{metric}.png")] = caption + band
            continue
        reasons = sorted({r for r in curves.get(f"{metric}_unavailable", []) if r}) or ["no value was measured"]
        notes.append(f"{metric.upper()} curve not drawn: " + "; ".join(reason_latex(r) for r in reasons) + ".")
    return figures, notes

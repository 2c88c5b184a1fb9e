"""Stage `report`: every variant's metrics -> the paper's tables (LaTeX), curves, a sample grid, the
tidy numbers (metrics.csv) and a LaTeX document including them (compiled when pdflatex exists), with the
speed table and, when given, the speed/quality frontier. A curve that cannot be drawn (FID, LPIPS without
their pretrained weights) is not drawn: the document says why in one line instead."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from put.config.params import Params
from put.fileio import atomic_write_text
from put.report.document import compile_pdf, write_document
from put.report.frontier import FRONTIER_CAPTION, FRONTIER_FIGURE, FRONTIER_TABLE
from put.report.plots import masked_input, measurable, plot_curves, sample_grid
from put.report.tables import reason_latex, speed_table, table1, table3, write_latex
from put.stages.evaluate import PIXEL_METRICS, read_metrics
from put.tracking import git_commit, stage_tracker, tracked


def grid_rows(samples: Path, masks: Path, images: int = 4, columns: int = 4) -> tuple[list[list[np.ndarray]], list[str]]:
    """Masked input, `columns` top-K samples and the ground truth for a few images of the 40-50% bin."""
    jobs = pd.read_csv(samples / "samples.csv")
    diversity = jobs[(jobs["mode"] == "diversity") & (jobs["group"] == "40-50")]
    rows = []
    for _, rows_of_image in list(diversity.groupby("image", sort=True))[:images]:
        mask = rows_of_image["mask"].iloc[0]
        gt = np.asarray(Image.open(masks / "gt" / f"{Path(mask).stem}.png").convert("RGB"))
        keep = (np.asarray(Image.open(masks / mask)) < 128).astype(np.float32)
        outs = [np.asarray(Image.open(samples / o).convert("RGB")) for o in rows_of_image["output"].head(columns)]
        rows.append([masked_input(gt, keep), *outs, gt])
    return rows, ["masked input", *[f"sample {i + 1}" for i in range(columns)], "ground truth"]


def read_benchmarks(folder: Path) -> dict[str, list[dict]]:
    """`put bench` results in `folder` (sampling.json, pvqvae.json; a list, or one result from older files)."""
    found = {}
    for kind in ("sampling", "pvqvae"):
        if (path := Path(folder) / f"{kind}.json").is_file():
            data = json.loads(path.read_text())
            found[kind] = data if isinstance(data, list) else [data]
    return found


CURVE_CAPTIONS = {
    "fid": "FID against the hole ratio ($\\mathcal{K}$ sampling, first sample per input).",
    "lpips": "Diversity (mean pairwise LPIPS of the samples of one input) against the hole ratio.",
}


def curve_figures(curves: pd.DataFrame, out_dir: Path) -> tuple[dict[Path, str], list[str]]:
    """PSNR/SSIM/MAE curves, and FID and LPIPS ones where measured: (figure -> caption, notes on what is not
    drawn). A figure that is not drawn is removed, so an earlier run's cannot pass for this one's."""
    figures, notes = {}, []
    pixel = [m for m in PIXEL_METRICS if measurable(curves, m)]
    if pixel:
        figures[plot_curves(curves, pixel, out_dir / "curves_psnr_ssim_mae.png")] = (
            "PSNR, SSIM and MAE against the hole ratio (mean over every sample of the fine bin), one line per variant.")
    for metric, caption in CURVE_CAPTIONS.items():
        path = out_dir / f"curve_{metric}.png"
        if measurable(curves, metric):
            figures[plot_curves(curves, [metric], path)] = caption
            continue
        path.unlink(missing_ok=True)
        reasons = sorted({r for r in curves.get(f"{metric}_unavailable", []) if r}) or ["no value was measured"]
        notes.append(f"{metric.upper()} curve not drawn: " + "; ".join(reason_latex(r) for r in reasons) + ".")
    return figures, notes


def run_report(params: Params, metrics_files: list[Path], samples_root: Path, masks: Path, benchmarks: Path,
               out_dir: Path, tags: dict[str, str] | None = None, frontier: Path | None = None) -> Path:
    preset = params.preset
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    command = "python -m put " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "put report"
    commit = git_commit() or "unknown"
    metrics, curves = read_metrics(metrics_files)
    atomic_write_text(out_dir / "metrics.csv", metrics.to_csv(index=False))
    atomic_write_text(out_dir / "curves.csv", curves.to_csv(index=False))

    tables = [write_latex(table1(metrics, preset), out_dir / "table1.tex", None, "tab:table1", command, commit),
              write_latex(table3(metrics, preset), out_dir / "table3.tex", None, "tab:table3", command, commit)]
    bench = read_benchmarks(Path(benchmarks))
    if bench:
        tables.append(write_latex(speed_table(bench.get("sampling", []), bench.get("pvqvae", [])),
                                  out_dir / "speed.tex", None, "tab:speed", command, commit))

    figures, notes = curve_figures(curves, out_dir)
    if frontier is not None:  # the frontier stage's table and figure, copied so the folder stands alone
        tables.append(Path(shutil.copy2(Path(frontier) / FRONTIER_TABLE, out_dir / FRONTIER_TABLE)))
        figures[Path(shutil.copy2(Path(frontier) / FRONTIER_FIGURE, out_dir / FRONTIER_FIGURE))] = FRONTIER_CAPTION
    rows, titles = grid_rows(Path(samples_root) / "put", Path(masks))
    if rows:
        figures[sample_grid(rows, titles, out_dir / "samples_put.png")] = "PUT: masked inputs (40--50\\% holes), samples, ground truth."
    tex = write_document(out_dir, tables, figures, f"PUT reproduction: {preset} preset", command, commit, notes)
    if shutil.which("pdflatex"):
        compile_pdf(tex)
        for byproduct in (".aux", ".log", ".out"):  # kept by compile_pdf for diagnosing failures only
            tex.with_suffix(byproduct).unlink(missing_ok=True)
    else:
        print("pdflatex not found: report.tex written but not compiled (Debian: texlive-latex-base "
              "texlive-latex-recommended)")

    with tracked(stage_tracker(preset, None, "report", params.dag_id(), tags)) as tracker:
        for path in [*tables, *figures, tex, out_dir / "metrics.csv"]:
            tracker.log_artifact(path)
    return out_dir

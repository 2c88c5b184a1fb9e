"""Stage `report`: every variant's metrics -> the paper's tables (LaTeX), curves, a sample grid, the
tidy numbers (metrics.csv) and a LaTeX document including them (compiled when pdflatex exists)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from put.config.params import Params
from put.fileio import atomic_write_text
from put.paths import REPORT_PDF, path_of
from put.report.document import LATEX_PACKAGES, compile_pdf, write_document
from put.report.plots import masked_input, plot_curves, sample_grid
from put.report.tables import speed_table, table1, table3, write_latex
from put.stages.evaluate import read_metrics
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


def run_report(params: Params, metrics_files: list[Path], samples: Path, masks: Path, benchmarks: Path,
               out_dir: Path, tags: dict[str, str] | None = None, resolved_params: Path | None = None) -> Path:
    """Tables, figures and report.tex in `out_dir`; the PDF, when pdflatex exists, at paths.REPORT_PDF (outside
    `out_dir`, which the DAG clears before this stage runs, so that no machine deletes a committed PDF)."""
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
    bench = {kind: [json.loads(p.read_text())] for kind in ("sampling", "pvqvae")
             if (p := Path(benchmarks) / f"{kind}.json").is_file()}
    if bench:
        tables.append(write_latex(speed_table(bench.get("sampling", []), bench.get("pvqvae", [])),
                                  out_dir / "speed.tex", None, "tab:speed", command, commit))

    figures = {plot_curves(curves, "fid", out_dir / "curve_fid.png"): "FID against the mask ratio ($\\mathcal{K}$ sampling).",
               plot_curves(curves, "lpips", out_dir / "curve_lpips.png"): "Diversity (mean pairwise LPIPS) against the mask ratio."}
    rows, titles = grid_rows(Path(samples), Path(masks))
    if rows:
        figures[sample_grid(rows, titles, out_dir / "samples_put.png")] = "PUT: masked inputs (40--50\\% holes), samples, ground truth."
    if resolved_params is not None:
        shutil.copyfile(resolved_params, out_dir / "resolved_params.yaml")
    tex = write_document(out_dir, tables, figures, f"PUT reproduction: {preset} preset", command, commit)
    pdf = path_of(REPORT_PDF, preset)
    if shutil.which("pdflatex"):
        compiled = compile_pdf(tex)
        for byproduct in (".aux", ".log", ".out"):  # kept by compile_pdf for diagnosing failures only
            tex.with_suffix(byproduct).unlink(missing_ok=True)
        os.replace(compiled, pdf)
        print(f"report compiled: {pdf}")
    else:
        state = f"{pdf} was left as it was (an earlier run's)" if pdf.exists() else f"{pdf} was not written"
        print(f"pdflatex not found: {tex} written but not compiled, and {state}. Install it (Debian: "
              f"{LATEX_PACKAGES}; `make tex` as root) and re-run this stage.")

    with tracked(stage_tracker(preset, None, "report", params.dag_id(), tags)) as tracker:
        for path in [*tables, *figures, tex, out_dir / "metrics.csv"]:
            tracker.log_artifact(path)
    return out_dir

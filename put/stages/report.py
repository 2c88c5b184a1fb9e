"""Stage `report`: every variant's metrics -> the paper's tables (LaTeX), curves, a sample grid, the
tidy numbers (metrics.csv) and a LaTeX document including them (compiled when pdflatex exists)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

import numpy as np

from put.config.params import Params
from put.data.images import read_rgb
from put.fileio import atomic_dir, atomic_write_text, read_json
from put.masks.io import read_mask
from put.paths import REPORT_PDF, path_of
from put.report.document import LATEX_PACKAGES, compile_pdf, write_document
from put.report.plots import masked_input, plot_curves, sample_grid
from put.report.tables import speed_table, table1, table3, write_latex
from put.stages.evaluate import read_metrics
from put.stages.sample import read_samples
from put.tracking import git_commit, stage_tracker, tracked


def grid_rows(samples: Path, masks: Path, images: int = 4, columns: int = 4) -> tuple[list[list[np.ndarray]], list[str]]:
    """Masked input, `columns` top-K samples (fewer if fewer were drawn) and the ground truth for a few images
    of the 40-50% bin."""
    jobs = read_samples(samples)
    diversity = jobs[(jobs["mode"] == "diversity") & (jobs["group"] == "40-50")]
    chosen = list(diversity.groupby("image", sort=True))[:images]
    columns = min([columns, *(len(rows_of_image) for _, rows_of_image in chosen)])
    rows = []
    for _, rows_of_image in chosen:
        mask = rows_of_image["mask"].iloc[0]
        gt = read_rgb(masks / "gt" / f"{Path(mask).stem}.png")
        keep = read_mask(masks / mask)[0].numpy()
        outs = [read_rgb(samples / o) for o in rows_of_image["output"].head(columns)]
        rows.append([masked_input(gt, keep), *outs, gt])
    return rows, ["masked input", *[f"sample {i + 1}" for i in range(columns)], "ground truth"]


def run_report(params: Params, metrics_files: list[Path], samples: Path, masks: Path, benchmarks: Path,
               out_dir: Path, tags: dict[str, str] | None = None, resolved_params: Path | None = None) -> Path:
    """Tables, figures and report.tex in `out_dir`; the PDF, when pdflatex exists, at paths.REPORT_PDF (outside
    `out_dir`, which the DAG clears before this stage runs, so that no machine deletes a committed PDF)."""
    preset = params.preset
    out_dir = Path(out_dir)
    command = "python -m put " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "put report"
    commit = git_commit() or "unknown"
    # Every input is read before anything is written: a bad one leaves the previous report as it was.
    metrics, curves = read_metrics(metrics_files, preset)
    bench = {kind: [read_json(p, f"`put bench {kind}` figures")] for kind in ("sampling", "pvqvae")
             if (p := Path(benchmarks) / f"{kind}.json").is_file()}
    rows, titles = grid_rows(Path(samples), Path(masks))

    pdf = path_of(REPORT_PDF, preset)
    with atomic_dir(out_dir) as staging:
        atomic_write_text(staging / "metrics.csv", metrics.to_csv(index=False))
        atomic_write_text(staging / "curves.csv", curves.to_csv(index=False))
        tables = [write_latex(table1(metrics, preset), staging / "table1.tex", None, "tab:table1", command, commit),
                  write_latex(table3(metrics, preset), staging / "table3.tex", None, "tab:table3", command, commit)]
        if bench:
            tables.append(write_latex(speed_table(bench.get("sampling", []), bench.get("pvqvae", [])),
                                      staging / "speed.tex", None, "tab:speed", command, commit))
        figures = {plot_curves(curves, "fid", staging / "curve_fid.png"): "FID against the mask ratio ($\\mathcal{K}$ sampling).",
                   plot_curves(curves, "lpips", staging / "curve_lpips.png"): "Diversity (mean pairwise LPIPS) against the mask ratio."}
        if rows:
            figures[sample_grid(rows, titles, staging / "samples_put.png")] = "PUT: masked inputs (40--50\\% holes), samples, ground truth."
        if resolved_params is not None:
            shutil.copyfile(resolved_params, staging / "resolved_params.yaml")
        tex = write_document(staging, tables, figures, f"PUT reproduction: {preset} preset", command, commit)
        if shutil.which("pdflatex"):
            compiled = compile_pdf(tex)
            for byproduct in (".aux", ".log", ".out"):  # a failure's LatexError quotes the log
                tex.with_suffix(byproduct).unlink(missing_ok=True)
            os.replace(compiled, pdf)
            print(f"report compiled: {pdf}")
        else:
            state = f"{pdf} was left as it was (an earlier run's)" if pdf.exists() else f"{pdf} was not written"
            print(f"pdflatex not found: {tex.name} written but not compiled, and {state}. Install it (Debian: "
                  f"{LATEX_PACKAGES}; `make tex` as root) and re-run this stage.")
        logged = [path.name for path in [*tables, *figures, tex, staging / "metrics.csv"]]

    with tracked(stage_tracker(preset, None, "report", params.dag_id(), tags)) as tracker:
        for name in logged:
            tracker.log_artifact(out_dir / name)
    return out_dir

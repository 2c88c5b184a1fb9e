"""Stage `report`: every variant's metrics -> the paper's tables (LaTeX), curves, a sample grid, the tidy
numbers (metrics.csv), paired differences, seed replicates and a LaTeX document including them (compiled when
pdflatex exists). A curve that cannot be drawn is left out and the document says why (docs/pipeline.md, "The
report")."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from put.config.params import Params
from put.config.paths import FRONTIER_CSV, REPORT_PDF, path_of
from put.data.folder import folder_name
from put.data.images import read_rgb
from put.io.files import atomic_dir, atomic_write_text
from put.io.versions import versions
from put.masks.io import read_mask
from put.report.benchmarks import read_cost, read_speed_rows
from put.report.cost import cost_table, evaluation_table, layouts_table, table_topk_table
from put.report.document import LATEX_PACKAGES, compile_pdf, write_document
from put.report.figures import curve_figures, grid_caption
from put.report.frontier import FRONTIER_CAPTION, FRONTIER_FIGURE, FRONTIER_TABLE, frontier_stem, frontier_table
from put.report.generations import (
    GENERATIONS_CAPTION,
    GENERATIONS_FIGURE,
    RELEASES,
    diversity_table,
    generations_table,
    plot_generations_frontier,
)
from put.report.html import write_html
from put.report.latex import Table, write_latex
from put.report.plots import masked_input, pasted_back, sample_grid
from put.report.replicates import seeds_table
from put.report.speed import speed_summary, speed_table
from put.report.table1 import measured_methods, table1
from put.report.tables import table3
from put.sampling.jobs import read_samples
from put.study.results import EvaluatedResults, read_results
from put.tracking.base import Tracker, tracked
from put.tracking.factory import stage_tracker
from put.tracking.source import git_commit

# The main part, read in minutes (docs/pipeline.md, "The report"); every other table goes to the appendix.
MAIN_TABLES = ("table1", "table3", "generations", "generations_diversity", "speed_summary")


def grid_rows(samples: Path, masks: Path, images: int = 4, columns: int = 3,
              composited: bool = False) -> tuple[list[list[np.ndarray]], list[str]]:
    """Masked input, up to `columns` top-K samples and the ground truth for a few 40-50% images. Raw decoder samples
    (`composited` False) are each shown beside the same with the known pixels pasted back."""
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
        if not composited:
            outs = [image for out in outs for image in (out, pasted_back(out, gt, keep))]
        rows.append([masked_input(gt, keep), *outs, gt])
    titles = [f"sample {i + 1}" for i in range(columns)]
    if not composited:
        titles = [title for i in range(columns) for title in (f"sample {i + 1}: raw", f"{i + 1}: pasted back")]
    return rows, ["masked input", *titles, "ground truth"]


def run_report(params: Params, metrics_files: list[Path], samples: Path, masks: Path, benchmarks: Path | None,
               out_dir: Path, tags: dict[str, str] | None = None, frontier: Path | None = None,
               resolved_params: Path | None = None, measured: Path | None = None,
               frontier_tpami: Path | None = None, command: str = "put report") -> Path:
    """Tables, figures and report.tex in `out_dir` (written whole, or not at all); the PDF, when pdflatex
    exists, at paths.REPORT_PDF, outside `out_dir`, which the DAG clears before this stage runs: a machine
    without pdflatex never deletes a committed PDF."""
    preset, protocol = params.preset, params.resolved().evaluate
    commit = git_commit() or "unknown"
    # Every input is read before anything is written: a bad one leaves the previous report as it was.
    results = read_results(params, metrics_files)
    speed, cost = read_speed_rows(benchmarks, measured), read_cost(measured)
    composited = params.resolved().sample.composite
    rows, titles = grid_rows(Path(samples), Path(masks), composited=composited)
    frontiers = {variant: Path(folder) for variant, folder in (("put", frontier), ("tpami", frontier_tpami))
                 if folder is not None}
    frames = {variant: pd.read_csv(folder / Path(FRONTIER_CSV).name) for variant, folder in frontiers.items()}

    with atomic_dir(out_dir) as staging:
        atomic_write_text(staging / "metrics.csv", results.metrics.to_csv(index=False))
        atomic_write_text(staging / "curves.csv", results.curves.to_csv(index=False))
        atomic_write_text(staging / "differences.csv", results.differences.to_csv(index=False))
        if len(results.replicates):
            atomic_write_text(staging / "seeds.csv", results.replicates.to_csv(index=False))
        tables = report_tables(params, results, speed, cost)
        own = list(tables)  # the frontiers' LaTeX tables are their stages', copied below
        for variant, frame in frames.items():
            tables[frontier_stem(variant)] = frontier_table(frame, preset, variant, level=protocol.interval_level)
        for name, table in tables.items():  # HTML beside each LaTeX table: viewable in a browser and the
            write_html(table, staging / f"{name}.html")  # Snakemake report
        latex = {name: write_latex(tables[name], staging / f"{name}.tex", None, f"tab:{name}", command, commit)
                 for name in own}
        further, notes = curve_figures(results.base_curves, staging, protocol.interval_level)  # the appendix's
        figures = {}
        if frontier is not None:  # the frontier stages' tables and figure, copied so the folder stands alone
            figures[Path(shutil.copy2(Path(frontier) / FRONTIER_FIGURE, staging / FRONTIER_FIGURE))] = FRONTIER_CAPTION
        for variant, folder in frontiers.items():
            latex[frontier_stem(variant)] = Path(shutil.copy2(folder / FRONTIER_TABLE,
                                                              staging / f"{frontier_stem(variant)}.tex"))
        if len(frames) == len(RELEASES):
            further[plot_generations_frontier(frames, staging / GENERATIONS_FIGURE)] = GENERATIONS_CAPTION
        if rows:
            figures[sample_grid(rows, titles, staging / "samples_put.png")] = grid_caption(composited)
        if resolved_params is not None:
            shutil.copyfile(resolved_params, staging / "resolved_params.yaml")
        main = [latex[name] for name in MAIN_TABLES if name in latex]
        tex = write_document(staging, main, figures, f"PUT reproduction: {preset} preset", command, commit, notes,
                             software=versions(), appendix_tables=[p for p in latex.values() if p not in main],
                             appendix_figures=further)
        compile_report(tex, path_of(REPORT_PDF, preset))

    with tracked(stage_tracker(preset, None, "report", params.dag_id(), tags,
                               labels=params.evaluated_labels())) as tracker:
        log_outputs(tracker, out_dir)
    return out_dir


def report_tables(params: Params, results: EvaluatedResults, speed: list[dict], cost: dict | None) -> dict[str, Table]:
    """The report's own tables by name: Table 1 and Table 3, the generations', the seeds', speed and cost."""
    preset, protocol, level = params.preset, params.resolved().evaluate, params.resolved().evaluate.interval_level
    base, differences = results.base, results.differences
    own_rule = base["rule"] == protocol.known_pixels  # the main files' rule: Table 3's, the paper's
    data = params.resolved().data
    data_name = folder_name(data) if data.dataset == "folder" else None  # the user's images: no paper rows
    # Table 1 as the paper lays it out: every method it reports, beside every one measured.
    tables = {"table1": table1(base, preset, context=True, level=level, differences=differences,
                               methods=measured_methods(results.external), data_name=data_name),
              "table3": table3(base[own_rule], preset, differences, level, data_name=data_name)}
    if set(RELEASES) <= set(base["variant"]):  # both releases evaluated: side by side
        tables["generations"] = generations_table(base[own_rule], preset, differences, params.resolved().sample,
                                                  level)
        tables["generations_diversity"] = diversity_table(results.base_curves, preset, level)
    if len(results.replicates):
        tables["seeds"] = seeds_table(results.replicates, preset, level=level)
    if speed:
        tables["speed_summary"], tables["speed"] = speed_summary(speed), speed_table(speed)
    if cost is not None:
        tables["cost"] = cost_table(cost)
        if cost["layouts"]:
            tables["cost_layouts"] = layouts_table(cost)
        if cost.get("table_topk"):
            tables["cost_sampling"] = table_topk_table(cost)
        if cost.get("evaluation"):
            tables["cost_evaluation"] = evaluation_table(cost)
    return tables


def compile_report(tex: Path, pdf: Path) -> None:
    """report.tex compiled to `pdf` when pdflatex exists; else `pdf` is left as it was, and the message says so."""
    if not shutil.which("pdflatex"):
        state = f"{pdf} was left as it was (an earlier run's)" if pdf.exists() else f"{pdf} was not written"
        print(f"pdflatex not found: {tex.name} written but not compiled, and {state}. Install it (Debian: "
              f"{LATEX_PACKAGES}; `make tex` as root) and re-run this stage.")
        return
    compiled = compile_pdf(tex)
    for byproduct in (".aux", ".log", ".out"):  # a failure's LatexError quotes the log
        tex.with_suffix(byproduct).unlink(missing_ok=True)
    pdf.parent.mkdir(parents=True, exist_ok=True)
    os.replace(compiled, pdf)
    print(f"report compiled: {pdf}")


def log_outputs(tracker: Tracker, out_dir: Path) -> None:
    """The report's run, from its folder (the stage at its end; `put track` when DVC skipped the stage): every
    file of it (tables, figures, their HTML, the tidy numbers, report.tex)."""
    for path in sorted(p for p in Path(out_dir).iterdir() if p.is_file() and not p.name.startswith(".")):
        tracker.log_artifact(path)

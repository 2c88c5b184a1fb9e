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

from put.config import TPAMI_VARIANT, VARIANTS
from put.config.evaluation import RANKED_RULE
from put.config.external import EXTERNAL_PREFIX, ExternalMethod
from put.config.params import OFFICIAL_PREFIX, Params, replicate_label
from put.config.paths import FRONTIER_CSV, REPORT_PDF, pasted_metrics_file, path_of
from put.data.folder import folder_name
from put.data.images import read_rgb
from put.io.files import atomic_dir, atomic_write_text, read_json
from put.io.versions import versions
from put.masks.io import read_mask
from put.metrics.files import read_images, read_metrics
from put.metrics.summary import PIXEL_METRICS
from put.report.benchmarks import COST_FILE, read_benchmark_rows
from put.report.cost import cost_table, evaluation_table, layouts_table, table_topk_table
from put.report.document import LATEX_PACKAGES, compile_pdf, write_document
from put.report.frontier import FRONTIER_CAPTION, FRONTIER_FIGURE, FRONTIER_TABLE, frontier_table
from put.report.generations import (
    GENERATIONS_CAPTION,
    GENERATIONS_FIGURE,
    RELEASES,
    diversity_table,
    generations_table,
    plot_generations_frontier,
)
from put.report.html import write_html
from put.report.plots import CURVE_METRICS, masked_input, measurable, pasted_back, plot_curves, sample_grid
from put.report.replicates import seed_summary, seeds_table
from put.report.speed import speed_summary, speed_table
from put.report.table1 import MeasuredMethod, table1
from put.report.tables import latex_escape, reason_latex, table3, write_latex
from put.sampling.jobs import read_samples
from put.stats.bootstrap import Bootstrap
from put.stats.differences import paired_differences
from put.tracking.base import Tracker, tracked
from put.tracking.factory import stage_tracker
from put.tracking.source import git_commit

# The main part, read in minutes (docs/pipeline.md, "The report"); every other table goes to the appendix.
MAIN_TABLES = ("table1", "table3", "generations", "generations_diversity", "speed_summary")


def grid_rows(samples: Path, masks: Path, images: int = 4, columns: int = 3,
              composited: bool = False) -> tuple[list[list[np.ndarray]], list[str]]:
    """Masked input, `columns` top-K samples (fewer if fewer were drawn) and the ground truth for a few images
    of the 40-50% bin. Samples of the raw decoder (`composited` False: the evaluation's input, whose known region
    is the decoder's too) are each shown beside the same with the known pixels pasted back (what `put inpaint`
    returns)."""
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


def grid_caption(composited: bool) -> str:
    if composited:
        return "PUT: masked inputs (40--50\\% holes), samples (known pixels pasted back), ground truth."
    return ("PUT: masked inputs (40--50\\% holes); each sample as the decoder outputs it (raw: what the metrics are "
            "computed on, as in the paper's evaluation; the decoder redraws the known region too, so it differs "
            "from the input there) and beside it with the known pixels pasted back (what \\texttt{put inpaint} "
            "returns); ground truth.")


def read_speed_rows(benchmarks: Path | None, measured: Path | None) -> list[dict]:
    """Sampling and P-VQVAE rows of this run's bench stage (source "this run") and of the committed files."""
    rows = read_benchmark_rows(benchmarks, source="this run") if benchmarks is not None else []
    rows += read_benchmark_rows(measured) if measured is not None else []
    return [r for r in rows if r["benchmark"] in ("sampling", "pvqvae")]


def read_cost(measured: Path | None) -> dict | None:
    """`put cost`'s figures beside the committed benchmark rows, when they were computed."""
    path = Path(measured) / COST_FILE if measured is not None else None
    return read_json(path, "`put cost` figures") if path is not None and path.is_file() else None


def frontier_stem(variant: str) -> str:
    """frontier (PUT's, as before) or frontier_<variant>."""
    return Path(FRONTIER_TABLE).stem + ("" if variant == "put" else f"_{variant}")


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


def measured_methods(external: dict[str, ExternalMethod]) -> list[MeasuredMethod]:
    """Table 1's rows of params.yaml's `external` entries, by their evaluation's label (docs/external.md)."""
    return [MeasuredMethod(label, latex_escape(entry.label), latex_escape(entry.citation),
                           latex_escape(entry.how_run())) for label, entry in external.items()]


def run_report(params: Params, metrics_files: list[Path], samples: Path, masks: Path, benchmarks: Path | None,
               out_dir: Path, tags: dict[str, str] | None = None, frontier: Path | None = None,
               resolved_params: Path | None = None, measured: Path | None = None,
               frontier_tpami: Path | None = None, command: str = "put report") -> Path:
    """Tables, figures and report.tex in `out_dir` (written whole, or not at all); the PDF, when pdflatex
    exists, at paths.REPORT_PDF, outside `out_dir`, which the DAG clears before this stage runs: a machine
    without pdflatex never deletes a committed PDF."""
    preset = params.preset
    out_dir = Path(out_dir)
    commit = git_commit() or "unknown"
    # Every input is read before anything is written: a bad one leaves the previous report as it was.
    metrics, curves = read_metrics(metrics_files, preset)
    protocol = params.resolved().evaluate
    files = {Path(f).stem: Path(f) for f in metrics_files}
    labels = {(v, s): replicate_label(v, s) for v in VARIANTS for s in (0, *params.seeds)}
    external = {EXTERNAL_PREFIX + name: entry for name, entry in params.external.items()
                if EXTERNAL_PREFIX + name in files}
    labels |= {(label, 0): label for label in external}
    images = {key: read_images(files[label]) for key, label in labels.items() if label in files}
    # Table 1 ranks PUT, the released weights and the other methods under one rule, known pixels pasted back: the
    # evaluate stage's files of that rule, beside the main ones (docs/external.md, "One rule per block").
    ranked = [label for label in files if label == "put" or label.startswith(OFFICIAL_PREFIX) or label in external]
    of_rule = (pasted_metrics_file if protocol.known_pixels != RANKED_RULE else
               lambda main: main)  # main files of the ranked rule already: no second set
    pasted, _ = read_metrics([of_rule(files[label]) for label in ranked], preset)
    pasted_images = {(label, 0): read_images(of_rule(files[label])) for label in ranked
                     if label == "put" or label in external}
    replicates = seed_summary(metrics, protocol.interval_level)  # the main files' rule: every seed has them
    if protocol.known_pixels != RANKED_RULE:
        metrics = pd.concat([metrics, pasted], ignore_index=True)
    base, base_curves = metrics[metrics["seed"] == 0], curves[curves["seed"] == 0]
    # Three questions, three families, each of one rule: which ablations differ from PUT (Table 3, raw as the
    # paper's), which other methods differ from PUT (Table 1's ranked block, pasted), and whether the TPAMI model
    # differs from the CVPR one (the generations table).
    ablations = {key: frame for key, frame in images.items() if key[0] in VARIANTS and key[0] != TPAMI_VARIANT}
    releases = {key: frame for key, frame in images.items() if key[0] in RELEASES}
    families = [("ablations", ablations), ("releases", releases)]
    if external:
        families.insert(1, ("external methods", pasted_images))
    differences = pd.concat([paired_differences(part, PIXEL_METRICS, Bootstrap.of(protocol), protocol.multiplicity,
                                                name=name) for name, part in families], ignore_index=True)
    speed, cost = read_speed_rows(benchmarks, measured), read_cost(measured)
    composited = params.resolved().sample.composite
    rows, titles = grid_rows(Path(samples), Path(masks), composited=composited)

    pdf = path_of(REPORT_PDF, preset)
    with atomic_dir(out_dir) as staging:
        atomic_write_text(staging / "metrics.csv", metrics.to_csv(index=False))
        atomic_write_text(staging / "curves.csv", curves.to_csv(index=False))
        atomic_write_text(staging / "differences.csv", differences.to_csv(index=False))
        level = protocol.interval_level
        # Table 1 as the paper lays it out: every method it reports, beside every one measured.
        own_rule = base["rule"] == protocol.known_pixels  # the main files' rule: Table 3's, the paper's
        data = params.resolved().data
        data_name = folder_name(data) if data.dataset == "folder" else None  # the user's images: no paper rows
        stylers = {"table1": table1(base, preset, context=True, level=level, differences=differences,
                                    methods=measured_methods(external), data_name=data_name),
                   "table3": table3(base[own_rule], preset, differences, level, data_name=data_name)}
        if set(RELEASES) <= set(base["variant"]):  # both releases evaluated: side by side
            stylers["generations"] = generations_table(base[own_rule], preset, differences,
                                                       params.resolved().sample, level)
            stylers["generations_diversity"] = diversity_table(base_curves, preset, level)
        if len(replicates):
            atomic_write_text(staging / "seeds.csv", replicates.to_csv(index=False))
            stylers["seeds"] = seeds_table(replicates, preset, level=level)
        if speed:
            stylers["speed_summary"], stylers["speed"] = speed_summary(speed), speed_table(speed)
        if cost is not None:
            stylers["cost"] = cost_table(cost)
            if cost["layouts"]:
                stylers["cost_layouts"] = layouts_table(cost)
            if cost.get("table_topk"):
                stylers["cost_sampling"] = table_topk_table(cost)
            if cost.get("evaluation"):
                stylers["cost_evaluation"] = evaluation_table(cost)
        own = list(stylers)  # the frontiers' LaTeX tables are their stages', copied below
        frontiers = {variant: Path(folder) for variant, folder in (("put", frontier), ("tpami", frontier_tpami))
                     if folder is not None}
        frames = {variant: pd.read_csv(folder / Path(FRONTIER_CSV).name) for variant, folder in frontiers.items()}
        for variant, frame in frames.items():
            stylers[frontier_stem(variant)] = frontier_table(frame, preset, variant, level=protocol.interval_level)
        for name, styler in stylers.items():  # HTML beside each LaTeX table: viewable in a browser and the
            write_html(styler, staging / f"{name}.html")  # Snakemake report
        tables = {name: write_latex(stylers[name], staging / f"{name}.tex", None, f"tab:{name}", command, commit)
                  for name in own}
        further, notes = curve_figures(base_curves, staging, level)  # the appendix's figures
        figures = {}
        if frontier is not None:  # the frontier stages' tables and figure, copied so the folder stands alone
            figures[Path(shutil.copy2(Path(frontier) / FRONTIER_FIGURE, staging / FRONTIER_FIGURE))] = FRONTIER_CAPTION
        for variant, folder in frontiers.items():
            tables[frontier_stem(variant)] = Path(shutil.copy2(folder / FRONTIER_TABLE,
                                                               staging / f"{frontier_stem(variant)}.tex"))
        if len(frames) == len(RELEASES):
            further[plot_generations_frontier(frames, staging / GENERATIONS_FIGURE)] = GENERATIONS_CAPTION
        if rows:
            figures[sample_grid(rows, titles, staging / "samples_put.png")] = grid_caption(composited)
        if resolved_params is not None:
            shutil.copyfile(resolved_params, staging / "resolved_params.yaml")
        main = [tables[name] for name in MAIN_TABLES if name in tables]
        tex = write_document(staging, main, figures, f"PUT reproduction: {preset} preset", command, commit, notes,
                             software=versions(), appendix_tables=[p for p in tables.values() if p not in main],
                             appendix_figures=further)
        if shutil.which("pdflatex"):
            compiled = compile_pdf(tex)
            for byproduct in (".aux", ".log", ".out"):  # a failure's LatexError quotes the log
                tex.with_suffix(byproduct).unlink(missing_ok=True)
            pdf.parent.mkdir(parents=True, exist_ok=True)
            os.replace(compiled, pdf)
            print(f"report compiled: {pdf}")
        else:
            state = f"{pdf} was left as it was (an earlier run's)" if pdf.exists() else f"{pdf} was not written"
            print(f"pdflatex not found: {tex.name} written but not compiled, and {state}. Install it (Debian: "
                  f"{LATEX_PACKAGES}; `make tex` as root) and re-run this stage.")

    with tracked(stage_tracker(preset, None, "report", params.dag_id(), tags,
                               labels=params.evaluated_labels())) as tracker:
        log_outputs(tracker, out_dir)
    return out_dir


def log_outputs(tracker: Tracker, out_dir: Path) -> None:
    """The report's run, from its folder (the stage at its end; `put track` when DVC skipped the stage): every
    file of it (tables, figures, their HTML, the tidy numbers, report.tex)."""
    for path in sorted(p for p in Path(out_dir).iterdir() if p.is_file() and not p.name.startswith(".")):
        tracker.log_artifact(path)

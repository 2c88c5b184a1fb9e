"""Reports: reported numbers, LaTeX tables (formats, bolding, n/a notes, provenance), plots, PDF."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from put.errors import FileMismatchError
from put.report.cost import cost_table, evaluation_table, layouts_table, table_topk_table
from put.report.document import LatexError, compile_pdf, layout_problems, write_document
from put.report.latex import render_latex, write_latex
from put.report.plots import masked_input, pasted_back, plot_curves, sample_grid
from put.report.reported import (
    GROUPS,
    LOWER_IS_BETTER,
    METRICS,
    reference_dataset,
    speed_reported,
    table1_reported,
    table3_reported,
)
from put.report.speed import speed_summary, speed_table
from put.report.table1 import table1
from put.report.tables import table3
from tests.report_data import VARIANTS, bench_result, body_rows, synthetic_curves, synthetic_metrics

PAPER = Path(__file__).resolve().parents[2] / "shared" / "paper" / "put_cvpr2022.tex"


def value(cell: str) -> float:
    return float(re.match(r"(?:\\textbf\{)?(-?[\d.]+)", cell).group(1))  # marks and intervals after it


def check_bolding(latex: str, measured: set[int]) -> None:
    """Rows `measured` (indices within each metric block) are measured: exactly one bold cell per column among
    them where any value exists, holding their best value; the other (reported) rows are never bold."""
    blocks: dict[str, list[list[str]]] = {}
    for metric, cells in body_rows(latex):
        blocks.setdefault(metric, []).append(cells)
    assert len(blocks) == 4
    for label, rows in blocks.items():
        key = label.split()[0].lower()
        assert not any(c.startswith(r"\textbf") for i, r in enumerate(rows) if i not in measured for c in r), label
        for col in range(len(GROUPS)):
            cells = [r[col] for i, r in enumerate(rows) if i in measured]
            bold = [c for c in cells if c.startswith(r"\textbf")]
            numbers = [value(c) for c in cells if not c.startswith("n/a")]
            if not numbers:
                assert not bold
                continue
            best = min(numbers) if key in LOWER_IS_BETTER else max(numbers)
            assert len(bold) == 1, (label, col, cells)
            assert value(bold[0]) == best, (label, col, cells)


# ----------------------------------------------------------------------------------------- reported numbers

def test_reported_tables_are_tidy_and_complete():
    t1, t3, speed = table1_reported(), table3_reported(), speed_reported()
    assert len(t1) == 8 * 4 * 3 * 3 and len(t3) == 6 * 4 * 2 * 3
    assert set(t1["metric"]) == set(METRICS) == set(t3["metric"])
    one = t1[(t1.dataset == "FFHQ") & (t1.method == "PUT_50") & (t1.metric == "fid") & (t1.group == "20-40")]
    assert one["value"].tolist() == [12.784]
    assert speed.set_index("dataset").loc["ImageNet", "value"] == 17.186
    assert reference_dataset("demo") == ("FFHQ", False) and reference_dataset("places2") == ("Places2", True)
    with pytest.raises(ValueError, match="unknown preset"):
        reference_dataset("celeba")


def test_groups_match_the_mask_protocol():
    from put.config.bins import TABLE_GROUPS
    assert tuple(TABLE_GROUPS) == GROUPS


def _paper_rows(tex: str, label: str, header: str) -> list[list[float]]:
    end = tex.index(label)
    block = tex[tex.rindex(header, 0, end):end]
    rows = []
    for line in block.splitlines():
        cells = [re.sub(r"\\textbf\{\\underline\{([0-9.]+)\}\}", r"\1", c).strip() for c in line.split("&")]
        numbers = [float(c.rstrip("\\").strip()) for c in cells if re.fullmatch(r"[0-9]+\.[0-9]+\s*(\\\\)?", c)]
        if numbers:
            rows.append(numbers)
    return rows


@pytest.mark.skipif(not PAPER.exists(), reason="paper source not beside the checkout")
def test_transcription_matches_the_paper_source():
    tex = PAPER.read_text()
    t1, t3 = table1_reported(), table3_reported()
    methods = ["DFv2", "EC", "MED", "ICT_all", "PUT_all", "PIC", "ICT_50", "PUT_50"]
    ours1 = [t1[(t1.method == m) & (t1.metric == k)]["value"].tolist() for k in METRICS for m in methods]
    assert _paper_rows(tex, "tab: comparison_with_other_methods_self_test", r"\begin{tabular}") == ours1
    variants = ["conv", "one", "no_ref", "tok", "qua0", "put"]
    ours3 = [t3[(t3.variant == v) & (t3.metric == k)]["value"].tolist() for k in METRICS for v in variants]
    assert _paper_rows(tex, "tab: ablation_study_results", r"\begin{tabular}") == ours3


# ----------------------------------------------------------------------------------------- tables

TABLE1_MEASURED = {0, 1}  # PUT_all and PUT_50 measured, then PUT_all and PUT_50 reported
TABLE1_CONTEXT_MEASURED = {0, 1}  # then the paper's eight rows (four deterministic methods, then four pluralistic)
TABLE3_MEASURED = set(range(6))


def test_table1_reported_measured_and_bold():
    metrics = synthetic_metrics()
    latex = render_latex(table1(metrics, "ffhq"))
    assert "12.784" in latex and "11.221" in latex  # FFHQ PUT_50 / PUT_all FID 20-40
    measured, reported = latex.split(r"\endlastfoot", 1)[1].split(r"\cmidrule", 1)
    assert r"FID $\downarrow$ & measured, raw & PUT$_{\rm all}$ & " in measured and r"\emph" not in measured
    assert r"& reported, FFHQ & PUT$_{\rm all}$ & \emph{11.221}" in reported  # below the rule, in italics
    put = metrics[metrics.variant == "put"].set_index(["mode", "group"])
    assert f"{put.loc[('all', '20-40'), 'fid']:.3f}" in latex
    assert f"{put.loc[('k50', '10-60'), 'mae']:.4f}" in latex
    assert r"\toprule" in latex and r"\bottomrule" in latex and r"\multirow" not in latex
    assert r"\cline" not in latex
    check_bolding(latex, TABLE1_MEASURED)
    assert len(body_rows(latex)) == 4 * 4


def test_table1_has_a_row_per_released_weights_entry():
    metrics = synthetic_metrics()
    official = metrics[metrics.variant == "put"].assign(variant="official_ffhq_release", psnr=1.5)
    latex = render_latex(table1(pd.concat([metrics, official], ignore_index=True), "ffhq"))
    assert latex.count(r", released \texttt{ffhq\_release}") == 2 * 4  # both modes, per metric
    assert "1.500" in latex and "Released rows" in latex
    assert len(body_rows(latex)) == 4 * 6


def test_table1_context_rows_and_places2():
    latex = render_latex(table1(synthetic_metrics(), "places2", context=True))
    assert r"reported, Places2 & DFv2" in latex and r"\emph{19.309}" in latex  # ICT_all FID 20-40
    assert "FFHQ" not in latex
    check_bolding(latex, TABLE1_CONTEXT_MEASURED)


def test_table1_unavailable_fid_is_na_with_reason():
    latex = render_latex(table1(synthetic_metrics(fid_unavailable=True), "demo"))
    fid_rows = [cells for metric, cells in body_rows(latex) if metric.startswith("FID")]
    assert fid_rows[0] == ["n/a$^{a}$"] * 3 == fid_rows[1]  # PUT_all and PUT_50 measured: one footnote
    assert latex.count(r"\$TORCH\_HOME") == 1  # the reason, escaped, once in the caption
    assert "$^{a}$Inception weights missing" in latex and "$^{b}$" not in latex
    assert "shown for scale only" in latex and "reported, FFHQ" in latex
    check_bolding(latex, TABLE1_MEASURED)  # no bold FID at all: reported rows are not ranked


def test_one_footnote_per_reason_and_only_measured_rows_bold():
    metrics = synthetic_metrics(fid_unavailable=True)
    metrics.loc[metrics["variant"] == "tok", "fid_unavailable"] = "FID needs at least 2 PNG images per side"
    latex = render_latex(table3(metrics[metrics["variant"] != "one"], "ffhq"))
    caption = latex.split(r"\caption{", 1)[1].split("\n", 1)[0]  # the caption's line
    assert caption.count("$^{a}$") == caption.count("$^{b}$") == caption.count("$^{c}$") == 1
    assert "not evaluated" in caption and "at least 2 PNG" in caption and "Inception weights" in caption
    fid = [cells for metric, cells in body_rows(latex) if metric.startswith("FID")]
    assert {c[-3:] for row in fid[:6] for c in row} == {"a}$", "b}$", "c}$"}
    check_bolding(latex, TABLE3_MEASURED)


def test_table3_all_variants_and_reported_rows():
    metrics = synthetic_metrics()
    latex = render_latex(table3(metrics, "places2"))
    assert "178.057" in latex and "reported, Places2" in latex  # conv FID 20-40 on Places2
    assert r"PUT$^{\rm no\_ref}$" in latex
    k50 = metrics[(metrics["mode"] == "k50") & (metrics.variant == "qua0")].set_index("group")
    assert f"{k50.loc['40-60', 'ssim']:.3f}" in latex
    check_bolding(latex, TABLE3_MEASURED)
    assert len(body_rows(latex)) == 4 * 12
    ffhq = render_latex(table3(metrics, "demo"))
    assert "reported, FFHQ" in ffhq and "163.610" in ffhq and "shown for scale only" in ffhq
    imagenet = render_latex(table3(metrics, "imagenet"))
    assert "reported" not in imagenet.split(r"\midrule", 1)[1] and "no ablation" in imagenet
    assert len(body_rows(imagenet)) == 4 * 6


def test_missing_variant_is_na_and_duplicates_are_errors():
    metrics = synthetic_metrics()
    latex = render_latex(table3(metrics[metrics.variant != "tok"], "ffhq"))
    assert "not evaluated" in latex and "n/a" in latex
    with pytest.raises(ValueError, match="more than one row"):
        table1(pd.concat([metrics, metrics.iloc[:1]]), "ffhq")
    with pytest.raises(ValueError, match="lacks column"):
        table1(metrics.drop(columns="fid"), "ffhq")


def test_speed_table_sets_like_beside_like():
    rows = [bench_result("demo", tokens_per_second=397.0), bench_result("ffhq", tokens_per_second=0.57),
            bench_result("imagenet", tokens_per_second=0.12), bench_result("places2", tokens_per_second=0.5),
            bench_result("ffhq", engine="graph", device="cuda", device_name="NVIDIA H100 80GB HBM3",
                         precision="bf16-autocast", batch=10, tokens_per_second=901.0, source="sampling_cuda_h100"),
            bench_result("ffhq", code="authors", engine="released sample_largest (cvpr2022)", device="cuda",
                         device_name="NVIDIA H100 80GB HBM3", tokens_per_second=62.3, source="authors_cuda_h100"),
            bench_result("ffhq", "pvqvae", images_per_second=2.5), bench_result("demo", "pvqvae")]
    latex = render_latex(speed_table(rows))
    for text in ("37.138", "32.048", "17.186", "62.949", "RTX 3090", "0.570", "99.500", r"x86\_64", r"25.0\%",
                 "paper size, 30 layers x 512, 256 px", "35 layers x 1024", "not a paper model, not comparable",
                 "random weights",
                 "ours, eager [a]", "ours, graph [b]", "authors' loop [c]", "NVIDIA H100 80GB HBM3 & bf16-autocast",
                 "901.000", "62.300", "batch 10, 1/step", "[a] this run's bench stage",
                 r"[b] \texttt{reports/benchmarks/sampling\_cuda\_h100.json}"):
        assert text in latex, text
    body = latex.split(r"\endlastfoot")[1]  # a longtable: caption and header come first (twice)
    lines = [line for line in body.splitlines() if line.endswith(r"\\")]
    datasets = [line.split("&")[1].strip() for line in lines]
    # each paper dataset: measured rows then the paper's row; the demo preset's rows after them
    assert datasets == ["FFHQ"] * 4 + ["Places2", "Places2", "ImageNet", "ImageNet", "demo preset", "all", "all",
                        "demo preset"]
    assert "0.570" in lines[0] and "37.138" in lines[3] and "397.000" in lines[8]
    assert "30 layers x 512, 256 px" in lines[0] and "reported by the paper" in lines[3]
    assert r"\textbf" not in latex


def test_write_latex_header_and_caption(tmp_path):
    styler = table1(synthetic_metrics(fid_unavailable=True), "ffhq")
    path = write_latex(styler, tmp_path / "t" / "table1.tex", "My caption.", "tab:t1",
                       "python -m put report --preset ffhq", "0123abc")
    text = path.read_text()
    head = text.splitlines()[:3]
    assert all(line.startswith("%") for line in head)
    assert "do not edit" in head[0]
    assert "python -m put report --preset ffhq" in text.splitlines()[1] and "0123abc" in head[2]
    assert r"\caption{My caption. n/a" in text and r"\label{tab:t1}" in text  # n/a reasons survive
    assert not list(tmp_path.glob("t/.*tmp"))


# ----------------------------------------------------------------------------------------- plots

def _load(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def test_plot_curves_draws_measured_metrics_only(tmp_path):
    curves = synthetic_curves()
    pixel = plot_curves(curves, ["psnr", "ssim", "mae"], tmp_path / "pixel.png")
    fid = plot_curves(curves, ["fid"], tmp_path / "fid.png")
    assert _load(pixel).shape[1] > 2 * _load(fid).shape[1]  # three panels side by side
    with pytest.raises(ValueError, match="nothing to draw"):
        plot_curves(curves, ["lpips"], tmp_path / "lpips.png")
    with pytest.raises(ValueError, match="unknown curve metric"):
        plot_curves(curves, ["psnr", "iou"], tmp_path / "x.png")


def test_report_curves_and_the_line_for_each_missing_one(tmp_path):
    from put.report.figures import curve_figures

    # (An earlier run's figure cannot survive either way: the report stage writes its folder whole.)
    figures, notes = curve_figures(synthetic_curves(lpips_unavailable=True, fid_unavailable=True), tmp_path)
    assert [p.name for p in figures] == ["curves_psnr_ssim_mae.png"]
    assert not (tmp_path / "curve_fid.png").exists()
    assert len(notes) == 2 and notes[0].startswith("FID curve not drawn: Inception weights")
    assert r"\texttt{put weights --download}" in notes[0] and "LPIPS vgg weights missing" in notes[1]
    figures, notes = curve_figures(synthetic_curves(lpips_unavailable=False), tmp_path)
    assert {p.name for p in figures} == {"curves_psnr_ssim_mae.png", "curve_fid.png", "curve_lpips.png"} and not notes


def test_benchmark_rows_are_read_from_lists_single_rows_and_files_measured_elsewhere(tmp_path):
    import json

    from put.report.benchmarks import read_benchmark_rows

    (tmp_path / "sampling.json").write_text(json.dumps([bench_result("ffhq"), bench_result("demo")]))
    (tmp_path / "pvqvae.json").write_text(json.dumps(bench_result("ffhq", "pvqvae")))  # older files: one result
    (tmp_path / "baseline.json").write_text(json.dumps({"provenance": {"what": "measured on an H100 elsewhere"},
                                                        "rows": [bench_result("ffhq", batch=10)]}))
    (tmp_path / "cost.json").write_text(json.dumps({"provenance": {}, "stages": []}))  # derived, not rows
    rows = read_benchmark_rows(tmp_path)
    assert [(r["source"], r["preset"]) for r in rows] == [("baseline", "ffhq"), ("pvqvae", "ffhq"),
                                                          ("sampling", "ffhq"), ("sampling", "demo")]
    assert rows[0]["measured_elsewhere"] == "measured on an H100 elsewhere" and "measured_elsewhere" not in rows[1]
    assert {r["source"] for r in read_benchmark_rows(tmp_path, source="this run")} == {"this run"}
    (tmp_path / "bad.json").write_text(json.dumps([{"preset": "ffhq"}]))
    with pytest.raises(ValueError, match="bad.json: expected benchmark rows"):
        read_benchmark_rows(tmp_path)


def test_sample_grid_and_masked_input(tmp_path):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    keep = np.ones((32, 32), dtype=np.uint8)
    keep[8:16, 8:24] = 0
    shown = masked_input(image, keep, color=(255, 0, 255))
    assert (shown[8:16, 8:24] == [255, 0, 255]).all() and np.array_equal(shown[:8], image[:8])
    decoded = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)  # the raw decode: known pixels redrawn too
    pasted = pasted_back(decoded, image, keep)
    assert np.array_equal(pasted[8:16, 8:24], decoded[8:16, 8:24]) and np.array_equal(pasted[:8], image[:8])
    rows = [[shown, image, image, image] for _ in range(2)]
    path = sample_grid(rows, ["masked", "sample 1", "sample 2", "ground truth"], tmp_path / "grid.png",
                       row_titles=["a", "b"])
    assert _load(path).ndim == 3
    with pytest.raises(ValueError, match="every row"):
        sample_grid([[image]], ["a", "b"], tmp_path / "bad.png")
    with pytest.raises(ValueError, match="uint8"):
        sample_grid([[image.astype(float)]], ["a"], tmp_path / "bad.png")


# ----------------------------------------------------------------------------------------- document

# `make test` installs TeX Live (Debian) when it can; in CI a missing pdflatex is a failure, not a skip.
needs_pdflatex = pytest.mark.skipif(
    shutil.which("pdflatex") is None and not os.environ.get("CI"),
    reason="pdflatex not installed (Debian: texlive-latex-base texlive-latex-recommended)")


COMMITTED_COST = json.loads((Path(__file__).resolve().parents[1] / "reports" / "benchmarks" / "cost.json").read_text())


@needs_pdflatex
def test_document_compiles_and_nothing_runs_off_the_page(tmp_path):
    """The report as the demo makes it (every table, with the committed benchmark rows and cost figures, Table 1
    with released weights and the paper's other methods, Table 3 with daggers, the releases side by side, seeds, a
    sample grid of raw and pasted-back samples), split as the report stage splits it, compiled: no table taller
    than a page or wider than the text, no cell word wider than its column (pdflatex's log), and the main part (the
    tables of MAIN_TABLES, the speed summary, the frontier and sample figures) on at most six pages."""
    from put.config.evaluation import SampleConfig
    from put.io.versions import versions
    from put.report.benchmarks import read_benchmark_rows
    from put.report.document import main_pages
    from put.report.generations import diversity_table, generations_table
    from put.report.replicates import seed_summary, seeds_table
    from put.stages.report import MAIN_TABLES

    metrics = synthetic_metrics(fid_unavailable=True)
    for metric in ("psnr", "ssim", "mae"):  # intervals, printed in small type
        metrics[f"{metric}_lo"], metrics[f"{metric}_hi"] = metrics[metric] * 0.97, metrics[metric] * 1.02
    official = metrics[metrics.variant == "put"].assign(variant="official_ffhq_release")
    replicated = pd.concat([metrics.assign(seed=s, psnr=metrics["psnr"] + s / 10) for s in (0, 1, 2)])
    differences = pd.DataFrame([{"variant": v, "mode": "k50", "group": g, "metric": m, "p": 1e-4, "significant": True,
                                 "method": "holm", "resamples": 20000, "variation": "test images (sources resampled)",
                                 "no_interval": ""}
                                for v in VARIANTS[1:] for g in ("20-40", "10-60") for m in ("psnr", "ssim", "mae")])
    committed = read_benchmark_rows(Path(__file__).resolve().parents[1] / "reports" / "benchmarks")
    speed = [bench_result("ffhq"), bench_result("demo"), bench_result("demo", "pvqvae"),
             *(r for r in committed if r["benchmark"] in ("sampling", "pvqvae"))]
    out = tmp_path / "reports"
    cmd, commit = "python -m put report --preset demo --metrics-dir results/demo/metrics --out reports/demo", "deadbee"
    stylers = {"table1": table1(pd.concat([metrics, official]), "demo", context=True, differences=differences),
               "table3": table3(metrics, "demo", differences),
               "generations": generations_table(metrics, "demo", differences, SampleConfig()),
               "generations_diversity": diversity_table(synthetic_curves(lpips_unavailable=False), "demo"),
               "speed_summary": speed_summary(speed), "speed": speed_table(speed),
               "seeds": seeds_table(seed_summary(replicated), "demo"), "cost": cost_table(COMMITTED_COST),
               "layouts": layouts_table(COMMITTED_COST), "sampling": table_topk_table(COMMITTED_COST),
               "evaluation": evaluation_table(COMMITTED_COST)}
    tables = {name: write_latex(styler, out / "tables" / f"{name}.tex", None, f"tab:{name}", cmd, commit)
              for name, styler in stylers.items()}
    main = [tables[name] for name in MAIN_TABLES]
    image = np.full((64, 64, 3), 128, np.uint8)
    figures = [plot_curves(synthetic_curves(), ["psnr", "ssim", "mae"], out / "figures" / "frontier.png"),
               sample_grid([[image] * 8] * 4, ["masked input", *(f"sample {i}: raw" for i in range(6)), "truth"],
                           out / "figures" / "samples.png")]
    further = [plot_curves(synthetic_curves(), ["psnr", "ssim", "mae"], out / "figures" / "pixel_curves.png"),
               plot_curves(synthetic_curves(), ["fid"], out / "figures" / "fid_curve.png")]
    tex = write_document(out, main, figures, "PUT reproduction: demo", cmd, commit,
                         notes=[r"LPIPS curve not drawn: weights missing; \texttt{put weights --download} fetches "
                                r"them."], software=versions(),
                         appendix_tables=[p for p in tables.values() if p not in main], appendix_figures=further)
    text = tex.read_text()
    assert r"\input{tables/table1.tex}" in text and r"\includegraphics" in text and "figures/fid_curve.png" in text
    assert r"\item LPIPS curve not drawn" in text
    assert r"\section{Software}" in text and "torchvision" in text and "requirements.lock" in text
    assert cmd in text.splitlines()[1]
    appendix = text.index(r"\appendix")  # the main part's tables and figures before it, every other after it
    assert all(text.index(f"tables/{name}.tex") < appendix for name in MAIN_TABLES)
    assert all(text.index(f"tables/{name}.tex") > appendix for name in ("speed", "cost", "layouts", "seeds"))
    assert text.index("figures/samples.png") < appendix < text.index("figures/fid_curve.png")
    pdf = compile_pdf(tex)
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF") and len(data) > 10_000
    assert layout_problems(tex.with_suffix(".log").read_text(errors="replace")) == []
    pages = main_pages(tex.with_suffix(".aux").read_text())
    assert 3 <= pages <= 6, pages  # a reviewer's read; the appendix holds the rest
    # pdftotext is not available: the numbers are checked in the table files the document includes.
    included = "".join((out / re.sub(r"\\input\{(.*)\}", r"\1", line)).read_text()
                       for line in text.splitlines() if line.startswith(r"\input"))
    assert "12.784" in included and "62.949" in included


def test_main_pages_reads_the_appendix_page_from_the_aux():
    from put.report.document import main_pages

    assert main_pages("\\relax\n\\newlabel{tab:t1}{{1}{1}}\n\\newlabel{sec:appendix}{{}{6}}\n") == 5
    with pytest.raises(ValueError, match="sec:appendix"):
        main_pages("\\relax\n")


def test_table1_other_measured_methods_marks_and_one_caption_note_each():
    """Table 1 ready for methods measured besides PUT: a row per sampling mode it was evaluated in, in the
    measured block (ranked with PUT, marked where its family says it differs from PUT); its label, citation and
    how it was run said once in the caption, and where the masks came from once however many methods."""
    from put.report.table1 import MeasuredMethod

    metrics = synthetic_metrics()
    put_all = metrics[(metrics.variant == "put") & (metrics["mode"] == "all")]
    extra = pd.concat([put_all.assign(variant=v, psnr=psnr, fid=put_all["fid"] * f, ssim=put_all["ssim"] * f / 2,
                                      mae=put_all["mae"] * f) for v, psnr, f in (("telea", 35.5, 1.3),
                                                                                 ("lama", 1.25, 1.7))])
    methods = [MeasuredMethod("telea", "Telea", "Telea, 2004", r"OpenCV's \texttt{cv2.inpaint}, radius 3."),
               MeasuredMethod("lama", "LaMa", "Suvorov et al., 2022", "big-lama, outputs read from a folder.")]
    differences = pd.DataFrame([{"variant": v, "mode": "all", "group": g, "metric": "psnr", "p": p,
                                 "significant": p < 0.01, "method": "holm", "no_interval": ""}
                                for v, g, p in (("telea", "20-40", 1e-4), ("lama", "20-40", 0.3),
                                                ("tok", "20-40", 1e-5))])  # tok: not in Table 1, not its family
    latex = render_latex(table1(pd.concat([metrics, extra]), "ffhq", context=True, differences=differences,
                                methods=methods))
    caption = latex.split(r"\caption{", 1)[1].split("\n", 1)[0]
    assert caption.count("Telea (Telea, 2004): OpenCV's") == 1 and caption.count("LaMa (Suvorov et al., 2022)") == 1
    assert caption.count("put masks-export") == 1 and "over the family of the 2 differences" in caption
    rows = body_rows(latex)
    psnr = [cells for metric, cells in rows if metric.startswith("PSNR")]
    assert psnr[2][0] == r"\textbf{35.500}$^{\dagger}$" and psnr[3][0] == "1.250"  # Telea, LaMa: measured
    assert latex.count(r"$^{\dagger}$") == 2  # the cell and the caption's note
    assert len(rows) == 4 * (4 + 8)
    check_bolding(latex, {0, 1, 2, 3})


def test_speed_summary_one_setting_per_device():
    """The main report's speed table: the paper's three transformers at batch 1, one token per step; per device our
    fp32 row (the authors' loop's precision) and the authors' loop, then the paper's figure; nothing else."""
    rows = [bench_result("ffhq", tokens_per_second=0.57), bench_result("ffhq", engine="graph", tokens_per_second=0.9),
            bench_result("ffhq", batch=10, tokens_per_second=5.0),
            bench_result("ffhq", device_name="NVIDIA H100", precision="bf16-autocast", tokens_per_second=90.5),
            bench_result("ffhq", device_name="NVIDIA H100", tokens_per_second=84.0),
            bench_result("ffhq", code="authors", device_name="NVIDIA H100", tokens_per_second=62.3),
            bench_result("ffhq_tpami256", generation="tpami2024", tokens_per_second=7.0),
            bench_result("demo", tokens_per_second=397.0), bench_result("ffhq", "pvqvae")]
    latex = render_latex(speed_summary(rows))
    lines = [line for line in latex.split(r"\endlastfoot")[1].splitlines() if line.endswith(r"\\")]
    assert lines[0].startswith(r"FFHQ & x86\_64 (8 threads) & 0.900 {\scriptsize (graph, fp32)} & -- & --")
    assert lines[1].startswith(r"FFHQ & NVIDIA H100 & 84.000 {\scriptsize (eager, fp32)} & 62.300")
    assert lines[2].startswith("FFHQ & RTX 3090 (reported) & -- & -- & 37.138")
    assert [line.split(" & ")[0] for line in lines] == ["FFHQ"] * 3 + ["Places2", "ImageNet"]
    for absent in ("5.000", "90.500", "7.000", "397.000", "99.500"):
        assert absent not in latex, absent


def test_speed_table_says_once_that_a_demo_network_is_not_a_paper_model():
    rows = [bench_result("demo", tokens_per_second=t) for t in (397.0, 398.0, 399.0)]
    latex = render_latex(speed_table([*rows, bench_result("demo", "pvqvae")]))
    assert latex.count("not a paper model, not comparable") == 1  # in the caption, not in each row
    assert latex.count("4 layers x 128, 64 px &") == 3


@needs_pdflatex
def test_a_table_that_runs_off_the_page_is_found(tmp_path):
    tall = tmp_path / "tall.tex"  # a float of 90 rows: taller than a page
    tall.write_text("\\begin{table}\\centering\\begin{tabular}{l}\n" + "row \\\\\n" * 90
                    + "\\end{tabular}\\end{table}\n")
    wide = tmp_path / "wide.tex"  # a column wider than the text
    wide.write_text("\\begin{tabular}{p{25cm}}x\\end{tabular}\n")
    tex = write_document(tmp_path, [tall, wide], [], "overflowing", "cmd", "c0ffee")
    compile_pdf(tex, timeout=60)
    problems = layout_problems(tex.with_suffix(".log").read_text(errors="replace"))
    assert len(problems) == 2 and problems[0].startswith("tall.tex: Float too large for page by")
    assert problems[1].startswith("wide.tex: Overfull \\hbox") and "pt too wide" in problems[1]
    assert layout_problems("Overfull \\hbox (0.5pt too wide) in paragraph at lines 1--1") == []  # within tolerance


@needs_pdflatex
def test_broken_table_raises_with_log_tail(tmp_path):
    bad = tmp_path / "tables" / "bad.tex"
    bad.parent.mkdir()
    bad.write_text("\\begin{table}\\centering\\undefinedcontrolsequence\\end{table}\n")
    tex = write_document(tmp_path, [bad], [], "broken", "cmd", "c0ffee")
    with pytest.raises(LatexError, match="Undefined control sequence") as info:
        compile_pdf(tex, timeout=60)
    assert "log tail" in str(info.value)


def test_missing_pdflatex_names_the_packages(tmp_path, monkeypatch):
    tex = write_document(tmp_path, [], [], "empty", "cmd", "c0ffee")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(LatexError, match="texlive-latex-base texlive-latex-recommended"):
        compile_pdf(tex)


def test_document_rejects_unsafe_paths(tmp_path):
    with pytest.raises(ValueError, match="spaces"):
        write_document(tmp_path, [tmp_path / "my table.tex"], [], "t", "cmd", "c")


def test_table1_ranks_one_rule_and_keeps_puts_raw_rows_apart():
    """Table 1's ranked block holds every row under one compositing rule (PUT's and the other methods', known
    pixels pasted back), stated in the caption; PUT's raw rows (the paper's rule) form a block of their own, never
    bold; a difference of the raw rule cannot mark the pasted block."""
    from put.report.table1 import MeasuredMethod

    raw = synthetic_metrics().assign(rule="raw")
    put = raw[raw.variant == "put"]
    pasted = put.assign(rule="pasted", psnr=put["psnr"] + 40)  # pasted: far better, so bold lies in its block
    telea = put[put["mode"] == "all"].assign(variant="telea", rule="pasted", psnr=put["psnr"] + 30)
    methods = [MeasuredMethod("telea", "Telea", "Telea, 2004", "built in.")]
    latex = render_latex(table1(pd.concat([raw, pasted, telea]), "ffhq", methods=methods))
    caption = latex.split(r"\caption{", 1)[1].split("\n", 1)[0]
    assert "Ranked block (``measured, pasted''): our reproduction; every measured method" in caption
    assert "; every row scored with the input's known pixels pasted back over its results" in caption
    assert "Block ``measured, raw'' (not ranked): PUT's own rows scored on the results as returned" in caption
    psnr = [cells for metric, cells in body_rows(latex) if metric.startswith("PSNR")]
    assert len(psnr) == 3 + 2 + 2  # ranked: PUT_all, PUT_50, Telea; raw: PUT_all, PUT_50; reported: PUT_all, PUT_50
    assert all(sum(row[col].startswith(r"\textbf") for row in psnr[:3]) == 1 for col in range(len(GROUPS)))
    assert not any(c.startswith(r"\textbf") for row in psnr[3:] for c in row)  # raw and reported: not ranked
    assert r"PSNR $\uparrow$ & measured, pasted & PUT$_{\rm all}$" in latex and "& measured, raw & PUT" in latex
    marks = pd.DataFrame([{"variant": "telea", "mode": "all", "group": "20-40", "metric": "psnr", "p": 1e-4,
                           "significant": True, "method": "holm", "no_interval": "", "rule": "raw"}])
    with pytest.raises(FileMismatchError, match="compositing rules"):
        table1(pd.concat([raw, pasted, telea]), "ffhq", methods=methods, differences=marks)


def test_a_pasted_and_a_raw_row_are_never_ranked_or_paired_together():
    """Issue 44: an outside method scored raw beside PUT scored pasted (or the other way round) would rank
    protocols, not methods: Table 1 refuses it, naming the rows and their rules, and so do the paired differences."""
    from put.report.table1 import MeasuredMethod
    from put.stats.bootstrap import Bootstrap
    from put.stats.differences import paired_differences

    metrics = synthetic_metrics()
    put = metrics[metrics.variant == "put"].assign(rule="pasted")
    lama = put[put["mode"] == "all"].assign(variant="lama", rule="raw")
    methods = [MeasuredMethod("lama", "LaMa", "Suvorov et al., 2022", "read from a folder.")]
    with pytest.raises(FileMismatchError, match=r"Table 1's ranked block: .*compositing rules.*pasted: put; raw: "
                                                r"lama"):
        table1(pd.concat([put, lama]), "ffhq", methods=methods)
    mixed = metrics.assign(rule=np.where(metrics.variant == "put", "pasted", "raw"))
    with pytest.raises(FileMismatchError, match=r"Table 3: .*compositing rules"):
        table3(mixed, "ffhq")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"mode": "all", "group": "20-40", "image": [f"i{k}" for k in range(60)], "sample": 0,
                          "source": [f"s{k}" for k in range(60)], "psnr": rng.normal(20, 2, 60)})
    with pytest.raises(FileMismatchError, match="compositing rules"):
        paired_differences({("put", 0): frame.assign(rule="pasted"), ("lama", 0): frame.assign(rule="raw")},
                           ("psnr",), Bootstrap(resamples=2000))

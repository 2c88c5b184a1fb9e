"""LaTeX result tables in the paper's layouts: measured rows beside the paper's reported rows.

Each builder (Table 1's: table1.py) returns a pandas Styler (formats, bold best values, "n/a" for unavailable
values and a default caption that lists why); `write_latex` renders it with booktabs rules under a provenance header.
A measured value carries its interval as a small "+-" half-width (`<metric>_lo`, `<metric>_hi` of the
metrics frame), or a footnote saying why it has none; Table 3 marks the ablations whose paired difference from
PUT survives the family-wise correction (put/stats/differences.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler

from put.config.bins import TABLE_GROUPS
from put.config.evaluation import RULE_CLAUSES, one_rule
from put.config.model import ABLATIONS
from put.io.files import atomic_write_text
from put.report.differences import family_sentence
from put.report.reported import (
    LOWER_IS_BETTER,
    METRICS,
    TABLE3_DATASETS,
    reference_dataset,
    table3_reported,
)
from put.stats.bootstrap import printed_decimals

GROUPS: tuple[str, ...] = tuple(TABLE_GROUPS)
VARIANT_ORDER: tuple[str, ...] = (*ABLATIONS, "put")  # Table 3's rows: the ablations as listed, then PUT
METRIC_LABELS: dict[str, str] = {"fid": r"FID $\downarrow$", "psnr": r"PSNR $\uparrow$", "ssim": r"SSIM $\uparrow$",
                                 "mae": r"MAE $\downarrow$"}
DECIMALS: dict[str, int] = {"fid": 3, "psnr": 3, "ssim": 3, "mae": 4}  # as printed in the paper
METHOD_LABELS: dict[str, str] = {
    "DFv2": "DFv2", "EC": "EC", "MED": "MED", "ICT_all": r"ICT$_{\rm all}$", "PUT_all": r"PUT$_{\rm all}$",
    "PIC": "PIC", "ICT_50": r"ICT$_{50}$", "PUT_50": r"PUT$_{50}$",
}
MODE_LABELS: dict[str, str] = {"all": "deterministic", "k50": r"$\mathcal{K}=50$"}
NA = "n/a"
MEASURED_COLUMNS = ("variant", "group", "mode", *METRICS)
SIGNIFICANT = r"$^{\dagger}$"  # Table 3: the difference from PUT survives the family-wise correction

_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                   "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """Plain text (file names, reasons, device names) made safe for LaTeX."""
    return "".join(_LATEX_SPECIALS.get(c, c) for c in str(text))


# As the paper writes them: PUT, and each ablation as PUT with its name raised (PUT$^{\rm conv}$).
VARIANT_LABELS: dict[str, str] = {v: "PUT" if v == "put" else rf"PUT$^{{\rm {latex_escape(v)}}}$"
                                  for v in VARIANT_ORDER}


# --------------------------------------------------------------------------------------------- measured data

def _check_metrics(metrics: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in MEASURED_COLUMNS if c not in metrics.columns]
    if missing:
        raise ValueError(f"metrics frame lacks column(s) {', '.join(missing)}")
    key = ["variant", "group", "mode", *(["rule"] if "rule" in metrics.columns else [])]
    dupes = metrics.duplicated(key)
    if dupes.any():
        first = metrics.loc[dupes, key].iloc[0].tolist()
        raise ValueError(f"metrics frame has more than one row for ({', '.join(key)}) = {tuple(first)}")
    return metrics


def rules_of(frame: pd.DataFrame, label: str = "variant") -> dict[str, str]:
    """Each row label's compositing rule(s), joined where it has several (for put.config.evaluation.one_rule)."""
    if "rule" not in frame.columns or frame.empty:
        return {}
    return {str(name): ", ".join(sorted(map(str, set(group["rule"])))) for name, group in frame.groupby(label)}


def _reason(row: pd.Series | None, metric: str) -> str:
    """Why a measured value is missing: the evaluate stage's reason, else a generic one."""
    if row is None:
        return "not evaluated"
    reason = row.get(f"{metric}_unavailable")
    return str(reason) if isinstance(reason, str) and reason.strip() else "not measured"


def _no_interval(row: pd.Series, metric: str) -> str:
    """Why a measured value has no interval ("" when it has one, or when nothing says why)."""
    reason = row.get(f"{metric}_no_interval")
    return str(reason) if isinstance(reason, str) and pd.isna(row.get(f"{metric}_lo", np.nan)) else ""


def _measured(metrics: pd.DataFrame, variant: str, mode: str,
              metric: str) -> tuple[list[float], list[str], list[float], list[float]]:
    """One table row of measured values over GROUPS; for each missing value, or value without an interval, why
    ("" where both are present); each value's half interval width and the Monte-Carlo error of its bounds (NaN
    where there is none)."""
    values, reasons, halves, errors = [], [], [], []
    for group in GROUPS:
        hit = metrics[(metrics["variant"] == variant) & (metrics["mode"] == mode) & (metrics["group"] == group)]
        row = hit.iloc[0] if len(hit) else None
        value = float(row[metric]) if row is not None and pd.notna(row[metric]) else float("nan")
        values.append(value)
        reasons.append(_reason(row, metric) if np.isnan(value) else _no_interval(row, metric))
        lo, hi, mc = (row.get(f"{metric}_{end}", np.nan) if row is not None else np.nan for end in ("lo", "hi", "mc"))
        halves.append((float(hi) - float(lo)) / 2 if pd.notna(lo) and pd.notna(hi) else float("nan"))
        errors.append(float(mc) if pd.notna(mc) else float("nan"))
    return values, reasons, halves, errors


def half_width_text(half: float, max_decimals: int = 6, mc_error: float | None = None) -> str:
    """A half interval width (or a spread) to two significant digits (three and more for widths of 100 and
    above), with at most `max_decimals` decimals and no digit finer than the Monte-Carlo error of the bounds."""
    return f"{half:.{printed_decimals(half, mc_error, max_decimals)}f}"


def reason_latex(reason: str) -> str:
    """A plain-text reason made safe for LaTeX; `command` spans become \\texttt."""
    return re.sub(r"`([^`]*)`", r"\\texttt{\1}", latex_escape(reason))


def footnotes(reasons: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Per-cell reasons ("" where a value exists) -> (marks "$^{a}$" per cell, the caption's notes): one
    letter and one note per distinct reason, however many cells share it."""
    letters: dict[str, str] = {}
    for reason in reasons.to_numpy().ravel():
        if reason and reason not in letters:
            letters[reason] = chr(ord("a") + len(letters)) if len(letters) < 26 else str(len(letters) + 1)
    marks = reasons.map(lambda r: f"$^{{{letters[r]}}}$" if r else "")
    notes = " ".join(f"$^{{{letter}}}${reason_latex(reason)}." for reason, letter in letters.items())
    return marks, (f"{NA}: not available. {notes}" if letters else "")


def cell_text(values: pd.DataFrame, decimals: np.ndarray, marks: pd.DataFrame, halves: pd.DataFrame | None = None,
              bold: np.ndarray | None = None, flags: pd.DataFrame | None = None,
              errors: pd.DataFrame | None = None) -> pd.DataFrame:
    """Numbers at their printed precision (`decimals` per cell), bold where `bold`, a mark where `flags`, the
    half interval width in small type where `halves` has one (no digit finer than `errors`, the Monte-Carlo
    error of its bounds); NaN as n/a with its footnote mark, and a value's own footnote mark (why it has no
    interval) after it."""
    shape = values.shape
    halves = halves.to_numpy() if halves is not None else np.full(shape, np.nan)
    errors = errors.to_numpy() if errors is not None else np.full(shape, np.nan)
    bold = bold if bold is not None else np.zeros(shape, bool)
    flags = flags.to_numpy() if flags is not None else np.zeros(shape, bool)

    def text(v: float, d: int, m: str, h: float, e: float, b: bool, f: bool) -> str:
        if pd.isna(v):
            return f"{NA}{m}"
        number = f"{v:.{d}f}"
        width = half_width_text(h, mc_error=e if pd.notna(e) else None)
        return ((rf"\textbf{{{number}}}" if b else number) + (SIGNIFICANT if f else "")
                + (rf"{{\scriptsize$\pm${width}}}" if pd.notna(h) else "") + m)

    cells = [[text(*cell) for cell in zip(*row)] for row in zip(values.to_numpy(), decimals, marks.to_numpy(),
                                                                    halves, errors, bold, flags)]
    return pd.DataFrame(cells, index=values.index, columns=values.columns)


def best_cells(values: pd.DataFrame, decimals: np.ndarray, lower: np.ndarray, groups: np.ndarray,
               candidates: np.ndarray) -> np.ndarray:
    """True where a candidate cell is the best of its column among the candidates of its group of rows,
    compared at the printed precision (ties as printed are all bold, as in the paper); NaN never wins.
    `lower`, `groups` and `candidates` are per row (bool, label, bool), `decimals` per cell."""
    # Round through the printed string: numpy's round can disagree with the format's rounding.
    rounded = np.array([[float(f"{v:.{d}f}") if pd.notna(v) else np.nan for v, d in zip(row, dec)]
                        for row, dec in zip(values.to_numpy(), decimals)]).reshape(values.shape)
    signed = np.where(lower[:, None], rounded, -rounded)
    signed[~candidates] = np.nan
    best = pd.DataFrame(signed).groupby(list(groups), sort=False).transform("min").to_numpy()
    return (signed == best) & ~np.isnan(signed)


def _sample_sizes(metrics: pd.DataFrame, variants: Iterable[str]) -> str:
    if "n" not in metrics.columns:
        return ""
    n = metrics.loc[metrics["variant"].isin(list(variants)), "n"].dropna().astype(int).unique()
    if not len(n):
        return ""
    shown = str(n[0]) if len(n) == 1 else f"{n.min()}--{n.max()}"
    return f" Measured on {shown} test images per mask group."


def interval_sentence(metrics: pd.DataFrame, level: float = 0.95) -> str:
    """What the small +- numbers are, when any measured value has an interval."""
    if not any(f"{m}_lo" in metrics.columns and metrics[f"{m}_lo"].notna().any() for m in METRICS):
        return ""
    return (rf" Small type: $\pm$ half the width of the {level:.0%} bootstrap interval (expanded percentile) of the "
            "value over "
            "the test images (a cluster bootstrap: each source of test images, e.g. the photograph crops were cut "
            "from, resampled with all its images, masks and samples; FID recomputed on the resampled Inception "
            "features), to no digit finer than its Monte-Carlo error; it covers the choice of test images, not "
            "training randomness.").replace("%", r"\%")


# --------------------------------------------------------------------------------------------- styling

def _style(frame: pd.DataFrame, reasons: pd.DataFrame, caption: str, halves: pd.DataFrame | None = None,
           flags: pd.DataFrame | None = None, errors: pd.DataFrame | None = None,
           ranked: Sequence[bool] | None = None) -> Styler:
    """Per-metric number formats, the best measured values in bold, reported values in italics, intervals in small
    type, n/a with one footnote per reason; the helper index levels `metric_key` and `measured` are dropped from
    what is shown (they drive formats, bolding and italics). The notes end the caption and are kept on the
    styler, so that `write_latex` keeps them under a caller's own caption. `ranked`: the rows bold is drawn
    among (default: every measured row)."""
    metric_of_row = frame.index.get_level_values("metric_key")
    decimals = np.repeat(np.array([DECIMALS[m] for m in metric_of_row])[:, None], frame.shape[1], axis=1)
    candidates = np.asarray(frame.index.get_level_values("measured") if ranked is None else ranked, bool)
    best = best_cells(frame, decimals, np.asarray(metric_of_row.isin(LOWER_IS_BETTER)), np.asarray(metric_of_row),
                      candidates)
    marks, notes = footnotes(reasons)
    shown = cell_text(frame, decimals, marks, halves, best, flags, errors)
    reported = ~np.asarray(frame.index.get_level_values("measured"), bool)
    shown[reported] = shown[reported].map(lambda c: rf"\emph{{{c}}}")  # the paper's numbers, marked as such
    shown = shown.droplevel(["metric_key", "measured"])
    styler = shown.style
    styler.hide(axis="index", names=True)
    # The row labels wrap (a released-weights entry's name is long); the table breaks across pages (render_latex).
    label = r">{\raggedright\arraybackslash}p{4.2cm}"
    styler.set_table_styles([{"selector": "small", "props": ":;"},
                             {"selector": "column_format", "props": f":ll{label}{'r' * shown.shape[1]};"}],
                            overwrite=False)
    styler.unavailable_notes = notes
    return styler.set_caption(f"{caption} {notes}".strip())


# metric, block, label, values, reasons (None: reported), half interval widths and their Monte-Carlo errors
# (None: none)
Row = tuple[str, str, str, list[float], list[str] | None, list[float] | None, list[float] | None]


def _frame(rows: list[Row], level_names: tuple[str, str]) -> tuple[pd.DataFrame, ...]:
    """rows -> (values, reasons, half widths, their errors) indexed by (metric_key, measured, Metric, block, row),
    the groups as columns."""
    index = pd.MultiIndex.from_tuples(
        [(m, reasons is not None, METRIC_LABELS[m], block, label) for m, block, label, _, reasons, *_ in rows],
        names=["metric_key", "measured", "Metric", *level_names])
    columns = pd.Index(list(GROUPS), name=r"Mask ratio (\%)")
    values = pd.DataFrame([r[3] for r in rows], index=index, columns=columns, dtype=float)
    reasons = pd.DataFrame([r[4] or [""] * len(GROUPS) for r in rows], index=index, columns=columns)
    halves, errors = (pd.DataFrame([r[k] or [np.nan] * len(GROUPS) for r in rows], index=index, columns=columns,
                                   dtype=float) for k in (5, 6))
    return values, reasons, halves, errors


def _reported_values(table: pd.DataFrame, key: str, name: str, metric: str, dataset: str) -> list[float]:
    hit = table[(table[key] == name) & (table["metric"] == metric) & (table["dataset"] == dataset)]
    return hit.set_index("group")["value"].reindex(list(GROUPS)).astype(float).tolist()


def _dataset_sentence(preset: str, dataset: str, own: bool) -> str:
    if own:
        return f"preset \\texttt{{{latex_escape(preset)}}} ({dataset})"
    return (f"preset \\texttt{{{latex_escape(preset)}}}, which has no counterpart in the paper: the reported rows "
            f"are the paper's {dataset} numbers, shown for scale only")


def own_data_sentence(preset: str, name: str) -> str:
    """Where a table's rows come from when the preset ran on the user's own images (a folder dataset)."""
    return (f"preset \\texttt{{{latex_escape(preset)}}}'s model and training on {latex_escape(name)} (a folder of "
            "the user's images; the paper reports no numbers on it, so no reported rows)")


_BOLD_RULE = ("Bold: best measured value per column within each metric (lower is better for FID and MAE, higher "
              "for PSNR and SSIM); reported rows are not ranked.")


# --------------------------------------------------------------------------------------------- tables

def table3(metrics: pd.DataFrame, preset: str, differences: pd.DataFrame | None = None,
           level: float = 0.95, data_name: str | None = None) -> Styler:
    """The paper's Table 3 (ablations, K=50): per metric, every variant measured, then the paper's
    reported rows for the matching dataset (FFHQ's, labelled, for the demo preset; none for ImageNet,
    which the paper did not ablate). `differences` (put.stats.differences.paired_differences): an ablation's
    value is marked where its difference from PUT survives the family's correction. `data_name`: the user's own
    dataset the preset ran on (no reported rows)."""
    metrics = _check_metrics(metrics)
    dataset, own = reference_dataset(preset)
    reported = table3_reported()
    has_reported = data_name is None and dataset in TABLE3_DATASETS
    family = differences[(differences["mode"] == "k50") & differences["variant"].isin(ABLATIONS)] \
        if differences is not None and len(differences) else None
    # One rule for every ranked row and every difference marked (put.config.evaluation).
    shown = metrics[metrics["variant"].isin(VARIANT_ORDER) & (metrics["mode"] == "k50")]
    rules = rules_of(shown)
    if family is not None:
        rules |= {f"{v}'s differences from put": r for v, r in rules_of(family).items()}
    rule = one_rule(rules, "Table 3")
    significant = set()
    if family is not None:
        hits = family[family["significant"].astype(bool)]  # an empty object column would select columns
        significant = set(zip(hits["variant"], hits["metric"], hits["group"]))
    rows: list[Row] = []
    flags: list[list[bool]] = []
    for metric in METRICS:
        for variant in VARIANT_ORDER:
            rows.append((metric, "measured", VARIANT_LABELS[variant], *_measured(metrics, variant, "k50", metric)))
            flags.append([(variant, metric, g) in significant for g in GROUPS])
        if has_reported:
            rows += [(metric, f"reported, {dataset}", VARIANT_LABELS[v],
                      _reported_values(reported, "variant", v, metric, dataset), None, None, None)
                     for v in VARIANT_ORDER]
            flags += [[False] * len(GROUPS)] * len(VARIANT_ORDER)
    where = (own_data_sentence(preset, data_name) if data_name is not None else
             _dataset_sentence(preset, dataset, own) if has_reported else
             f"preset \\texttt{{{latex_escape(preset)}}} ({dataset}; the paper reports no ablation on it)")
    tested = ""
    if family is not None and len(family):
        covers = "; ".join(dict.fromkeys(family["variation"]))
        tested = " " + SIGNIFICANT + reason_latex(
            family_sentence(family, family["method"].iloc[0], level, "the ablation differs from PUT") +
            f" The family: every ablation x PSNR, SSIM, MAE x mask group at K = 50 (the paired difference of its "
            f"mean per-image value from PUT's on the same test images, masks and sample draws); its intervals cover "
            f"{covers}. Unmarked: not distinguishable from that noise. FID is not tested.")
    scored = f" {RULE_CLAUSES[rule][0].upper()}{RULE_CLAUSES[rule][1:]}." if rule else ""
    caption = (f"Ablations as in the paper's Table~3, $\\mathcal{{K}}=50$, {where}.{scored} {_BOLD_RULE}"
               f"{_sample_sizes(metrics, VARIANT_ORDER)}{interval_sentence(metrics, level)}{tested}")
    values, reasons, halves, errors = _frame(rows, ("Source", "Variant"))
    return _style(values, reasons, caption, halves, pd.DataFrame(flags, index=values.index, columns=values.columns),
                  errors)


# --------------------------------------------------------------------------------------------- writing

def provenance_header(command: str, commit: str) -> str:
    """LaTeX comment lines naming the generating command and commit (newlines would end the comment)."""
    flat = " ".join(str(command).split())
    return (f"% Generated file: do not edit by hand; regenerate it with the command below.\n"
            f"% Command: {flat}\n% Git commit: {' '.join(str(commit).split()) or 'unknown'}\n")


_CLINE_ROW = re.compile(r"^(\\cline\{\d+-\d+\}\s*)+$")


def _booktabs_rules(latex: str) -> str:
    r"""Styler marks block borders with \cline, whose spacing clashes with booktabs: a border of the outer
    level becomes \midrule, an inner one \cmidrule, and the border after the last row is dropped."""
    lines = latex.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        if not _CLINE_ROW.match(line.strip()):
            out.append(line)
            continue
        spans = re.findall(r"\\cline\{(\d+)-(\d+)\}", line)
        if i + 1 < len(lines) and lines[i + 1].strip() in (r"\bottomrule", r"\end{longtable}"):
            continue
        first, last = min(spans, key=lambda s: int(s[0]))
        out.append(r"\midrule" if first == "1" else rf"\cmidrule(l){{{first}-{last}}}")
    return "\n".join(out) + "\n"


SIZES = ("small", "footnotesize", "scriptsize")  # type sizes a builder may choose (a table style's selector)
_CONTINUED = re.compile(r"^\\caption\[\]\{.*\} \\\\$", re.M)


def render_latex(styler: Styler, caption: str | None = None, label: str | None = None) -> str:
    """A longtable (booktabs, no multirow: repeated labels are left blank instead): every table breaks across
    pages, so none runs into the page's footer however many rows it has; the caption is repeated as "continued"
    on later pages. The type size (and \\tabcolsep) a builder set as table styles apply around it (\\small by
    default; a `long_table`'s: footnotesize, 3pt)."""
    styles = list(styler.table_styles or [])
    setup = "".join(f"\\{s['selector']}" + "".join(str(v) for _, v in s["props"])
                    for s in styles if s["selector"] in (*SIZES, "setlength"))
    if getattr(styler, "long_table", False):
        setup = "\\footnotesize\\setlength{\\tabcolsep}{3pt}"
    elif not any(s["selector"] in SIZES for s in styles):
        setup = "\\small" + setup
    styler.table_styles = [s for s in styles if s["selector"] not in (*SIZES, "setlength")]
    try:
        latex = styler.to_latex(environment="longtable", hrules=True, multirow_align="naive", multicol_align="c",
                                clines="skip-last;data", caption=caption if caption is not None else styler.caption,
                                label=label)
    finally:
        styler.table_styles = styles
    latex = _CONTINUED.sub(lambda _: "\\caption[]{(continued)} \\\\", _booktabs_rules(latex))
    return f"\\begingroup{setup}\n{latex}\\endgroup\n"


def long_table(styler: Styler, widths: Sequence[float], numeric: int = 0) -> Styler:
    """Mark a table of long texts: small type (footnotesize, 3pt between columns), ragged-right wrapping columns of
    these widths (cm) and `numeric` right-aligned columns after them."""
    styler.set_table_styles([{"selector": "column_format", "props": ":" + "".join(
        rf">{{\raggedright\arraybackslash}}p{{{w}cm}}" for w in widths) + "r" * numeric + ";"}], overwrite=False)
    styler.long_table = True
    return styler


def write_latex(styler: Styler, path: str | os.PathLike, caption: str | None, label: str | None,
                command: str, commit: str) -> Path:
    """Write `styler` as a LaTeX table file under a provenance header. `caption=None` keeps the builder's
    caption; a given caption replaces its text but not the notes on why values are n/a."""
    if caption is not None:
        caption = f"{caption} {getattr(styler, 'unavailable_notes', '')}".strip()
    return atomic_write_text(path, provenance_header(command, commit) + render_latex(styler, caption, label))

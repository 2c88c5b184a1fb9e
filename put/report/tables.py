"""LaTeX result tables in the paper's layouts: measured rows beside the paper's reported rows.

Each builder returns a `Table` (put/report/latex.py), which `write_latex` renders under a provenance header. A
measured value carries its interval as a "+-" half-width, or a footnote saying why it has none; Table 3 marks the
ablations whose paired difference from PUT survives the family-wise correction.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from put.config.bins import TABLE_GROUPS
from put.config.evaluation import RULE_CLAUSES, one_rule
from put.config.model import ABLATIONS
from put.report.differences import SIGNIFICANT, marks_sentence, significant_cells
from put.report.latex import Table, latex_escape, reason_latex
from put.report.reported import LOWER_IS_BETTER, METRICS, TABLE3_DATASETS, reference_dataset, table3_reported
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

# As the paper writes them: PUT, and each ablation as PUT with its name raised (PUT$^{\rm conv}$).
VARIANT_LABELS: dict[str, str] = {v: "PUT" if v == "put" else rf"PUT$^{{\rm {latex_escape(v)}}}$"
                                  for v in VARIANT_ORDER}


# --------------------------------------------------------------------------------------------- measured data

def check_metrics(metrics: pd.DataFrame) -> pd.DataFrame:
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


def measured(metrics: pd.DataFrame, variant: str, mode: str,
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


def sample_sizes(metrics: pd.DataFrame, variants: Iterable[str]) -> str:
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

@dataclass(frozen=True)
class Row:
    """One row over GROUPS: its metric, block and label, its values, why each is missing or has no interval
    (None: a reported row), the half interval widths and their Monte-Carlo errors (None: none), and `key`, what
    its significance marks are looked up by beside metric and group (None: a row never marked)."""

    metric: str
    block: str
    label: str
    values: list[float]
    reasons: list[str] | None = None
    halves: list[float] | None = None
    errors: list[float] | None = None
    key: tuple[str, ...] | None = None

    def flags(self, significant: Collection[tuple]) -> list[bool]:
        """Per group: whether (*key, metric, group) is among `significant`."""
        return [self.key is not None and (*self.key, self.metric, g) in significant for g in GROUPS]


def styled(rows: Sequence[Row], level_names: tuple[str, str], caption: str, significant: Collection[tuple] = (),
           ranked: Sequence[bool] | None = None) -> Table:
    """Per-metric number formats, the best measured values in bold, a dagger on the cells of `significant`
    (Row.flags), reported values in italics, intervals in small type, n/a with one footnote per reason. The rows
    are indexed by (metric_key, measured, Metric, *level_names), the first two dropped from what is shown (they
    drive formats, bolding and italics). `ranked`: the rows bold is drawn among (default: every measured row)."""
    index = pd.MultiIndex.from_tuples([(r.metric, r.reasons is not None, METRIC_LABELS[r.metric], r.block, r.label)
                                       for r in rows], names=["metric_key", "measured", "Metric", *level_names])
    columns = pd.Index(list(GROUPS), name=r"Mask ratio (\%)")

    def frame(cells: list[list], dtype: type | None = float) -> pd.DataFrame:
        return pd.DataFrame(cells, index=index, columns=columns, dtype=dtype)

    values = frame([r.values for r in rows])
    reasons = frame([r.reasons or [""] * len(GROUPS) for r in rows], None)
    halves, errors = (frame([part or [np.nan] * len(GROUPS) for part in parts])
                      for parts in ([r.halves for r in rows], [r.errors for r in rows]))
    flags = frame([r.flags(significant) for r in rows], None)
    metric_of_row = index.get_level_values("metric_key")
    decimals = np.repeat(np.array([DECIMALS[m] for m in metric_of_row])[:, None], values.shape[1], axis=1)
    candidates = np.asarray(index.get_level_values("measured") if ranked is None else ranked, bool)
    best = best_cells(values, decimals, np.asarray(metric_of_row.isin(LOWER_IS_BETTER)), np.asarray(metric_of_row),
                      candidates)
    marks, notes = footnotes(reasons)
    shown = cell_text(values, decimals, marks, halves, best, flags, errors)
    reported = ~np.asarray(index.get_level_values("measured"), bool)
    shown[reported] = shown[reported].map(lambda c: rf"\emph{{{c}}}")  # the paper's numbers, marked as such
    shown = shown.droplevel(["metric_key", "measured"])
    styler = shown.style
    styler.hide(axis="index", names=True)
    # The row labels wrap (a released-weights entry's name is long); the table breaks across pages (render_latex).
    label = r">{\raggedright\arraybackslash}p{4.2cm}"
    styler.set_table_styles([{"selector": "small", "props": ":;"},
                             {"selector": "column_format", "props": f":ll{label}{'r' * shown.shape[1]};"}],
                            overwrite=False)
    return Table(styler.set_caption(f"{caption} {notes}".strip()), notes)


def reported_values(table: pd.DataFrame, key: str, name: str, metric: str, dataset: str) -> list[float]:
    hit = table[(table[key] == name) & (table["metric"] == metric) & (table["dataset"] == dataset)]
    return hit.set_index("group")["value"].reindex(list(GROUPS)).astype(float).tolist()


def dataset_sentence(preset: str, dataset: str, own: bool) -> str:
    if own:
        return f"preset \\texttt{{{latex_escape(preset)}}} ({dataset})"
    return (f"preset \\texttt{{{latex_escape(preset)}}}, which has no counterpart in the paper: the reported rows "
            f"are the paper's {dataset} numbers, shown for scale only")


def own_data_sentence(preset: str, name: str) -> str:
    """Where a table's rows come from when the preset ran on the user's own images (a folder dataset)."""
    return (f"preset \\texttt{{{latex_escape(preset)}}}'s model and training on {latex_escape(name)} (a folder of "
            "the user's images; the paper reports no numbers on it, so no reported rows)")


def bold_rule(reported: bool) -> str:
    """How Table 3 ranks its rows (and that the paper's, where it has them, are not)."""
    return ("Bold: best measured value per column within each metric (lower is better for FID and MAE, higher "
            "for PSNR and SSIM)" + ("; reported rows are not ranked." if reported else "."))


# --------------------------------------------------------------------------------------------- tables

def table3(metrics: pd.DataFrame, preset: str, differences: pd.DataFrame | None = None,
           level: float = 0.95, data_name: str | None = None) -> Table:
    """The paper's Table 3 (ablations, K=50): every variant measured, then the paper's rows for the dataset (FFHQ's
    for the demo; none for ImageNet). `differences`: mark ablations whose difference from PUT survives the
    family's correction. `data_name`: a user's own dataset (no reported rows)."""
    metrics = check_metrics(metrics)
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
    rows: list[Row] = []
    for metric in METRICS:
        rows += [Row(metric, "measured", VARIANT_LABELS[v], *measured(metrics, v, "k50", metric), key=(v,))
                 for v in VARIANT_ORDER]
        if has_reported:
            rows += [Row(metric, f"reported, {dataset}", VARIANT_LABELS[v],
                         reported_values(reported, "variant", v, metric, dataset)) for v in VARIANT_ORDER]
    where = (own_data_sentence(preset, data_name) if data_name is not None else
             dataset_sentence(preset, dataset, own) if has_reported else
             f"preset \\texttt{{{latex_escape(preset)}}} ({dataset}; the paper reports no ablation on it)")
    covers = "; ".join(dict.fromkeys(() if family is None else family["variation"]))
    tested = marks_sentence(
        family, level, "the ablation differs from PUT", more=" The family: every ablation x PSNR, SSIM, MAE x mask "
        "group at K = 50 (the paired difference of its mean per-image value from PUT's on the same test images, "
        f"masks and sample draws); its intervals cover {covers}. Unmarked: not distinguishable from that noise. FID "
        "is not tested.")
    scored = f" {RULE_CLAUSES[rule][0].upper()}{RULE_CLAUSES[rule][1:]}." if rule else ""
    caption = (f"Ablations as in the paper's Table~3, $\\mathcal{{K}}=50$, {where}.{scored} {bold_rule(has_reported)}"
               f"{sample_sizes(metrics, VARIANT_ORDER)}{interval_sentence(metrics, level)}{tested}")
    return styled(rows, ("Source", "Variant"), caption, significant_cells(family, "variant", "metric", "group"))

"""LaTeX result tables in the paper's layouts: measured rows beside the paper's reported rows.

Each builder returns a pandas Styler (formats, bold best values, "n/a" for unavailable values and a
default caption that lists why); `write_latex` renders it with booktabs rules under a provenance header.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler

from put.fileio import atomic_write_text
from put.masks.bins import TABLE_GROUPS
from put.report.reported import (
    LOWER_IS_BETTER,
    METRICS,
    MODE_METHOD,
    PRESET_DATASET,
    SPEED_DEVICE,
    TABLE3_DATASETS,
    reference_dataset,
    speed_reported,
    table1_reported,
    table3_reported,
)

GROUPS: tuple[str, ...] = tuple(TABLE_GROUPS)
VARIANT_ORDER: tuple[str, ...] = ("conv", "one", "no_ref", "tok", "qua0", "put")  # Table 3's row order
METRIC_LABELS: dict[str, str] = {"fid": r"FID $\downarrow$", "psnr": r"PSNR $\uparrow$", "ssim": r"SSIM $\uparrow$",
                                 "mae": r"MAE $\downarrow$"}
METRIC_NAMES: dict[str, str] = {"fid": "FID", "psnr": "PSNR", "ssim": "SSIM", "mae": "MAE"}
DECIMALS: dict[str, int] = {"fid": 3, "psnr": 3, "ssim": 3, "mae": 4}  # as printed in the paper
METHOD_LABELS: dict[str, str] = {
    "DFv2": "DFv2", "EC": "EC", "MED": "MED", "ICT_all": r"ICT$_{\rm all}$", "PUT_all": r"PUT$_{\rm all}$",
    "PIC": "PIC", "ICT_50": r"ICT$_{50}$", "PUT_50": r"PUT$_{50}$",
}
VARIANT_LABELS: dict[str, str] = {"put": "PUT", **{v: rf"PUT$^{{\rm {latex_v}}}$" for v, latex_v in (
    ("conv", "conv"), ("one", "one"), ("no_ref", r"no\_ref"), ("tok", "tok"), ("qua0", "qua0"))}}
MODE_LABELS: dict[str, str] = {"all": "deterministic", "k50": r"$\mathcal{K}=50$"}
# Other methods of Table 1, shown only with `context=True`, in the paper's order within each block.
CONTEXT_METHODS: dict[str, tuple[str, ...]] = {"all": ("DFv2", "EC", "MED", "ICT_all"), "k50": ("PIC", "ICT_50")}
BOLD = "textbf:--rwrap;"
NA = "n/a"
MEASURED_COLUMNS = ("variant", "group", "mode", *METRICS)

_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                   "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """Plain text (file names, reasons, device names) made safe for LaTeX."""
    return "".join(_LATEX_SPECIALS.get(c, c) for c in str(text))


# --------------------------------------------------------------------------------------------- measured data

def _check_metrics(metrics: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in MEASURED_COLUMNS if c not in metrics.columns]
    if missing:
        raise ValueError(f"metrics frame lacks column(s) {', '.join(missing)}")
    dupes = metrics.duplicated(["variant", "group", "mode"])
    if dupes.any():
        first = metrics.loc[dupes, ["variant", "group", "mode"]].iloc[0].tolist()
        raise ValueError(f"metrics frame has more than one row for (variant, group, mode) = {tuple(first)}")
    return metrics


def _reason(row: pd.Series | None, metric: str) -> str:
    """Why a measured value is missing: the evaluate stage's reason, else a generic one."""
    if row is None:
        return "not evaluated"
    reason = row.get(f"{metric}_unavailable")
    return str(reason) if isinstance(reason, str) and reason.strip() else "not measured"


Notes = dict[str, dict[str, list[str]]]  # reason -> what (e.g. "FID of PUT (measured)") -> groups


def _measured(metrics: pd.DataFrame, variant: str, mode: str, metric: str, label: str, notes: Notes) -> list[float]:
    """One table row of measured values over GROUPS; each missing value's reason goes into `notes`."""
    values = []
    for group in GROUPS:
        hit = metrics[(metrics["variant"] == variant) & (metrics["mode"] == mode) & (metrics["group"] == group)]
        row = hit.iloc[0] if len(hit) else None
        value = float(row[metric]) if row is not None and pd.notna(row[metric]) else float("nan")
        if np.isnan(value):
            what = f"{METRIC_NAMES[metric]} of {label}"
            notes.setdefault(_reason(row, metric), {}).setdefault(what, []).append(group)
        values.append(value)
    return values


def _notes_text(notes: Notes) -> str:
    if not notes:
        return ""
    parts = [", ".join(f"{what} ({', '.join(groups)})" for what, groups in by_what.items())
             + f": {latex_escape(reason)}" for reason, by_what in notes.items()]
    return f"{NA} = not available. " + "; ".join(parts) + "."


def _sample_sizes(metrics: pd.DataFrame, variants: Iterable[str]) -> str:
    if "n" not in metrics.columns:
        return ""
    n = metrics.loc[metrics["variant"].isin(list(variants)), "n"].dropna().astype(int).unique()
    if not len(n):
        return ""
    shown = str(n[0]) if len(n) == 1 else f"{n.min()}--{n.max()}"
    return f" Measured on {shown} test images per mask group."


# --------------------------------------------------------------------------------------------- styling

def _best_mask(frame: pd.DataFrame) -> pd.DataFrame:
    """True where a cell is its metric block's best in its column, compared at the printed precision
    (ties as printed are all bold, as in the paper); NaN never wins."""
    metric_of_row = frame.index.get_level_values("metric_key")
    rounded = frame.copy()
    for metric in METRICS:
        rows = metric_of_row == metric
        # Round through the printed string: numpy's round can disagree with the format's rounding.
        rounded.loc[rows] = frame.loc[rows].map(lambda v, d=DECIMALS[metric]: float(f"{v:.{d}f}"))
    blocks = rounded.groupby(level="metric_key", sort=False)
    lower = np.asarray(metric_of_row.isin(LOWER_IS_BETTER))[:, None]
    best = np.where(lower, blocks.transform("min"), blocks.transform("max"))
    return rounded.eq(best) & rounded.notna()


def _style(frame: pd.DataFrame, caption: str, notes: str) -> Styler:
    """Per-metric number formats, bold best values, n/a for NaN; the helper level `metric_key` is dropped
    from what is shown (it only drives formats and bolding). `notes` (why values are n/a) end the caption
    and are kept on the styler, so that `write_latex` keeps them under a caller's own caption."""
    best = _best_mask(frame)
    shown = frame.droplevel("metric_key")
    best.index = shown.index
    styler = shown.style.format(na_rep=NA)
    metric_of_row = frame.index.get_level_values("metric_key")
    for metric in METRICS:
        styler = styler.format(f"{{:.{DECIMALS[metric]}f}}", na_rep=NA,
                               subset=pd.IndexSlice[np.asarray(metric_of_row == metric), :])
    styler = styler.apply(lambda _: np.where(best.to_numpy(), BOLD, ""), axis=None)
    styler.hide(axis="index", names=True)
    styler.set_table_styles([{"selector": "small", "props": ":;"}], overwrite=False)  # 48 rows fit a page
    styler.unavailable_notes = notes
    return styler.set_caption(f"{caption} {notes}".strip())


def _frame(rows: list[tuple[str, str, str, list[float]]], level_names: tuple[str, str]) -> pd.DataFrame:
    """rows: (metric key, block label, row label, values over GROUPS) -> frame indexed by
    (metric_key, Metric, block, row) with the groups as columns."""
    index = pd.MultiIndex.from_tuples([(m, METRIC_LABELS[m], block, label) for m, block, label, _ in rows],
                                      names=["metric_key", "Metric", *level_names])
    columns = pd.Index(list(GROUPS), name=r"Mask ratio (\%)")
    return pd.DataFrame([values for *_, values in rows], index=index, columns=columns, dtype=float)


def _reported_values(table: pd.DataFrame, key: str, name: str, metric: str, dataset: str) -> list[float]:
    hit = table[(table[key] == name) & (table["metric"] == metric) & (table["dataset"] == dataset)]
    return hit.set_index("group")["value"].reindex(list(GROUPS)).astype(float).tolist()


def _dataset_sentence(preset: str, dataset: str, own: bool) -> str:
    if own:
        return f"preset \\texttt{{{latex_escape(preset)}}} ({dataset})"
    return (f"preset \\texttt{{{latex_escape(preset)}}}, which has no counterpart in the paper: the reported rows "
            f"are the paper's {dataset} numbers, shown for scale only")


_BOLD_RULE = ("Bold: best value per column within each metric (lower is better for FID and MAE, higher for PSNR "
              "and SSIM).")


# --------------------------------------------------------------------------------------------- tables

def table1(metrics: pd.DataFrame, preset: str, context: bool = False) -> Styler:
    """The paper's Table 1 for one preset: per metric, the deterministic block (our PUT_all measured, the
    paper's PUT_all reported) and the K=50 block (PUT_50 likewise). `context=True` adds the paper's
    other methods (DFv2, EC, MED, ICT, PIC) as further reported rows."""
    metrics = _check_metrics(metrics)
    dataset, own = reference_dataset(preset)
    reported = table1_reported()
    notes: Notes = {}
    rows = []
    for metric in METRICS:
        for mode, method in MODE_METHOD.items():
            block = MODE_LABELS[mode]
            label = f"{METHOD_LABELS[method]} (measured)"
            rows.append((metric, block, label, _measured(metrics, "put", mode, metric, label, notes)))
            others = CONTEXT_METHODS[mode] if context else ()
            for name in (*others, method):
                rows.append((metric, block, f"{METHOD_LABELS[name]} (reported, {dataset})",
                             _reported_values(reported, "method", name, metric, dataset)))
    caption = (f"Comparison with the paper's Table~1, {_dataset_sentence(preset, dataset, own)}. Measured rows: "
               f"our reproduction; reported rows: numbers printed in the paper. {_BOLD_RULE}"
               f"{_sample_sizes(metrics, ['put'])}")
    return _style(_frame(rows, ("Sampling", "Method")), caption, _notes_text(notes))


def table3(metrics: pd.DataFrame, preset: str) -> Styler:
    """The paper's Table 3 (ablations, K=50): per metric, every variant measured, then the paper's
    reported rows for the matching dataset (FFHQ's, labelled, for the demo preset; none for ImageNet,
    which the paper did not ablate)."""
    metrics = _check_metrics(metrics)
    dataset, own = reference_dataset(preset)
    reported = table3_reported()
    has_reported = dataset in TABLE3_DATASETS
    notes: Notes = {}
    rows = []
    for metric in METRICS:
        for variant in VARIANT_ORDER:
            label = VARIANT_LABELS[variant]
            rows.append((metric, "measured", label,
                         _measured(metrics, variant, "k50", metric, f"{label} (measured)", notes)))
        if has_reported:
            rows += [(metric, f"reported, {dataset}", VARIANT_LABELS[v],
                      _reported_values(reported, "variant", v, metric, dataset)) for v in VARIANT_ORDER]
    where = (_dataset_sentence(preset, dataset, own) if has_reported else
             f"preset \\texttt{{{latex_escape(preset)}}} ({dataset}; the paper reports no ablation on it)")
    caption = (f"Ablations as in the paper's Table~3, $\\mathcal{{K}}=50$, {where}. {_BOLD_RULE}"
               f"{_sample_sizes(metrics, VARIANT_ORDER)}")
    return _style(_frame(rows, ("Source", "Variant")), caption, _notes_text(notes))


def _dataset_of(preset: str) -> str:
    return PRESET_DATASET.get(preset) or f"{preset} preset"


def speed_table(sampling: Sequence[dict], pvqvae: Sequence[dict]) -> Styler:
    """Our measured throughput (`put bench` JSON dicts) beside the paper's RTX 3090 figures.
    Nothing is bolded: rows differ in device and model size, so no column has a meaningful best."""
    rows = []
    for b in sampling:
        rows.append(("UQ-Transformer (tokens/s)", "measured", _dataset_of(b["preset"]), b.get("device_name", "?"),
                     b.get("dtype", "?"), f"batch {b.get('batch', 1)}, {b.get('tokens_per_step', 1)} token(s)/step",
                     float(b["tokens_per_second"]), b.get("fraction_of_matmul", float("nan"))))
    for b in pvqvae:
        rows.append(("P-VQVAE (images/s)", "measured", _dataset_of(b["preset"]), b.get("device_name", "?"),
                     b.get("dtype", "?"), f"batch {b.get('batch', '?')}, {b.get('image_size', '?')} px",
                     float(b["images_per_second"]), float("nan")))
    for r in speed_reported().itertuples():
        model = "UQ-Transformer (tokens/s)" if r.unit == "tokens/s" else "P-VQVAE (images/s)"
        rows.append((model, "reported", r.dataset, r.device, "--", "--", float(r.value), float("nan")))
    frame = pd.DataFrame(rows, columns=["Model", "Source", "Dataset", "Device", "Precision", "Setting",
                                        "Throughput", "Matmul use"])
    frame["Matmul use"] = frame["Matmul use"].astype(float)
    # Measured before reported, transformer before P-VQVAE; a stable sort keeps the input order within.
    frame = frame.sort_values(["Model", "Source"], key=lambda s: s.map(
        {"UQ-Transformer (tokens/s)": 0, "P-VQVAE (images/s)": 1, "measured": 0, "reported": 1}), kind="stable")
    frame = frame.set_index(["Model", "Source"])
    styler = frame.style.format(escape="latex", na_rep=NA)
    styler = styler.format("{:.3f}", subset=["Throughput"], na_rep=NA)
    styler = styler.format(lambda v: f"{100 * v:.1f}\\%", subset=["Matmul use"], na_rep=NA)
    styler.hide(axis="index", names=True)
    # Wrapping columns: device names and settings are long, the page is not.
    styler.set_table_styles([{"selector": "footnotesize", "props": ":;"},
                             {"selector": "column_format", "props": ":p{2.1cm}llp{2.3cm}p{1.5cm}p{2cm}rr;"}],
                            overwrite=False)
    return styler.set_caption(
        f"Inference speed: our measurements beside the paper's supplementary table (reported: {SPEED_DEVICE}; "
        "precision and batch not stated there). Matmul use: achieved FLOP rate of one sampling step over a plain "
        "matmul's rate on the same device.")


# --------------------------------------------------------------------------------------------- writing

def provenance_header(command: str, commit: str) -> str:
    """LaTeX comment lines naming the generating command and commit (newlines would end the comment)."""
    flat = " ".join(str(command).split())
    return (f"% Generated file: do not edit by hand; regenerate it with the command below.\n"
            f"% Command: {flat}\n% Git commit: {' '.join(str(commit).split()) or 'unknown'}\n")


_CLINE_ROW = re.compile(r"^(\\cline\{\d+-\d+\}\s*)+$")


def _booktabs_rules(latex: str) -> str:
    r"""Styler marks block borders with \cline, whose spacing clashes with booktabs: a border of the outer
    level becomes \midrule, an inner one \cmidrule, and the border before \bottomrule is dropped."""
    lines = latex.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        if not _CLINE_ROW.match(line.strip()):
            out.append(line)
            continue
        spans = re.findall(r"\\cline\{(\d+)-(\d+)\}", line)
        if i + 1 < len(lines) and lines[i + 1].strip() == r"\bottomrule":
            continue
        first, last = min(spans, key=lambda s: int(s[0]))
        out.append(r"\midrule" if first == "1" else rf"\cmidrule(l){{{first}-{last}}}")
    return "\n".join(out) + "\n"


def render_latex(styler: Styler, caption: str | None = None, label: str | None = None) -> str:
    """The table environment (booktabs, no multirow: repeated labels are left blank instead)."""
    return _booktabs_rules(styler.to_latex(
        environment="table", position="htbp", position_float="centering", hrules=True,
        multirow_align="naive", multicol_align="c", clines="skip-last;data",
        caption=caption if caption is not None else styler.caption, label=label))


def write_latex(styler: Styler, path: str | os.PathLike, caption: str | None, label: str | None,
                command: str, commit: str) -> Path:
    """Write `styler` as a LaTeX table file under a provenance header. `caption=None` keeps the builder's
    caption; a given caption replaces its text but not the notes on why values are n/a."""
    if caption is not None:
        caption = f"{caption} {getattr(styler, 'unavailable_notes', '')}".strip()
    return atomic_write_text(path, provenance_header(command, commit) + render_latex(styler, caption, label))

"""The paper's Table 1 for one preset: a ranked block (PUT, the released weights and every other method measured on
the same masks, all scored under one compositing rule, with their paired differences from PUT), PUT's rows under
the paper's rule beside it where they differ (not ranked), and the paper's reported rows (docs/external.md,
"One rule per block")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
from pandas.io.formats.style import Styler

from put.config.evaluation import RANKED_RULE, RULE_CLAUSES, one_rule
from put.config.params import OFFICIAL_PREFIX
from put.report.differences import family_sentence
from put.report.reported import MODE_METHOD, reference_dataset, table1_reported
from put.report.tables import (
    GROUPS,
    METHOD_LABELS,
    METRICS,
    MODE_LABELS,
    SIGNIFICANT,
    Row,
    _check_metrics,
    _dataset_sentence,
    _frame,
    _measured,
    _reported_values,
    _sample_sizes,
    _style,
    interval_sentence,
    latex_escape,
    own_data_sentence,
    reason_latex,
    rules_of,
)

BOLD_RULE = ("Bold: best value per column within each metric among the ranked block's rows (lower is better for FID "
             "and MAE, higher for PSNR and SSIM); the other blocks are not ranked.")
# Other methods of Table 1, shown only with `context=True`, in the paper's order within each block.
CONTEXT_METHODS: dict[str, tuple[str, ...]] = {"all": ("DFv2", "EC", "MED", "ICT_all"), "k50": ("PIC", "ICT_50")}


@dataclass(frozen=True)
class MeasuredMethod:
    """A measured method of Table 1 besides PUT (a classical inpainter, another network run from a folder of its
    outputs): the label of its rows in the metrics frame, its row label (LaTeX), a citation and how it was run
    (LaTeX sentences, said once in the caption)."""

    variant: str
    label: str
    citation: str
    how: str


MASKS_NOTE = ("every measured method ran on the same test images and the frozen evaluation masks "
              "(\\texttt{put masks-export} writes them for a method run outside this code) and was scored by the "
              "same evaluation")


def _flags(rows: list[Row], keys: list[tuple[str, str] | None], significant: set[tuple[str, str, str, str]]
           ) -> list[list[bool]]:
    """Per row (its (variant, mode), None for a reported row) and group: the row's difference is in `significant`."""
    return [[key is not None and (*key, row[0], g) in significant for g in GROUPS] for row, key in zip(rows, keys)]


def with_rules(metrics: pd.DataFrame) -> pd.DataFrame:
    """The frame with a `rule` column (a frame without one: every row scored as returned, raw)."""
    return metrics if "rule" in metrics.columns else metrics.assign(rule="raw")


def ranked_rule(metrics: pd.DataFrame, ranked: Sequence[str]) -> str:
    """The compositing rule of Table 1's ranked block: RANKED_RULE where PUT or a released checkpoint was scored
    under it, else the one rule of the block's rows. Each row of `ranked` takes its rows of that rule, or, having
    none, of the rules it has: MixedRulesError when those differ (a pasted row ranked against a raw one)."""
    rules = {label: set(metrics.loc[metrics["variant"] == label, "rule"]) for label in ranked}
    rules = {label: found for label, found in rules.items() if found}
    own = [label for label in rules if label == "put" or label.startswith(OFFICIAL_PREFIX)]
    rule = RANKED_RULE if any(RANKED_RULE in rules[label] for label in own) else None
    chosen = {label: (rule if rule in found else ", ".join(sorted(found))) for label, found in rules.items()}
    return one_rule(chosen, "Table 1's ranked block") or RANKED_RULE


def table1(metrics: pd.DataFrame, preset: str, context: bool = False, level: float = 0.95,
           differences: pd.DataFrame | None = None, methods: Sequence[MeasuredMethod] = (),
           data_name: str | None = None) -> Styler:
    """The paper's Table 1 for one preset, per metric: the ranked block (PUT deterministic and K=50, the released
    weights, each of `methods` in every sampling mode it was evaluated in, all under one compositing rule: the
    frame's `rule` column, put.config.evaluation), then PUT's and the released weights' rows under the other rule
    (the paper's raw output, when the ranked block pastes; not ranked), then the reported block (the paper's PUT rows;
    `context=True` adds its other methods, DFv2, EC, MED, ICT, PIC), below a rule, in italics and never ranked.
    `differences`: a ranked row is marked where its paired difference from PUT, under the block's rule, survives its
    family's correction. Rows of different rules in the ranked block, or differences of another rule: an error.
    `data_name`: the name of the user's own dataset the preset was run on (a folder dataset): the paper reports
    nothing on it, so the table has no reported block."""
    metrics = with_rules(_check_metrics(metrics))
    dataset, own = reference_dataset(preset)
    reported = table1_reported()
    official = sorted(v for v in metrics["variant"].unique() if str(v).startswith(OFFICIAL_PREFIX))
    labels = ["put", *official, *(m.variant for m in methods)]
    rule = ranked_rule(metrics, labels)
    ranked = metrics[metrics["rule"] == rule]
    paper = metrics[(metrics["rule"] != rule) & metrics["variant"].isin(["put", *official])]
    paper_rule = one_rule(rules_of(paper), "Table 1's block of PUT's own rule")
    modes = {v: [m for m in MODE_METHOD if ((ranked["variant"] == v) & (ranked["mode"] == m)).any()]
             for v in (m.variant for m in methods)}
    rows: list[Row] = []
    keys: list[tuple[str, str] | None] = []  # (variant, mode) of a ranked row, for its significance marks
    blocks = {f"measured, {rule}": ranked, **({f"measured, {paper_rule}": paper} if len(paper) else {})}
    for metric in METRICS:
        for block, frame in blocks.items():
            for mode, method in MODE_METHOD.items():
                name = METHOD_LABELS[method]
                rows.append((metric, block, name, *_measured(frame, "put", mode, metric)))
                rows += [(metric, block, f"{name}, released \\texttt{{{latex_escape(v[len(OFFICIAL_PREFIX):])}}}",
                          *_measured(frame, v, mode, metric)) for v in official]
                keys += [("put", mode) if frame is ranked else None, *((v, mode) if frame is ranked else None
                                                                       for v in official)]
            if frame is not ranked:
                continue
            for m in methods:
                rows += [(metric, block, m.label + ("" if len(modes[m.variant]) < 2 else f" ({MODE_LABELS[mode]})"),
                          *_measured(ranked, m.variant, mode, metric)) for mode in modes[m.variant]]
                keys += [(m.variant, mode) for mode in modes[m.variant]]
        for mode, method in (MODE_METHOD.items() if data_name is None else ()):
            for name in (*(CONTEXT_METHODS[mode] if context else ()), method):
                rows.append((metric, f"reported, {dataset}", METHOD_LABELS[name],
                             _reported_values(reported, "method", name, metric, dataset), None, None, None))
                keys.append(None)
    shown = {k[0] for k in keys if k is not None} - {"put"}
    family = differences[differences["variant"].isin(shown)] if differences is not None and len(differences) \
        else None  # a frame of no differences may have no columns either
    significant = set()
    if family is not None and len(family):
        if "rule" in family.columns:  # marks from differences of another rule would rank protocols, not methods
            one_rule({"the ranked block": rule, **{f"{v}'s differences from put": r
                                                   for v, r in rules_of(family).items()}}, "Table 1's marks")
        hits = family[family["significant"].astype(bool)]  # an empty object column would select columns
        significant = set(zip(hits["variant"], hits["mode"], hits["metric"], hits["group"]))
    tested = ""
    if family is not None and len(family):
        tested = " " + SIGNIFICANT + reason_latex(family_sentence(family, family["method"].iloc[0], level,
                                                                  "the method differs from PUT", per="sampling mode"))
    released = (" Released rows: the authors' released checkpoints, imported and evaluated under our protocol."
                if official else "")
    others = "".join(f" {m.label} ({m.citation}): {m.how}" for m in methods)
    second = (f" Block ``measured, {paper_rule}'' (not ranked): PUT's own rows "
              f"{RULE_CLAUSES[paper_rule].removeprefix('every row ')}, to compare with the reported block, not with "
              "the ranked one." if len(paper) else "")
    where = _dataset_sentence(preset, dataset, own) if data_name is None else own_data_sentence(preset, data_name)
    printed = (" Reported block (below the rule, in italics): numbers printed in the paper." if data_name is None
               else "")
    caption = (f"Comparison with the paper's Table~1, {where}. Ranked block "
               f"(``measured, {rule}''): our reproduction{'; ' + MASKS_NOTE if methods else ''}; "
               f"{RULE_CLAUSES[rule]}.{released}{others}{second}{printed} {BOLD_RULE}"
               f"{_sample_sizes(metrics, ['put', *official, *shown])}{interval_sentence(metrics, level)}{tested}")
    values, reasons, halves, errors = _frame(rows, ("Source", "Method"))
    flags = pd.DataFrame(_flags(rows, keys, significant), index=values.index, columns=values.columns)
    candidates = [row[1] == f"measured, {rule}" for row in rows]
    return _style(values, reasons, caption, halves, flags, errors, ranked=candidates)

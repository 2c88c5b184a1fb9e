"""The paper's Table 1 for one preset: a ranked block (PUT, the released weights and every other method measured on
the same masks, all scored under one compositing rule, with their paired differences from PUT), PUT's rows under
the paper's rule beside it where they differ (not ranked), and the paper's reported rows (docs/external.md,
"One rule per block")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from put.config.evaluation import RANKED_RULE, RULE_CLAUSES, one_rule
from put.config.external import ExternalMethod
from put.config.params import OFFICIAL_PREFIX
from put.report.differences import marks_sentence, significant_cells
from put.report.latex import Table, latex_escape
from put.report.reported import MODE_METHOD, reference_dataset, table1_reported
from put.report.tables import (
    METHOD_LABELS,
    METRICS,
    MODE_LABELS,
    Row,
    check_metrics,
    dataset_sentence,
    interval_sentence,
    measured,
    own_data_sentence,
    reported_values,
    rules_of,
    sample_sizes,
    styled,
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


def measured_methods(external: dict[str, ExternalMethod]) -> list[MeasuredMethod]:
    """Table 1's rows of params.yaml's `external` entries, by their evaluation's label (docs/external.md)."""
    return [MeasuredMethod(label, latex_escape(entry.label), latex_escape(entry.citation),
                           latex_escape(entry.how_run())) for label, entry in external.items()]


MASKS_NOTE = ("every measured method ran on the same test images and the frozen evaluation masks "
              "(\\texttt{put masks-export} writes them for a method run outside this code) and was scored by the "
              "same evaluation")


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
           data_name: str | None = None) -> Table:
    """The paper's Table 1 for one preset, per metric: the ranked block (PUT, the released weights, `methods`, all
    under one compositing rule), PUT's and the released weights' rows under the other rule (not ranked), then the
    paper's reported rows in italics (`context=True`: also DFv2, EC, MED, ICT, PIC). `differences`: mark ranked
    rows whose paired difference from PUT survives the family's correction. Mixed rules raise. `data_name`: a
    user's own dataset, with no reported block."""
    metrics = with_rules(check_metrics(metrics))
    dataset, own = reference_dataset(preset)
    official = sorted(v for v in metrics["variant"].unique() if str(v).startswith(OFFICIAL_PREFIX))
    rule = ranked_rule(metrics, ["put", *official, *(m.variant for m in methods)])
    ranked = metrics[metrics["rule"] == rule]
    paper = metrics[(metrics["rule"] != rule) & metrics["variant"].isin(["put", *official])]
    paper_rule = one_rule(rules_of(paper), "Table 1's block of PUT's own rule")
    blocks = {f"measured, {rule}": ranked, **({f"measured, {paper_rule}": paper} if len(paper) else {})}
    reported = table1_reported() if data_name is None else None  # the user's own images: no reported block
    rows = [row for metric in METRICS for row in (*measured_rows(blocks, rule, official, methods, metric),
                                                  *reported_rows(reported, dataset, metric, context))]
    shown = {row.key[0] for row in rows if row.key is not None} - {"put"}
    family = differences[differences["variant"].isin(shown)] if differences is not None and len(differences) \
        else None  # a frame of no differences may have no columns either
    if family is not None and len(family) and "rule" in family.columns:
        # marks from differences of another rule would rank protocols, not methods
        one_rule({"the ranked block": rule, **{f"{v}'s differences from put": r
                                               for v, r in rules_of(family).items()}}, "Table 1's marks")
    where = dataset_sentence(preset, dataset, own) if data_name is None else own_data_sentence(preset, data_name)
    blocks_text = blocks_sentence(official, methods, paper_rule if len(paper) else None, reported is not None)
    caption = (f"Comparison with the paper's Table~1, {where}. Ranked block "
               f"(``measured, {rule}''): our reproduction{'; ' + MASKS_NOTE if methods else ''}; "
               f"{RULE_CLAUSES[rule]}.{blocks_text}"
               f"{'' if data_name is not None else REPORTED_NOTE} {BOLD_RULE}"
               f"{sample_sizes(metrics, ['put', *official, *shown])}{interval_sentence(metrics, level)}"
               f"{marks_sentence(family, level, 'the method differs from PUT', per='sampling mode')}")
    return styled(rows, ("Source", "Method"), caption, significant_cells(family, "variant", "mode", "metric", "group"),
                  ranked=[row.block == f"measured, {rule}" for row in rows])


def measured_rows(blocks: dict[str, pd.DataFrame], rule: str, official: Sequence[str],
                  methods: Sequence[MeasuredMethod], metric: str) -> list[Row]:
    """One metric's measured rows, block by block: PUT's and each release's per sampling mode, then (ranked block
    only) each method's per mode it was evaluated in. A ranked row is keyed by its (variant, mode) for its marks."""
    rows = []
    for block, frame in blocks.items():
        ranked = block == f"measured, {rule}"
        for mode, method in MODE_METHOD.items():
            name = METHOD_LABELS[method]
            rows += [Row(metric, block, name if v == "put" else
                         f"{name}, released \\texttt{{{latex_escape(v[len(OFFICIAL_PREFIX):])}}}",
                         *measured(frame, v, mode, metric), key=(v, mode) if ranked else None)
                     for v in ("put", *official)]
        if not ranked:
            continue
        for m in methods:
            modes = [mode for mode in MODE_METHOD if ((frame["variant"] == m.variant) & (frame["mode"] == mode)).any()]
            rows += [Row(metric, block, m.label + ("" if len(modes) < 2 else f" ({MODE_LABELS[mode]})"),
                         *measured(frame, m.variant, mode, metric), key=(m.variant, mode)) for mode in modes]
    return rows


def reported_rows(reported: pd.DataFrame | None, dataset: str, metric: str, context: bool) -> list[Row]:
    """One metric's rows of the paper (None: no reported block), per mode: the other methods (`context`), then PUT."""
    if reported is None:
        return []
    return [Row(metric, f"reported, {dataset}", METHOD_LABELS[name],
                reported_values(reported, "method", name, metric, dataset))
            for mode, method in MODE_METHOD.items() for name in (*(CONTEXT_METHODS[mode] if context else ()), method)]


REPORTED_NOTE = " Reported block (below the rule, in italics): numbers printed in the paper."


def blocks_sentence(official: Sequence[str], methods: Sequence[MeasuredMethod], paper_rule: str | None,
                    reported: bool = True) -> str:
    """The caption's account of the ranked block's other rows and of the block of PUT's own rule (if any)."""
    released = (" Released rows: the authors' released checkpoints, imported and evaluated under our protocol."
                if official else "")
    others = "".join(f" {m.label} ({m.citation}): {m.how}" for m in methods)
    compare = "to compare with the reported block, not with the ranked one" if reported else "not with the ranked one"
    second = (f" Block ``measured, {paper_rule}'' (not ranked): PUT's own rows "
              f"{RULE_CLAUSES[paper_rule].removeprefix('every row ')}, {compare}." if paper_rule is not None else "")
    return released + others + second

"""What the report says of the evaluated results: every variant's metrics under the evaluation's rule and, for
Table 1's ranked block, with the known pixels pasted back; the seed replicates' spread; and the paired
differences from PUT of three families, each of one rule (docs/statistics.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from put.config import TPAMI_VARIANT, VARIANTS
from put.config.evaluation import RANKED_RULE
from put.config.external import EXTERNAL_PREFIX, ExternalMethod
from put.config.params import OFFICIAL_PREFIX, Params, replicate_label
from put.config.paths import pasted_metrics_file
from put.metrics.files import read_images, read_metrics
from put.metrics.summary import PIXEL_METRICS
from put.report.generations import RELEASES
from put.report.replicates import seed_summary
from put.stats.bootstrap import Bootstrap
from put.stats.differences import paired_differences


@dataclass
class EvaluatedResults:
    """`metrics`: every file's cells (and the pasted rule's where the evaluation's is another); `base`, `base_curves`:
    seed 0's; `replicates`: the spread over seeds; `differences`: the three families' paired differences;
    `external`: the outside methods evaluated, by label."""

    metrics: pd.DataFrame
    curves: pd.DataFrame
    replicates: pd.DataFrame
    differences: pd.DataFrame
    external: dict[str, ExternalMethod]

    @property
    def base(self) -> pd.DataFrame:
        return self.metrics[self.metrics["seed"] == 0]

    @property
    def base_curves(self) -> pd.DataFrame:
        return self.curves[self.curves["seed"] == 0]


def read_results(params: Params, metrics_files: list[Path]) -> EvaluatedResults:
    """The evaluate stage's files of `metrics_files` (and their pasted-rule siblings) read and compared."""
    preset, protocol = params.preset, params.resolved().evaluate
    metrics, curves = read_metrics(metrics_files, preset)
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
    # Three families, one rule each: ablations vs PUT (Table 3, raw), other methods vs PUT (Table 1, pasted),
    # TPAMI vs CVPR (the generations table).
    ablations = {key: frame for key, frame in images.items() if key[0] in VARIANTS and key[0] != TPAMI_VARIANT}
    releases = {key: frame for key, frame in images.items() if key[0] in RELEASES}
    families = [("ablations", ablations), ("releases", releases)]
    if external:
        families.insert(1, ("external methods", pasted_images))
    differences = pd.concat([paired_differences(part, PIXEL_METRICS, Bootstrap.of(protocol), protocol.multiplicity,
                                                name=name) for name, part in families], ignore_index=True)
    return EvaluatedResults(metrics, curves, replicates, differences, external)

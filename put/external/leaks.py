"""How much of the ground truth under the hole another method's results hold: copies counted, a folder refused
past a few percent per group, a group likely made on other masks named (docs/external.md, "Copies of the ground
truth")."""

from __future__ import annotations

from pathlib import Path
from statistics import median

import numpy as np

from put.external.folder import ResultsLeakError, shown

# A result holds the ground truth when LEAK_PIXELS of its hole lie within LEAK_TOLERANCE levels (8-bit rounding)
# on every channel. A hole spanning at most FLAT_SPAN levels is flat: any fill matches it, so it is not counted.
LEAK_TOLERANCE = 2
LEAK_PIXELS = 0.99
FLAT_SPAN = 2 * LEAK_TOLERANCE
# A hole of 10% or more is matched that closely only when nearly flat; a group with more than this share of
# copies is refused (2% of copies move a mean PSNR by at most 0.5 dB).
LEAK_SHARE = 0.02
# A group whose median result holds more than this share of its hole was likely filled for other masks of the
# same images (their known pixels lie in our hole).
OTHER_MASKS_MEDIAN = 0.3

Agreements = dict[str, dict[str, float]]  # mask group -> result file -> hole_agreement


def hole_agreement(result: np.ndarray, truth: np.ndarray, hole: np.ndarray) -> float | None:
    """The share of the hole's pixels of `result` within LEAK_TOLERANCE of `truth` on every channel (H, W, 3 uint8
    each; `hole` H, W bool); None for an empty or flat hole, which is no evidence either way."""
    if not hole.any():
        return None
    inside = truth[hole].astype(np.int16)
    if (inside.max(axis=0) - inside.min(axis=0) <= FLAT_SPAN).all():
        return None
    return float((np.abs(result[hole].astype(np.int16) - inside) <= LEAK_TOLERANCE).all(axis=-1).mean())


def _rule() -> str:
    return f"{LEAK_PIXELS:.0%} of the hole's pixels within {LEAK_TOLERANCE} grey levels"


def leak_notice(folder: Path, agreements: Agreements, counts: dict[str, int]) -> str | None:
    """Refused (ResultsLeakError, one line) when a mask group's copies of the ground truth are more than LEAK_SHARE
    of its results (`counts`: mask group -> its results); otherwise one line naming every copy with its count
    (None: there is none)."""
    leaked = {group: files for group, found in agreements.items()
              if (files := [name for name, share in found.items() if share >= LEAK_PIXELS])}
    for group, files in leaked.items():
        if len(files) > LEAK_SHARE * counts[group]:
            raise ResultsLeakError(
                f"{folder}: {len(files)} of {counts[group]} results of mask group {group} hold the ground truth in "
                f"the hole ({_rule()}), more than the {LEAK_SHARE:.0%} a method that never saw it can match: "
                f"{shown(files)} -- the method saw the pixels it should fill: it read the masks with the wrong "
                "polarity (the export's --hole-value), or it does not blank the hole itself (export its images "
                "with --blank; docs/external.md)")
    if not leaked:
        return None
    groups = "; ".join(f"{group}: {len(files)} of {counts[group]} ({shown(files)})" for group, files in leaked.items())
    return (f"{folder}: {sum(map(len, leaked.values()))} result(s) hold the ground truth in the hole ({_rule()}), "
            f"within the {LEAK_SHARE:.0%} of a mask group allowed: {groups}")


def other_masks_notice(folder: Path, agreements: Agreements) -> str | None:
    """One line naming the mask groups whose median result holds more than OTHER_MASKS_MEDIAN of its hole's pixels
    (None: no group does)."""
    high = {group: median(found.values()) for group, found in agreements.items()
            if found and median(found.values()) > OTHER_MASKS_MEDIAN}
    if not high:
        return None
    groups = ", ".join(f"{group} {share:.0%}" for group, share in high.items())
    return (f"{folder}: the median result of mask group(s) {groups} holds that share of its hole's pixels within "
            f"{LEAK_TOLERANCE} grey levels of the ground truth, more than the {OTHER_MASKS_MEDIAN:.0%} of a fill "
            "that never saw the hole: results made on another mask set of the same images, under the same names? "
            "(docs/external.md)")

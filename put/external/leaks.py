"""Whether another method's results hold the ground truth in the hole (the method saw the pixels it should fill):
each copy counted and named, and a folder refused where a mask group holds more than a few percent of them
(docs/external.md, "Checks on a folder of results")."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from put.external.folder import ResultsLeakError, shown

# A result holds the ground truth in its hole when LEAK_PIXELS of its hole pixels lie within LEAK_TOLERANCE grey
# levels of it on every channel (the tolerance absorbs 8-bit rounding, e.g. of a round trip through [-1, 1]
# floats). A hole whose ground truth spans at most FLAT_SPAN levels on every channel is flat: any fill from its
# surroundings matches it, so it is no evidence and is not counted.
LEAK_TOLERANCE = 2
LEAK_PIXELS = 0.99
FLAT_SPAN = 2 * LEAK_TOLERANCE
# Every hole is at least 10% of the image (put/config/bins.py), so a method that never saw it matches it that
# closely only where it is nearly flat; a mask group with more than this share of copies is refused.
LEAK_SHARE = 0.05


def holds_ground_truth(result: np.ndarray, truth: np.ndarray, hole: np.ndarray) -> bool:
    """Whether LEAK_PIXELS of the hole's pixels of `result` lie within LEAK_TOLERANCE of `truth` (H, W, 3 uint8
    each; `hole` H, W bool), on a hole that is not flat."""
    if not hole.any():
        return False
    inside = truth[hole].astype(np.int16)
    if (inside.max(axis=0) - inside.min(axis=0) <= FLAT_SPAN).all():
        return False
    close = (np.abs(result[hole].astype(np.int16) - inside) <= LEAK_TOLERANCE).all(axis=-1)
    return bool(close.mean() >= LEAK_PIXELS)


def _rule() -> str:
    return f"{LEAK_PIXELS:.0%} of the hole's pixels within {LEAK_TOLERANCE} grey levels"


def leak_notice(folder: Path, leaked: dict[str, list[str]], counts: dict[str, int]) -> str | None:
    """Refused (ResultsLeakError, one line) when a mask group's copies of the ground truth are more than LEAK_SHARE
    of its results; otherwise one line naming every copy with its count (None: there is none). `leaked`: mask
    group -> its results that hold the ground truth; `counts`: mask group -> its results."""
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

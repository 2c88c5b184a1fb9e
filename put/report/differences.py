"""Captions of paired differences (computed by put/stats/differences.py): how many of a family were tested and
marked, under which correction, and why some were not."""

from __future__ import annotations

import pandas as pd

from put.stats.multiplicity import CONTROLS, NAMES


def family_sentence(differences: pd.DataFrame, method: str, level: float, what: str, per: str = "") -> str:
    """The caption's account of a family of differences (rows with `p`, `significant`, `no_interval`), or of
    several of one size, one `per` mode: how many were tested and marked, under which method, and why some were
    not (plain text; the caller escapes it)."""
    counts = (f"{int(differences['p'].notna().sum())} tested; {int(differences['significant'].sum())} marked; it "
              f"controls the {CONTROLS[method]}")
    families = differences["mode"].nunique() if per else 1
    family = (f"its family (one per {per}, {len(differences) // families} differences each; {counts})"
              if families > 1 else f"the family of the {len(differences)} differences ({counts})")
    text = (f"{what}: a mark where the difference survives {NAMES[method]} at {level:.0%} over {family}; p-values "
            "from the same bootstrap (Student's t on its standard error)")
    reasons = sorted({r for r in differences["no_interval"] if isinstance(r, str) and r})
    if reasons:
        text += f"; not tested: {'; '.join(reasons)}"
    return text + "."

"""Captions of paired differences (computed by put/stats/differences.py): how many of a family were tested and
marked, under which correction, why some were not, and which were over fewer pairs (a value not finite)."""

from __future__ import annotations

import pandas as pd

from put.report.latex import reason_latex
from put.stats.multiplicity import CONTROLS, NAMES

SIGNIFICANT = r"$^{\dagger}$"  # a paired difference from the reference that survives the family-wise correction


def significant_cells(family: pd.DataFrame | None, *columns: str) -> set[tuple]:
    """The `columns` of each difference of `family` marked significant (none without a family)."""
    if family is None or not len(family):
        return set()
    hits = family[family["significant"].astype(bool)]  # an empty object column would select columns
    return set(zip(*(hits[c] for c in columns)))


def marks_sentence(family: pd.DataFrame | None, level: float, what: str, per: str = "", more: str = "") -> str:
    """The caption's note on the table's daggers (LaTeX): `family_sentence`, then `more`; "" without a family."""
    if family is None or not len(family):
        return ""
    return " " + SIGNIFICANT + reason_latex(family_sentence(family, family["method"].iloc[0], level, what, per) + more)


def family_sentence(differences: pd.DataFrame, method: str, level: float, what: str, per: str = "") -> str:
    """The caption's account of a family of differences (or of several, one `per` mode): how many were tested and
    marked, under which method, why some were not, and which dropped non-finite pairs (plain text, unescaped)."""
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
    return text + dropped_clause(differences) + "."


def dropped_clause(differences: pd.DataFrame) -> str:
    """How many differences are over fewer pairs than their cell holds (`dropped` > 0: a pair with an infinite or
    missing value on either side is left out of both), the pairs left out and the images those used; "" if
    none."""
    if "dropped" not in differences.columns:  # differences of other statistics (the frontier's): none drops
        return ""
    dropped = differences["dropped"].fillna(0)
    shrunk = differences[dropped > 0]
    if not len(shrunk):
        return ""
    low, high = int(shrunk["n"].min()), int(shrunk["n"].max())
    return (f"; each difference is over the pairs where both values are finite: {len(shrunk)} of them leave out "
            f"{int(dropped.sum())} pairs with an infinite (a perfect fill's PSNR) or missing value, n = "
            f"{low if low == high else f'{low}--{high}'} images")

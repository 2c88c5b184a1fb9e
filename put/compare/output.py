"""`put compare`'s output: a table for the terminal (what each result is and how it differs from the baseline,
the differences with their intervals, marks and n, why some have no interval), CSV and JSON for scripts."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pandas as pd

from put.compare.pairing import differing
from put.compare.results import Result
from put.report.tables import DECIMALS
from put.stats.bootstrap import printed_decimals
from put.stats.multiplicity import CONTROLS, NAMES

MARK = "*"
COLUMNS = ["variant", "reference", "modes", "group", "metric", "mean_reference", "mean", "difference", "lo", "hi",
           "p", "p_adjusted", "significant", "n", "dropped", "units", "no_interval", "unpaired", "family",
           "family_size", "method", "rule"]


def changes(base: Result, other: Result) -> str:
    """What a result changed against the baseline, as its records say (sampling, variant, seed)."""
    found = [f"variant {base.label} vs {other.label}"] if base.label != other.label else []
    a, b = base.info.get("sampling"), other.info.get("sampling")
    if isinstance(a, dict) and isinstance(b, dict):
        found += [f"sampling {text}" for text in differing(a, b)]
    if base.info.get("seed") != other.info.get("seed"):
        found.append(f"seed {base.info.get('seed')} vs {other.info.get('seed')}")
    return "; ".join(found) or "the same variant, seed and sampling (a change elsewhere: model, training, data)"


def _number(value: float, decimals: int, sign: bool = False) -> str:
    return "" if value is None or not math.isfinite(value) else f"{value:{'+' if sign else ''}.{decimals}f}"


def table_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The differences as printed: each number to the digits its interval supports."""
    rows = []
    for row in frame.itertuples():
        half = (row.hi - row.lo) / 2 if math.isfinite(row.lo) else math.nan
        digits = printed_decimals(half) if math.isfinite(half) and half > 0 else DECIMALS[row.metric] + 1
        interval = f"[{_number(row.lo, digits, True)}, {_number(row.hi, digits, True)}]" if math.isfinite(half) \
            else "--"
        rows.append({"result": row.variant, "mode": row.modes, "group": row.group, "metric": row.metric.upper(),
                     "baseline": _number(row.mean_reference, DECIMALS[row.metric]),
                     "result mean": _number(row.mean, DECIMALS[row.metric]),
                     "difference": _number(row.difference, digits, True), "interval": interval,
                     "p adj.": "<0.001" if row.p_adjusted < 0.001 else _number(row.p_adjusted, 3),
                     "mark": MARK if row.significant else "",
                     "n": f"{row.n} images, {row.units} sources" + (f", {row.dropped} not finite" if row.dropped
                                                                     else "")})
    return pd.DataFrame(rows)


def as_table(frame: pd.DataFrame, results: Sequence[Result], level: float, left_out: Sequence[str] = ()) -> str:
    """The comparison for a terminal; `left_out`: lines naming the cells only one side has."""
    base = results[0]
    lines = [f"baseline: {base.name} = {base.where}"]
    lines += [f"result:   {r.name} = {r.where}; against the baseline: {changes(base, r)}" for r in results[1:]]
    method, size = frame["method"].iloc[0], int(frame["family_size"].iloc[0])
    marks = (f"{MARK}: survives {NAMES[method]} at {1 - level:.0%} over the {size} differences tested "
             f"({CONTROLS[method]})" if size else "none has an interval: no mark")
    lines.append(f"result - baseline, paired by test image, mask and sample; {level:.0%} intervals, test images' "
                 f"sources resampled for both at once; {marks}")
    shown = table_rows(frame)
    if len(results) == 2:
        shown = shown.drop(columns="result")
    lines += ["", shown.to_string(index=False)]
    left = frame.drop_duplicates("variant")
    lines += [f"left out: {row.unpaired} rows of {row.reference} and {row.variant} without a counterpart in the "
              "other (samples one drew and the other did not)" for row in left.itertuples() if row.unpaired]
    lines += list(left_out)
    if frame["dropped"].any():
        lines.append("not finite: pairs left out of both sides where either value is infinite (a perfect fill's "
                     "PSNR) or missing; n counts the images of the pairs used")
    reasons = sorted({r for r in frame["no_interval"] if isinstance(r, str) and r})
    lines += [""] + [f"no interval, no mark: {reason}" for reason in reasons] if reasons else []
    return "\n".join(lines)


def as_csv(frame: pd.DataFrame) -> str:
    return frame.reindex(columns=COLUMNS).rename(columns={"variant": "result", "reference": "baseline"}).to_csv(
        index=False)


def as_json(frame: pd.DataFrame, results: Sequence[Result], left_out: Sequence[str] = ()) -> str:
    """The results compared (what each is and changed), the cells only one side has, and the differences, one
    record each."""
    base = results[0]
    records = json.loads(frame.reindex(columns=COLUMNS).rename(
        columns={"variant": "result", "reference": "baseline"}).to_json(orient="records"))
    return json.dumps({"baseline": {"name": base.name, "where": base.where},
                       "results": [{"name": r.name, "where": r.where, "changes": changes(base, r)}
                                   for r in results[1:]],
                       "left_out": list(left_out), "differences": records}, indent=2)

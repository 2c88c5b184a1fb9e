"""Results paired for `put compare`: refused unless they share preset, protocol, masks and test images; then each
against the first, row by row, with the report's paired differences as one family (docs/statistics.md, "Did a
change help?")."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd

from put.compare.results import Result
from put.config.bins import BINS
from put.config.evaluation import MetricProtocol
from put.errors import FileMismatchError, InputError
from put.metrics.per_image import PIXEL_METRICS
from put.stats.bootstrap import Bootstrap
from put.stats.differences import KEYS, mark_family, paired_differences

SAMPLED = "top-K"  # the sampled mode, whatever K each result drew with: `k50` of one is paired with `k10` of another
SAMPLED_MODE = re.compile(r"k\d+")


def pairing_mode(mode: str) -> str:
    return SAMPLED if SAMPLED_MODE.fullmatch(mode) else mode


def differing(a: dict, b: dict) -> list[str]:
    """`key: A's value vs B's` for every key of two records that differs (one absent counts: `not recorded`)."""
    shown = lambda record, key: repr(record[key]) if key in record else "not recorded"  # noqa: E731
    return [f"{key} {shown(a, key)} vs {shown(b, key)}" for key in sorted(set(a) | set(b)) if a.get(key, ...) !=
            b.get(key, ...) or (key in a) != (key in b)]


def _masks_differ(a: Result, b: Result) -> str | None:
    """Why two results' masks differ or cannot be told apart, or None when both name the same."""
    shared = [kind for kind in a.masks if kind in b.masks]
    if not shared:
        return (f"which masks {b.name if a.masks else a.name} was measured on is not recorded (neither in its "
                "evaluation record nor in a dvc.lock beside it): re-run its evaluate stage")
    kind = shared[0]
    return None if a.masks[kind] == b.masks[kind] else f"their masks differ ({a.masks[kind]} vs {b.masks[kind]})"


def _images(result: Result) -> dict[tuple[str, str], pd.DataFrame]:
    """Each (pairing mode, group) cell's test images with their sources."""
    frame = result.images.assign(mode=result.images["mode"].map(pairing_mode))
    return {cell: rows[["image", "source"]].drop_duplicates().sort_values("image").reset_index(drop=True)
            for cell, rows in frame.groupby(["mode", "group"], sort=False)}


def _images_differ(a: Result, b: Result) -> str | None:
    """Why two results' test images differ (in a cell both have), or None."""
    cells_a, cells_b = _images(a), _images(b)
    for cell in (c for c in cells_a if c in cells_b):
        x, y = cells_a[cell], cells_b[cell]
        only = [(name, set(x["image"]) - set(y["image"])) for name, (x, y) in ((a.name, (x, y)), (b.name, (y, x)))]
        for name, images in only:
            if images:
                return (f"their test images differ ({len(images)} of the {'/'.join(cell)} cell only in {name}, e.g. "
                        f"{sorted(images)[0]})")
        sources = x.merge(y, on="image", suffixes=("_a", "_b"))
        moved = sources[sources["source_a"] != sources["source_b"]]
        if len(moved):
            row = moved.iloc[0]
            return (f"their test images' sources differ ({row['image']}: {row['source_a']!r} vs "
                    f"{row['source_b']!r})")
    return None


def check_pairable(results: Sequence[Result]) -> None:
    """Every result against the baseline: the same preset, metric protocol (the whole record), groups, masks and
    test images, else an error naming the first thing that differs."""
    names = [r.name for r in results]
    if len(results) < 2:
        raise InputError(f"two results or more are needed (the first is the baseline), got {len(results)}")
    if len(set(names)) < len(names):
        raise InputError(f"a result is named twice: {' '.join(names)}")
    for result in results:
        repeated = result.images[result.images.duplicated(KEYS, keep=False)]
        if len(repeated):
            first = repeated.iloc[0]
            row = " ".join(str(first[k]) for k in KEYS)
            raise FileMismatchError(f"{result.read_from} ({result.name}): {len(repeated)} per-image rows share "
                                    f"their mode, group, image and sample (e.g. {row}): each row is paired by them, "
                                    "so each must be once")
    base = results[0]
    for other in results[1:]:
        why = None
        for what, key in (("presets", "preset"), ("metric protocols", "protocol"), ("mask groups", "groups")):
            a, b = base.info.get(key), other.info.get(key)
            if a != b:
                both = isinstance(a, dict) and isinstance(b, dict)
                detail = "; ".join(differing(a, b)) if both else f"{a!r} vs {b!r}"
                why = f"their {what} differ ({detail})"
                break
        why = why or _masks_differ(base, other) or _images_differ(base, other)
        if why:
            raise FileMismatchError(f"cannot pair {base.name} and {other.name}: {why}")


def bootstrap_of(result: Result) -> tuple[Bootstrap, str]:
    """The bootstrap and the multiplicity method of a result's stored protocol."""
    try:
        protocol = MetricProtocol.model_validate(result.info["protocol"])
    except ValueError as err:
        raise FileMismatchError(f"{result.where}: its recorded metric protocol does not validate "
                                f"({str(err).splitlines()[0]})") from None
    return Bootstrap.of(protocol), protocol.multiplicity


def compared_rows(result: Result, bins: bool) -> pd.DataFrame:
    """A result's per-image rows as compared: the sampled mode under its pairing name, the fine bins only when
    asked."""
    frame = result.images.assign(mode=result.images["mode"].map(pairing_mode))
    return frame if bins else frame[frame["mode"] != BINS]


def _cells(frame: pd.DataFrame) -> list[tuple[str, str]]:
    return list(dict.fromkeys(zip(frame["mode"], frame["group"])))


def _shown(result: Result, cells: Sequence[tuple[str, str]]) -> str:
    """Cells as `k50 20-40, 40-60; all 10-60`: each mode by the result's own label, with its groups."""
    modes = dict.fromkeys(mode for mode, _ in cells)
    return "; ".join(f"{_mode_label(result, mode)} {', '.join(g for m, g in cells if m == mode)}" for mode in modes)


def check_overlap(results: Sequence[Result], bins: bool = False) -> None:
    """Every result shares a mode and mask group with the baseline (a deterministic method's `all` beside a
    sampled one's `k50` share none), else an error naming what each has."""
    base = results[0]
    mine = set(_cells(compared_rows(base, bins)))
    for other in results[1:]:
        theirs = _cells(compared_rows(other, bins))
        if not mine & set(theirs):
            hint = ("; both have the fine hole-ratio bins, which --bins compares" if not bins and
                    {BINS} <= set(base.images["mode"]) & set(other.images["mode"]) else "")
            raise FileMismatchError(
                f"cannot pair {base.name} and {other.name}: no mode and mask group in common ({base.name} has "
                f"{_shown(base, _cells(compared_rows(base, bins))) or 'none'}; {other.name} has "
                f"{_shown(other, theirs) or 'none'}){hint}")


def cells_left_out(results: Sequence[Result], bins: bool = False) -> list[str]:
    """One line per result whose modes and mask groups are not all the baseline's: the cells compared on one side
    only, so left out of the comparison."""
    base = results[0]
    lines = []
    for other in results[1:]:
        cells = {r.name: _cells(compared_rows(r, bins)) for r in (base, other)}
        for one, two in ((base, other), (other, base)):
            only = [cell for cell in cells[one.name] if cell not in cells[two.name]]
            if only:
                lines.append(f"left out: {_shown(one, only)} of {one.name} (not in {two.name})")
    return lines


def compare(results: Sequence[Result], bins: bool = False, method: str | None = None) -> pd.DataFrame:
    """Each result against the first per mode, group and metric: the paired difference (result - baseline) over
    the pairs with both values finite, its interval, p-value and correction mark (`method`: default the
    protocol's), both means, `n`, `dropped` (not finite), `unpaired` (rows only one has) and `modes`. Cells only
    one has are named by `cells_left_out`; results sharing no cell or difference are refused."""
    check_pairable(results)
    check_overlap(results, bins)
    boot, protocol_method = bootstrap_of(results[0])
    method = method or protocol_method
    frames = {result.name: compared_rows(result, bins) for result in results}
    base = results[0]
    differences = paired_differences({(name, 0): frame for name, frame in frames.items()}, PIXEL_METRICS, boot,
                                     method, reference=base.name)
    if differences.empty:
        raise FileMismatchError(f"cannot pair {base.name} and {' '.join(r.name for r in results[1:])}: no metric "
                                f"({', '.join(PIXEL_METRICS)}) measured in a mode and mask group they share")
    by_name = {r.name: r for r in results}
    unpaired = {}
    for name in differences["variant"].unique():
        cells = frames[base.name][["mode", "group"]].drop_duplicates().merge(
            frames[name][["mode", "group"]].drop_duplicates())
        sides = [frames[n].merge(cells) for n in (base.name, name)]
        unpaired[name] = len(sides[0]) + len(sides[1]) - 2 * len(sides[0][KEYS].merge(sides[1][KEYS], on=KEYS))
    extra = []
    for row in differences.itertuples():
        labels = [_mode_label(by_name[name], row.mode) for name in (base.name, row.variant)]
        extra.append({"modes": labels[0] if labels[0] == labels[1] else f"{labels[0]} vs {labels[1]}",
                      "unpaired": unpaired[row.variant]})
    order = {r.name: i for i, r in enumerate(results)}
    frame = pd.concat([differences, pd.DataFrame(extra)], axis=1).sort_values(
        "variant", key=lambda names: names.map(order), kind="stable").reset_index(drop=True)
    frame = frame.astype(dict.fromkeys(("lo", "hi", "p"), float))  # None where there is no interval
    family = f"{int(frame['p'].notna().sum())} differences from {base.name}"
    return mark_family(frame, method, boot.level).assign(family=family, family_size=int(frame["p"].notna().sum()),
                                                         method=method)


def _mode_label(result: Result, mode: str) -> str:
    """The result's own label of a pairing mode (k50 for the sampled mode of a result drawn at K = 50)."""
    own = sorted({m for m in result.images["mode"] if pairing_mode(m) == mode})
    return "/".join(own) or mode

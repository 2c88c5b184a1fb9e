"""The scale benchmark's file (`put bench scale --out`, put/bench/scale.py): the points it holds, checked before a
fit is drawn through them (a hand-edited file included), and a new run's points merged into an earlier file's
(`--append`): one point per size, a re-measured size replacing the point measured before."""

from __future__ import annotations

import math
from pathlib import Path

from put.errors import FileMismatchError, InputError, MissingFileError
from put.io.files import read_json

BENCHMARK = "scale_cpu"  # the file's `benchmark`
COSTS = ("cpu_seconds", "wall_seconds", "peak_rss_mib")  # what a row measured; the fit divides and takes logs
EXPECTED = "the file `put bench scale` writes"


def read_scale_file(path: Path) -> dict:
    """The benchmark's file: a JSON object of benchmark `scale_cpu` with a list of points."""
    result = read_json(path, EXPECTED)
    if not isinstance(result, dict) or result.get("benchmark") != BENCHMARK or not isinstance(
            result.get("points"), list):
        found = result.get("benchmark") if isinstance(result, dict) else type(result).__name__
        raise FileMismatchError(f"{path}: benchmark {found!r}, not {BENCHMARK!r} with a list of points; expected "
                                f"{EXPECTED}")
    return result


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def is_measurement(value: object) -> bool:
    """A measured cost: a finite number >= 0 (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def check_points(points: list, name: str) -> None:
    """Every point a size of its own (no two of the same training images: a line through two equal sizes divides
    by zero) with positive image and item counts and finite costs >= 0; else a one-line error naming the value."""
    seen: dict[int, int] = {}
    for i, point in enumerate(points):
        where = f"{name}: points[{i}]"
        if not isinstance(point, dict) or not isinstance(point.get("stages"), dict) or not isinstance(
                point.get("bookkeeping", {}), dict):
            raise InputError(f"{where}: expected an object with `stages` (and `bookkeeping`) rows")
        for key in ("train_images", "test_images"):
            if not _whole(point.get(key)):
                raise InputError(f"{where}.{key} = {point.get(key)!r}: expected a whole number of images >= 1")
        train = point["train_images"]
        if train in seen:
            raise InputError(f"{name}: points[{seen[train]}] and points[{i}] are both of {train:,} training images; "
                             "a fit through two equal sizes divides by zero: keep one (`put bench scale --append` "
                             "replaces a re-measured size)")
        seen[train] = i
        rows = {**{("stages", k): r for k, r in point["stages"].items()},
                **{("bookkeeping", k): r for k, r in point.get("bookkeeping", {}).items()}}
        for (group, key), row in rows.items():
            for cost in COSTS + (("items",) if group == "stages" else ()):
                value = row.get(cost) if isinstance(row, dict) else None
                if not (_whole(value) if cost == "items" else is_measurement(value)):
                    expected = "a whole number >= 1" if cost == "items" else "a finite cost >= 0 (as measured)"
                    raise InputError(f"{where}.{group}.{key}.{cost} = {value!r}: expected {expected}")
            serves = row.get("serves") or "split"
            if group == "bookkeeping" and serves not in point["stages"]:
                raise InputError(f"{where}.bookkeeping.{key}.serves = {serves!r}: no such stage row in the point; "
                                 f"expected one of {sorted(point['stages'])}")


def check_earlier(result: dict, path: Path, preset: str, image_size: int) -> None:
    """An earlier file a run appends to: the same preset and image size as this run, and valid points."""
    if result.get("preset") != preset:
        raise FileMismatchError(f"{path}: measured with preset {result.get('preset')!r}, not {preset!r}; append "
                                "to a file of the same preset, or write another --out")
    for i, point in enumerate(result["points"]):
        size = point.get("image_size") if isinstance(point, dict) else None
        if size != image_size:
            raise FileMismatchError(f"{path}: points[{i}] has image size {size!r}, this run's preset {preset} "
                                    f"{image_size}; append to a file of the same image size, or write another --out")
    check_points(result["points"], str(path))


def earlier_file(out: Path | None, preset: str, image_size: int) -> dict:
    """The file `--append` adds to: it must exist (a mistyped path would start a file of one size unnoticed)."""
    if out is None:
        raise InputError("--append: give the file to append to (--out)")
    if not Path(out).is_file():
        raise MissingFileError(f"--append: {out}: no such file to append to; without --append a new one is written")
    result = read_scale_file(Path(out))
    check_earlier(result, Path(out), preset, image_size)
    return result


def check_sizes(sizes: list[int], test_sizes: list[int]) -> None:
    """One value of --test-images per --sizes, and each size once."""
    if len(test_sizes) != len(sizes):
        raise InputError(f"--test-images: {len(test_sizes)} values for {len(sizes)} sizes; give one per --sizes")
    twice = sorted({n for n in sizes if sizes.count(n) > 1})
    if twice:
        raise InputError(f"--sizes: {twice[0]} given twice; each size is measured once (one point per size)")


def merged(points: list[dict], point: dict) -> tuple[list[dict], dict | None]:
    """`points` with `point` in place of the one of its training images (if any; returned second), by size."""
    earlier = next((p for p in points if p["train_images"] == point["train_images"]), None)
    kept = [p for p in points if p is not earlier] + [point]
    return sorted(kept, key=lambda p: (p["train_images"], p["test_images"])), earlier

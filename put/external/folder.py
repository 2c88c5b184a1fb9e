"""A folder of completed images from another codebase, checked against the files the frozen masks call for:
every one present, a PNG, readable and of the image size, or an error naming the first wrong ones and how many;
and refused when most results of a mask group hold the ground truth in the hole (the method saw it: docs/external.md,
"Checks on a folder of results")."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from put.data.images import ImageReadError, image_format, read_rgb
from put.errors import FileMismatchError, MissingFileError

SHOWN = 5  # files named in an error; the rest are counted
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"  # a PNG's first eight bytes
# A result holds the ground truth in its hole when LEAK_PIXELS of its hole pixels lie within LEAK_TOLERANCE grey
# levels of it on every channel (the tolerance absorbs 8-bit rounding, e.g. of a round trip through [-1, 1] floats);
# an inpainter that never saw the hole matches that closely only on a flat hole, so a group is refused when more
# than LEAK_IMAGES of its results do.
LEAK_TOLERANCE = 2
LEAK_PIXELS = 0.99
LEAK_IMAGES = 0.5


class ResultsMissingError(MissingFileError):
    """An external method's folder lacks results the masks expect."""


class ResultsMismatchError(FileMismatchError):
    """An external method's results are there but not PNGs, unreadable or of the wrong size."""


class ResultsLeakError(FileMismatchError):
    """An external method's results hold the ground truth in the hole: the method saw the pixels it should fill."""


def _listing(problems: list[str], total: int, what: str) -> str:
    shown = ", ".join(problems[:SHOWN]) + (", ..." if len(problems) > SHOWN else "")
    return f"{len(problems)} of {total} expected result file(s) {what}: {shown}"


def check_present(folder: Path, files: Iterable[str]) -> None:
    """Every expected file exists (a stat each, before any image is read)."""
    files = list(dict.fromkeys(files))
    if not Path(folder).is_dir():
        raise ResultsMissingError(f"{folder}: no such folder of results")
    missing = [f for f in files if not (Path(folder) / f).is_file()]
    if missing:
        raise ResultsMissingError(f"{folder}: {_listing(missing, len(files), 'missing')} (names: docs/external.md)")


def _content(path: Path) -> str:
    """What a file that is not a PNG holds, as PIL names its format."""
    found = image_format(path)
    if found is None:
        return "unreadable: not an image PIL can identify"
    return f"its content is {found}" + (" (lossy: write the results as PNG)" if found == "JPEG" else "")


def read_result(path: Path, size: tuple[int, int]) -> np.ndarray | str:
    """(H, W, 3) uint8, or why the file cannot be used (a result that is not a PNG, whatever its name, is named:
    a JPEG's losses would be scored as the method's)."""
    with open(path, "rb") as file:
        if file.read(len(PNG_SIGNATURE)) != PNG_SIGNATURE:
            return f"not a PNG: {_content(path)}"
    try:
        rgb = read_rgb(path)
    except ImageReadError as err:
        return f"unreadable ({err})"
    return rgb if rgb.shape[:2] == tuple(size) else f"{rgb.shape[1]}x{rgb.shape[0]}, expected {size[1]}x{size[0]}"


def holds_ground_truth(result: np.ndarray, truth: np.ndarray, hole: np.ndarray) -> bool:
    """Whether LEAK_PIXELS of the hole's pixels of `result` lie within LEAK_TOLERANCE of `truth` (H, W, 3 uint8
    each; `hole` H, W bool)."""
    if not hole.any():
        return False
    close = (np.abs(result.astype(np.int16) - truth.astype(np.int16)) <= LEAK_TOLERANCE).all(axis=-1)
    return bool(close[hole].mean() >= LEAK_PIXELS)


def raise_leaks(folder: Path, leaked: dict[str, list[str]], counts: dict[str, int]) -> None:
    """One line for the first mask group most of whose results (more than LEAK_IMAGES) hold the ground truth."""
    for group, files in leaked.items():
        if len(files) > LEAK_IMAGES * counts[group]:
            raise ResultsLeakError(
                f"{folder}: {len(files)} of {counts[group]} results of mask group {group} hold the ground truth in "
                f"the hole ({LEAK_PIXELS:.0%} of its pixels within {LEAK_TOLERANCE} grey levels; e.g. {files[0]}): "
                "the method saw the pixels it should fill -- it read the masks with the wrong polarity (the export's "
                "--hole-value), or it does not blank the hole itself (export its images with --blank; "
                "docs/external.md)")


def raise_wrong(folder: Path, wrong: dict[str, str], total: int) -> None:
    if wrong:
        described = [f"{name} ({why})" for name, why in wrong.items()]
        raise ResultsMismatchError(f"{folder}: {_listing(described, total, 'not usable')}")

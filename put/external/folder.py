"""A folder of another codebase's completed images, checked against the frozen masks: every file present, a
readable PNG of the image size in an allowed pixel format, or an error naming the first wrong ones
(docs/external.md, "Checks on a folder of results")."""

from __future__ import annotations

import errno
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from put.data.images import ImageReadError, image_format, open_image
from put.errors import FileMismatchError, MissingFileError, PathError
from put.external.modes import IHDR, animation_frames, as_rgb, png_header

SHOWN = 5  # files named in an error; the rest are counted


class ResultsMissingError(MissingFileError):
    """An external method's folder lacks results the masks expect."""


class ResultsMismatchError(FileMismatchError):
    """An external method's results are there but not PNGs, unreadable, of the wrong size or pixel format."""


class ResultsLeakError(FileMismatchError):
    """An external method's results hold the ground truth in the hole: the method saw the pixels it should fill
    (put/external/leaks.py)."""


def shown(names: list[str]) -> str:
    """The first SHOWN names, and "..." when there are more."""
    return ", ".join(names[:SHOWN]) + (", ..." if len(names) > SHOWN else "")


def _listing(problems: list[str], total: int, what: str) -> str:
    return f"{len(problems)} of {total} expected result file(s) {what}: {shown(problems)}"


def _others(folder: Path, expected: set[str]) -> list[str]:
    """The files under `folder` whose names the masks do not call for, sorted."""
    return sorted(name for path in folder.rglob("*") if path.is_file()
                  and (name := path.relative_to(folder).as_posix()) not in expected)


def check_apart(folder: Path, out: Path) -> None:
    """The samples folder the stage writes (and replaces whole) is neither the results folder, nor inside it, nor
    around it: replacing it would delete the results."""
    folder, out = Path(folder).resolve(), Path(out).resolve()
    where = ("is" if out == folder else "lies inside" if out.is_relative_to(folder) else
             "holds" if folder.is_relative_to(out) else None)
    if where is not None:
        raise PathError(errno.EINVAL, f"{where} the entry's results folder {folder}, and the stage replaces its "
                        "output whole: give an --out apart from it", str(out))


def check_present(folder: Path, files: Iterable[str]) -> None:
    """Every expected file exists (a stat each, before any image is read); when some do not, the error also names
    the files of other names the folder holds: results named for another mask set, preset or format."""
    folder, files = Path(folder), list(dict.fromkeys(files))
    if not folder.is_dir():
        raise ResultsMissingError(f"{folder}: no such folder of results")
    missing = [f for f in files if not (folder / f).is_file()]
    if not missing:
        return
    others = _others(folder, set(files))
    if len(missing) == len(files) and not others:
        raise ResultsMissingError(f"{folder}: empty: none of the {len(files)} expected result files (e.g. "
                                  f"{files[0]}; names: docs/external.md)")
    instead = (f"; it holds {len(others)} file(s) of other names instead ({shown(others)}): results named for "
               "another mask set, preset or format?" if others else "")
    raise ResultsMissingError(f"{folder}: {_listing(missing, len(files), 'missing')}{instead} (names: "
                              "docs/external.md)")


def _content(path: Path) -> str:
    """What a file that is not a PNG holds, as PIL names its format."""
    found = image_format(path)
    if found is None:
        return "unreadable: not an image PIL can identify"
    return f"its content is {found}" + (" (lossy: write the results as PNG)" if found == "JPEG" else "")


def read_result(path: Path, size: tuple[int, int], grey_truth: bool) -> tuple[np.ndarray, str | None] | str:
    """(H, W, 3) uint8 and the lossless conversion it took (None: none), or why the file cannot be used: not a PNG
    (a JPEG's losses would count as the method's), another size, corrupt, or a pixel format `grey_truth` rules out."""
    with open(path, "rb") as file:
        header = png_header(file.read(IHDR.stop))
    if header is None:
        return f"not a PNG: {_content(path)}"
    if (header.height, header.width) != tuple(size):
        return f"{header.width}x{header.height}, expected {size[1]}x{size[0]}"
    try:
        img = open_image(path)
    except ImageReadError as err:
        return f"unreadable: {str(err).removeprefix(f'{path}: ')}"
    if frames := animation_frames(path):
        return f"an animated PNG of {frames} frames: write one image per result"
    return as_rgb(img, header, grey_truth)


def raise_wrong(folder: Path, wrong: dict[str, str], total: int) -> None:
    if wrong:
        described = [f"{name} ({why})" for name, why in wrong.items()]
        raise ResultsMismatchError(f"{folder}: {_listing(described, total, 'not usable')}")


def conversion_notice(folder: Path, converted: dict[str, list[str]], total: int) -> str | None:
    """One line naming the results converted losslessly to 8-bit RGB, by their format (None: none was)."""
    if not converted:
        return None
    kinds = "; ".join(f"{len(files)} {kind} (e.g. {files[0]})" for kind, files in converted.items())
    count = sum(len(files) for files in converted.values())
    return f"{folder}: {count} of {total} result(s) converted losslessly to 8-bit RGB: {kinds}"

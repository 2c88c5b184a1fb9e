"""A folder of completed images from another codebase, checked against the files the frozen masks call for:
every one present, readable and of the image size, or an error naming the first wrong ones and how many
(docs/external.md)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from put.data.images import ImageReadError, read_rgb
from put.errors import FileMismatchError, MissingFileError

SHOWN = 5  # files named in an error; the rest are counted


class ResultsMissingError(MissingFileError):
    """An external method's folder lacks results the masks expect."""


class ResultsMismatchError(FileMismatchError):
    """An external method's results are there but unreadable or of the wrong size."""


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


def read_result(path: Path, size: tuple[int, int]) -> np.ndarray | str:
    """(H, W, 3) uint8, or why the file cannot be used."""
    try:
        rgb = read_rgb(path)
    except ImageReadError as err:
        return f"unreadable ({err})"
    return rgb if rgb.shape[:2] == tuple(size) else f"{rgb.shape[1]}x{rgb.shape[0]}, expected {size[1]}x{size[0]}"


def raise_wrong(folder: Path, wrong: dict[str, str], total: int) -> None:
    if wrong:
        described = [f"{name} ({why})" for name, why in wrong.items()]
        raise ResultsMismatchError(f"{folder}: {_listing(described, total, 'not usable')}")

"""The folder dataset: a user's own images, any layout (docs/own-images.md).

Images that do not decode, are under the working size or repeat another's bytes are named and left out. The rest
is split by the user's lists, or by source with a seeded draw, so one photograph never straddles train and test.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from put.config.presets import DataConfig
from put.data.groups import read_groups
from put.data.images import check_image
from put.data.sources import seeded_subset
from put.errors import InputError, MissingFileError

FOLDER_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff"}
# FID needs two images per hole-ratio bin, and every test image gets a mask in every bin; the bootstrap resamples
# sources, so the test split needs two of those too.
MIN_TEST_IMAGES = 2
MIN_TEST_SOURCES = 2
MIN_TRAIN_IMAGES = 1


class FolderError(InputError):
    pass


@dataclass
class Screened:
    """The images kept (sorted), each one's split row (checksum, size), and each one left out with its reason."""

    kept: list[Path]
    rows: dict[Path, dict]
    excluded: list[dict] = field(default_factory=list)

    def counts(self, found: int) -> dict:
        """found, usable and, per kind of reason, how many were left out: the split report's summary."""
        kinds: dict[str, int] = {}
        for entry in self.excluded:
            kinds[entry["kind"]] = kinds.get(entry["kind"], 0) + 1
        return {"found": found, "usable": len(self.kept), "excluded": kinds}


def _read_list(path: Path, root: Path, key: str) -> list[Path]:
    """The images a text file lists (one path per line, as under root; blank lines and # comments skipped)."""
    if not path.is_file():
        raise MissingFileError(f"data.{key}: {path}: file not found; expected a text file of image paths, one a line, "
                               f"as under {root}")
    names = [line.strip() for line in path.read_text().splitlines()]
    return [root / name for name in names if name and not name.startswith("#")]


def folder_images(root: Path, files: str | None = None) -> list[Path]:
    """Every image file under root (by suffix, any case; hidden files and folders skipped), or the ones `files`
    lists; sorted."""
    if files is not None:
        return sorted(set(_read_list(Path(files), root, "files")))
    return sorted(p for p in root.rglob("*") if p.suffix.lower() in FOLDER_SUFFIXES and p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))


def screen(paths: list[Path], root: Path, min_side: int, workers: int | None = None) -> Screened:
    """Decode every image once; leave out the unreadable or truncated, those whose shorter side is under
    `min_side` (they would have to be enlarged), and any whose bytes repeat an earlier one's (in sorted order)."""
    paths = sorted(paths)
    with ThreadPoolExecutor(workers or min(8, os.cpu_count() or 1)) as pool:  # decoding releases the GIL
        results = list(pool.map(check_image, paths))
    screened = Screened([], {})
    first: dict[str, Path] = {}
    for path, row in zip(paths, results):
        name = _name(path, root)
        if "reason" in row:
            kind, reason = "unreadable", row["reason"]
        elif min(row["width"], row["height"]) < min_side:
            kind, reason = "too small", (f"{row['width']}x{row['height']}, shorter side under the working size "
                                         f"{min_side}")
        elif row["sha256"] in first:
            kind, reason = "duplicate", f"the same bytes as {_name(first[row['sha256']], root)}"
        else:
            first[row["sha256"]] = path
            screened.kept.append(path)
            screened.rows[path] = row
            continue
        screened.excluded.append({"path": name, "kind": kind, "reason": reason})
    return screened


def _name(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def folder_sources(root: Path, images: list[Path], data: DataConfig) -> dict[Path, str]:
    """The source of every image: a `data.sources` entry, else its sub-folder under root (`folder_sources:
    folder`; an image directly under root is its own), else the image itself."""
    named = read_groups(Path(data.sources), root, images) if data.sources is not None else {}
    sources = {}
    for image in images:
        parent = Path(_name(image, root)).parent
        by_folder = data.folder_sources == "folder" and parent != Path(".")
        sources[image] = named.get(image, parent.as_posix() if by_folder else _name(image, root))
    return sources


def folder_name(data: DataConfig) -> str:
    """The folder dataset's name in reports: data.name, else its root folder's name."""
    return data.name or Path(data.root or "folder").resolve().name


def test_size(usable: int, data: DataConfig) -> int:
    """How many test images the seeded split draws: test_fraction of the usable images (at least the minimum the
    evaluation needs, at least eval_count)."""
    return max(math.ceil(data.test_fraction * usable), MIN_TEST_IMAGES, data.eval_count or 0)


def _refuse_if_short(where: str, train: int, test: int, test_sources: int, needed_test: int, summary: dict) -> None:
    if test < needed_test or test_sources < MIN_TEST_SOURCES or train < MIN_TRAIN_IMAGES:
        left = ", ".join(f"{n} {kind}" for kind, n in summary["excluded"].items()) or "none"
        raise FolderError(
            f"{where}: too few usable images ({summary['found']} found, left out: {left}): {train} train, {test} "
            f"test from {test_sources} source(s); the split "
            f"needs at least {MIN_TRAIN_IMAGES} train and {needed_test} test images from {MIN_TEST_SOURCES} "
            f"sources (FID per hole-ratio bin and the bootstrap over sources), so at least "
            f"{MIN_TRAIN_IMAGES + needed_test} usable images in {MIN_TEST_SOURCES + 1} sources")


def seeded_split(images: list[Path], sources: dict[Path, str], count: int, seed: int) -> dict[str, list[Path]]:
    """Whole sources, in a seeded order of their sorted names, go to test until it holds `count` images from at
    least MIN_TEST_SOURCES sources; the rest is train."""
    names = sorted({sources[p] for p in images})
    order = np.random.default_rng(seed).permutation(len(names))
    test_sources: set[str] = set()
    members = {name: sum(1 for p in images if sources[p] == name) for name in names}
    taken = 0
    for index in order:
        if taken >= count and len(test_sources) >= MIN_TEST_SOURCES:
            break
        test_sources.add(names[index])
        taken += members[names[index]]
    return {"train": [p for p in images if sources[p] not in test_sources],
            "test": [p for p in images if sources[p] in test_sources]}


def _distinct_stems(test: list[Path], root: Path, screened: Screened) -> list[Path]:
    """Test images whose file stem an earlier test image has are left out: masks and samples are named by it."""
    seen: dict[str, Path] = {}
    kept = []
    for path in test:
        if path.stem in seen:
            screened.excluded.append({"path": _name(path, root), "kind": "same test name",
                                      "reason": f"a test image of the same file stem, {_name(seen[path.stem], root)}, "
                                                "is kept (masks and samples are named by the stem)"})
            screened.kept.remove(path)
            continue
        seen[path.stem] = path
        kept.append(path)
    return kept


@dataclass
class FolderSplit:
    files: dict[str, list[Path]]
    sources: dict[Path, str]
    screened: Screened
    summary: dict


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def split_folder(root: Path, data: DataConfig, min_side: int, workers: int | None = None,
                 note: Callable[[str], None] = _stderr) -> FolderSplit:
    """The folder's train/test lists (its own lists when given, else the seeded split by source), after screening;
    the summary counts what was found, kept and left out (per reason) in each. Each image left out is named in
    one line to `note` (stderr), before a folder too small for the split is refused."""
    root = Path(root)
    if not root.is_dir():
        raise MissingFileError(f"data.root: {root}: folder not found; expected a folder of images (PNG, JPEG, WebP, "
                               "TIFF, in any sub-folders)")
    if (data.train_list is None) != (data.test_list is None):
        given = "train_list" if data.train_list is not None else "test_list"
        raise FolderError(f"data.{given} is set without its pair: give both data.train_list and data.test_list, "
                          "or neither for the seeded split by source")
    if data.train_list is not None:
        listed = {"train": sorted(set(_read_list(Path(data.train_list), root, "train_list"))),
                  "test": sorted(set(_read_list(Path(data.test_list), root, "test_list")))}
        both = set(listed["train"]) & set(listed["test"])
        if both:
            raise FolderError(f"data.train_list and data.test_list both list {len(both)} image(s), e.g. "
                              f"{_name(sorted(both)[0], root)}; an image is on one side only")
        found = listed["train"] + listed["test"]
    else:
        found = folder_images(root, data.files)
    if not found:
        raise FolderError(f"data.root: {root}: no images found (suffixes {', '.join(sorted(FOLDER_SUFFIXES))}, "
                          "any case, in any sub-folder)")
    screened = screen(found, root, min_side, workers)
    sources = folder_sources(root, screened.kept, data)
    if data.train_list is not None:
        kept = set(screened.kept)
        files = {split: [p for p in paths if p in kept] for split, paths in listed.items()}
    else:
        files = seeded_split(screened.kept, sources, test_size(len(screened.kept), data), data.seed)
    files["test"] = _distinct_stems(files["test"], root, screened)
    if data.eval_count is not None and len(files["test"]) > data.eval_count:  # whole sources overshoot it
        files["test"] = seeded_subset(files["test"], data.eval_count, data.seed)
    for entry in screened.excluded:
        note(f"left out {entry['path']}: {entry['kind']}: {entry['reason']}")
    summary = screened.counts(len(found))
    needed = max(MIN_TEST_IMAGES, data.eval_count or 0)
    _refuse_if_short(str(root), len(files["train"]), len(files["test"]),
                     len({sources[p] for p in files["test"]}), needed, summary)
    # `unused`: images of the test sources that eval_count left out (on neither side)
    summary.update(train=len(files["train"]), test=len(files["test"]),
                   unused=len(screened.kept) - len(files["train"]) - len(files["test"]),
                   sources={split: len({sources[p] for p in paths}) for split, paths in files.items()})
    return FolderSplit(files, {p: sources[p] for p in screened.kept}, screened, summary)

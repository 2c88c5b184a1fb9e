"""Train/test file lists of the datasets in their published folder layouts (DESIGN.md section 3).

Every split is a sorted list, and any random choice (ImageNet's evaluation images, or an explicit
eval_count) is a seeded numpy Generator draw from that sorted list, so a split is a pure function
of (dataset, files on disk, seed, eval_count).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Callable

import numpy as np

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}

FFHQ_TEST_START = 69000
FFHQ_SIZE = 70000
IMAGENET_EVAL_COUNT = 1000

# The authors' "natural scene" subset of Places365 (category paths as in categories_places365.txt).
PLACES2_NATURE_CATEGORIES = (
    "/m/mountain",
    "/m/mountain_path",
    "/m/mountain_snowy",
    "/b/butte",
    "/c/canyon",
    "/f/field/cultivated",
    "/t/tundra",
    "/v/valley",
)

PLACES2_LAYOUT = (
    "Places365-standard layout: ROOT/data_256/<letter>/<category>[/<sub>]/*.jpg (train), "
    "ROOT/val_256/*.jpg (test), optionally with the lists ROOT/places365_train_standard.txt, "
    "ROOT/places365_val.txt and ROOT/categories_places365.txt"
)
LAYOUTS = {
    "ffhq": "FFHQ layout: ROOT/**/<NNNNN>.png or .jpg, stems 00000-69999 (69000-69999 = test)",
    "places2": PLACES2_LAYOUT,
    "places2_nature": PLACES2_LAYOUT + " (places365_val.txt and categories_places365.txt required)",
    "imagenet": "ImageNet layout: ROOT/train/<wnid>/*.JPEG, ROOT/val/*.JPEG or ROOT/val/<wnid>/*.JPEG",
    "demo": "demo layout: ROOT/train/*.png, ROOT/test/*.png (written by put.data.demo.build_demo)",
}


class DatasetLayoutError(FileNotFoundError):
    pass


def _require(path: Path, dataset: str, is_file: bool = False) -> Path:
    if not (path.is_file() if is_file else path.is_dir()):
        kind = "file" if is_file else "folder"
        raise DatasetLayoutError(f"{path}: missing {kind}; expected the {LAYOUTS[dataset]}")
    return path


def _images_under(folder: Path, recursive: bool = True) -> list[Path]:
    """Image files (by suffix, any case), hidden files skipped, sorted."""
    found = folder.rglob("*") if recursive else folder.glob("*")
    return sorted(p for p in found if p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")
                  and p.is_file())


def _nonempty(paths: list[Path], where: Path, dataset: str) -> list[Path]:
    if not paths:
        raise DatasetLayoutError(f"{where}: no images found; expected the {LAYOUTS[dataset]}")
    return paths


def seeded_subset(paths: list[Path], count: int, seed: int, where: str = "") -> list[Path]:
    """`count` files drawn without replacement from the sorted list with numpy Generator(seed)."""
    paths = sorted(paths)
    if count > len(paths):
        raise ValueError(f"eval_count {count} exceeds the {len(paths)} test images found{where}; "
                         "pass a smaller eval_count")
    chosen = np.random.default_rng(seed).choice(len(paths), size=count, replace=False)
    return sorted(paths[i] for i in chosen)


def ffhq(root: Path) -> dict[str, list[Path]]:
    by_stem: dict[int, Path] = {}
    skipped = []
    for path in _images_under(root):
        if not path.stem.isdigit():
            skipped.append(path)
            continue
        index = int(path.stem)
        if index in by_stem:
            raise DatasetLayoutError(f"{root}: image number {index} appears twice ({by_stem[index]} and "
                                     f"{path}); point ROOT at one resolution of FFHQ")
        by_stem[index] = path
    if skipped:
        warnings.warn(f"{root}: {len(skipped)} image(s) without a numeric name ignored, e.g. {skipped[0]}",
                      stacklevel=3)
    _nonempty(list(by_stem.values()), root, "ffhq")
    if len(by_stem) < FFHQ_SIZE:
        warnings.warn(f"{root}: found {len(by_stem)} FFHQ images, expected {FFHQ_SIZE}; still splitting "
                      f"at {FFHQ_TEST_START} (numbers >= {FFHQ_TEST_START} are test)", stacklevel=3)
    order = sorted(by_stem)
    return {"train": [by_stem[i] for i in order if i < FFHQ_TEST_START],
            "test": [by_stem[i] for i in order if i >= FFHQ_TEST_START]}


def _read_list(path: Path) -> list[tuple[str, str]]:
    """Lines 'name label' of a Places365 list file."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            parts = line.split()
            if len(parts) != 2:
                raise ValueError(f"{path}:{number}: expected '<path> <label>', got {line!r}")
            rows.append((parts[0], parts[1]))
    return rows


def _places_categories(root: Path, dataset: str) -> dict[str, str]:
    """Label (as written in the lists) -> category path like '/f/field/cultivated'."""
    rows = _read_list(_require(root / "categories_places365.txt", dataset, is_file=True))
    return {label: name for name, label in rows}


def _places_train_list(root: Path, data: Path, categories: tuple[str, ...] | None) -> list[Path]:
    rows = _read_list(root / "places365_train_standard.txt")
    names = [name for name, _ in rows]
    if categories is not None:
        # '/f/field/cultivated/00000001.jpg' belongs to '/f/field/cultivated'; the name's folder
        # must equal the category exactly ('/m/mountain_path' is not inside '/m/mountain').
        wanted = set(categories)
        names = [n for n in names if "/" + n.strip("/").rsplit("/", 1)[0] in wanted]
    return sorted(data / n.lstrip("/") for n in names)


def places2(root: Path, nature: bool = False) -> dict[str, list[Path]]:
    dataset = "places2_nature" if nature else "places2"
    data = _require(root / "data_256", dataset)
    val = _require(root / "val_256", dataset)
    categories = PLACES2_NATURE_CATEGORIES if nature else None

    if (root / "places365_train_standard.txt").is_file():
        train = _places_train_list(root, data, categories)
    elif nature:
        train = sorted(p for c in categories
                       for p in _images_under(_require(data / c.lstrip("/"), dataset), recursive=False))
    else:
        train = _images_under(data)

    val_list = root / "places365_val.txt"
    if nature:
        label_to_category = _places_categories(root, dataset)
        rows = _read_list(_require(val_list, dataset, is_file=True))
        test = sorted(val / name for name, label in rows if label_to_category.get(label) in categories)
    elif val_list.is_file():
        test = sorted(val / name for name, _ in _read_list(val_list))
    else:
        test = _images_under(val, recursive=False)
    return {"train": _nonempty(train, data, dataset), "test": _nonempty(test, val, dataset)}


def imagenet(root: Path) -> dict[str, list[Path]]:
    train_dir = _require(root / "train", "imagenet")
    val_dir = _require(root / "val", "imagenet")
    # Train images live one level down (one folder per class); val may be flat or per class.
    train = sorted(p for d in sorted(train_dir.iterdir()) if d.is_dir() for p in _images_under(d, recursive=False))
    return {"train": _nonempty(train, train_dir, "imagenet"),
            "test": _nonempty(_images_under(val_dir), val_dir, "imagenet")}


def demo(root: Path) -> dict[str, list[Path]]:
    splits = {}
    for split in ("train", "test"):
        folder = _require(root / split, "demo")
        splits[split] = _nonempty(sorted(p for p in folder.glob("*.png") if not p.name.startswith(".")),
                                  folder, "demo")
    return splits


LISTERS: dict[str, Callable[[Path], dict[str, list[Path]]]] = {
    "ffhq": ffhq,
    "places2": places2,
    "places2_nature": lambda root: places2(root, nature=True),
    "imagenet": imagenet,
    "demo": demo,
}


def list_dataset(dataset: str, root: Path, seed: int = 0, eval_count: int | None = None) -> dict[str, list[Path]]:
    """{'train': [...], 'test': [...]} for a dataset in its published layout under root.

    eval_count (ImageNet default 1000, others all) keeps that many test images, drawn with seed.
    """
    if dataset not in LISTERS:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {', '.join(LISTERS)}")
    root = Path(root)
    if not root.is_dir():
        raise DatasetLayoutError(f"{root}: dataset folder not found; expected the {LAYOUTS[dataset]}")
    splits = LISTERS[dataset](root)
    if eval_count is None and dataset == "imagenet":
        eval_count = IMAGENET_EVAL_COUNT
    if eval_count is not None:
        if eval_count < 1:
            raise ValueError(f"eval_count must be positive, got {eval_count}")
        splits["test"] = seeded_subset(splits["test"], eval_count, seed, where=f" under {root}")
    return splits

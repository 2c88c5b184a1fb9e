"""Train/test file lists of the datasets in their published folder layouts (docs/fidelity.md, "Datasets and
splits"). A split is a sorted list, any random choice a seeded draw from it: a pure function of (dataset, files,
seed, eval_count).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from put.errors import FileMismatchError, InputError, MissingFileError

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

# The two Places365 training lists and the folders their archives extract to: data_large (shorter side 512,
# what the released code trained on) or data_256.
PLACES2_TRAIN_LISTS = {"challenge": "places365_train_challenge.txt", "standard": "places365_train_standard.txt"}
PLACES2_FOLDERS = {"large": ("data_large", "val_large"), "256": ("data_256", "val_256")}
PLACES2_STANDARD_PER_CATEGORY = 5000  # Places365-standard has at most 5,000 training images per category

PLACES2_LAYOUT = (
    "Places365 layout: ROOT/data_large (or data_256)/<letter>/<category>[/<sub>]/*.jpg (train), ROOT/val_large "
    "(or val_256)/*.jpg (test), optionally with the lists ROOT/places365_train_challenge.txt or "
    "ROOT/places365_train_standard.txt, ROOT/places365_val.txt and ROOT/categories_places365.txt"
)
LAYOUTS = {
    "ffhq": "FFHQ layout: ROOT/**/<NNNNN>.png or .jpg, stems 00000-69999 (69000-69999 = test)",
    "places2": PLACES2_LAYOUT,
    "places2_nature": PLACES2_LAYOUT + " (places365_val.txt and categories_places365.txt required)",
    "imagenet": "ImageNet layout: ROOT/train/<wnid>/*.JPEG, ROOT/val/*.JPEG or ROOT/val/<wnid>/*.JPEG",
    "demo": "demo layout: ROOT/train/*.png, ROOT/test/*.png (written by put.data.demo.build_demo)",
}


class DatasetLayoutError(MissingFileError):
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
        raise InputError(f"eval_count {count} exceeds the {len(paths)} test images found{where}; "
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
                raise FileMismatchError(f"{path}:{number}: expected '<path> <label>', got {line!r}")
            rows.append((parts[0], parts[1]))
    return rows


def _places_categories(root: Path, dataset: str) -> dict[str, str]:
    """Label (as written in the lists) -> category path like '/f/field/cultivated'."""
    rows = _read_list(_require(root / "categories_places365.txt", dataset, is_file=True))
    return {label: name for name, label in rows}


def _in_categories(name: str, categories: tuple[str, ...] | None) -> bool:
    """'/f/field/cultivated/00000001.jpg' belongs to '/f/field/cultivated'; the name's folder must equal the
    category exactly ('/m/mountain_path' is not inside '/m/mountain')."""
    return categories is None or "/" + name.strip("/").rsplit("/", 1)[0] in categories


def _places_train(root: Path, data: Path, dataset: str, categories: tuple[str, ...] | None,
                  train_set: str) -> list[Path]:
    """The training images of a Places365 training set: from its list when ROOT has it, else every image in
    the (category) folders, as the released code reads them; a folder that cannot hold the asked-for set
    (too few or too many images per category for it) is reported."""
    list_file = root / PLACES2_TRAIN_LISTS[train_set]
    if list_file.is_file():
        names = (name for name, _ in _read_list(list_file) if _in_categories(name, categories))
        return sorted(data / name.lstrip("/") for name in names)
    if categories is None:
        train = _images_under(data)
        per_category = np.unique([p.relative_to(data).parent.as_posix() for p in train], return_counts=True)[1]
    else:
        folders = [_images_under(_require(data / c.lstrip("/"), dataset), recursive=False) for c in categories]
        train = sorted(p for images in folders for p in images)
        per_category = np.array([len(images) for images in folders])
    largest = int(per_category.max()) if len(per_category) else 0
    if train_set == "standard" and largest > PLACES2_STANDARD_PER_CATEGORY:
        raise DatasetLayoutError(
            f"{data}: a category folder holds {largest} images, more than Places365-standard's "
            f"{PLACES2_STANDARD_PER_CATEGORY}: these are Places365-challenge images; put {list_file.name} in "
            f"{root} to train on the standard set, or set data.places_train: challenge")
    if train_set == "challenge" and 0 < largest <= PLACES2_STANDARD_PER_CATEGORY:
        warnings.warn(f"{data}: at most {largest} images per category, as in Places365-standard, although "
                      "data.places_train is challenge (the released training set); extract "
                      "train_large_places365challenge.tar here, or set data.places_train: standard", stacklevel=4)
    return train


def places2(root: Path, nature: bool = False, train_set: str = "challenge",
            images: str = "large") -> dict[str, list[Path]]:
    """Places365 in its published layout; `train_set` "challenge" (released) or "standard", `images` "large"
    (data_large + val_large, released) or "256" (data_256 + val_256)."""
    dataset = "places2_nature" if nature else "places2"
    if train_set not in PLACES2_TRAIN_LISTS:
        raise InputError(f"places_train must be one of {', '.join(PLACES2_TRAIN_LISTS)}, got {train_set!r}")
    if images not in PLACES2_FOLDERS:
        raise InputError(f"places_images must be one of {', '.join(PLACES2_FOLDERS)}, got {images!r}")
    data_name, val_name = PLACES2_FOLDERS[images]
    data = _require(root / data_name, dataset)
    val = _require(root / val_name, dataset)
    categories = PLACES2_NATURE_CATEGORIES if nature else None
    train = _places_train(root, data, dataset, categories, train_set)

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


LISTERS: dict[str, Callable[..., dict[str, list[Path]]]] = {
    "ffhq": ffhq,
    "places2": places2,
    "places2_nature": lambda root, **places: places2(root, nature=True, **places),
    "imagenet": imagenet,
    "demo": demo,
}


def list_dataset(dataset: str, root: Path, seed: int = 0, eval_count: int | None = None, *,
                 places_train: str = "challenge", places_images: str = "large") -> dict[str, list[Path]]:
    """{'train': [...], 'test': [...]} for a dataset in its published layout under root. eval_count (ImageNet:
    1000, others all): test images drawn with seed. places_train / places_images: see `places2`.
    """
    if dataset not in LISTERS:
        raise InputError(f"unknown dataset {dataset!r}; expected one of {', '.join(LISTERS)}")
    root = Path(root)
    if not root.is_dir():
        raise DatasetLayoutError(f"{root}: dataset folder not found; expected the {LAYOUTS[dataset]}")
    places = {"train_set": places_train, "images": places_images} if dataset.startswith("places2") else {}
    splits = LISTERS[dataset](root, **places)
    if eval_count is None and dataset == "imagenet":
        eval_count = IMAGENET_EVAL_COUNT
    if eval_count is not None:
        if eval_count < 1:
            raise InputError(f"eval_count must be positive, got {eval_count}")
        splits["test"] = seeded_subset(splits["test"], eval_count, seed, where=f" under {root}")
    return splits

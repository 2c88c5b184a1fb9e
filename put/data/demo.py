"""The embedded `demo` dataset: crops of real photographs that ship inside installed packages.

Every photo is read straight from the scikit-image, scikit-learn or matplotlib package folder (scikit-image's
loaders may fetch from the network). Test crops come from photos never used for training, so the demo measures
generalisation.
"""

from __future__ import annotations

import importlib.util
import warnings
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
from PIL import Image

from put.data.images import read_rgb, write_png
from put.errors import MissingFileError

# name -> (package, file inside the package folder)
DEMO_SOURCES: dict[str, tuple[str, str]] = {
    "astronaut": ("skimage", "data/astronaut.png"),
    "chelsea": ("skimage", "data/chelsea.png"),
    "coffee": ("skimage", "data/coffee.png"),
    "rocket": ("skimage", "data/rocket.jpg"),
    "hubble_deep_field": ("skimage", "data/hubble_deep_field.jpg"),
    "immunohistochemistry": ("skimage", "data/ihc.png"),
    "retina": ("skimage", "data/retina.jpg"),
    "motorcycle": ("skimage", "data/motorcycle_left.png"),
    "china": ("sklearn", "datasets/images/china.jpg"),
    "flower": ("sklearn", "datasets/images/flower.jpg"),
    "grace_hopper": ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg"),
}

# How much larger than the crop the photo's shorter side may be scaled (crops at several scales).
MAX_SCALE = 2.5


def package_file(package: str, relative: str) -> Path:
    """Path of a data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise MissingFileError(f"package {package!r} is not installed (needed for {relative})")
    path = Path(spec.origin).parent / relative
    if not path.is_file():
        raise MissingFileError(f"{path}: not in this installation of {package}")
    return path


def load_photo(package: str, relative: str) -> np.ndarray:
    """HxWx3 uint8 colour photo; a grayscale file is refused (the demo wants RGB content)."""
    path = package_file(package, relative)
    arr = read_rgb(path)
    if np.array_equal(arr[..., 0], arr[..., 1]) and np.array_equal(arr[..., 1], arr[..., 2]):
        raise ValueError(f"{path}: grayscale image, expected an RGB photo")
    return arr


DEMO_PHOTOS: dict[str, Callable[[], np.ndarray]] = {
    name: partial(load_photo, package, relative) for name, (package, relative) in DEMO_SOURCES.items()
}


def available_photos() -> dict[str, np.ndarray]:
    """The demo photos that load here; a missing one is skipped with a warning."""
    photos = {}
    for name, loader in DEMO_PHOTOS.items():
        try:
            photos[name] = loader()
        except (OSError, ValueError) as err:
            warnings.warn(f"demo photo {name!r} skipped: {err}", stacklevel=2)
    return photos


def random_crop(photo: Image.Image, image_size: int, rng: np.random.Generator, flip: bool) -> np.ndarray:
    """One image_size crop at a random scale and position (and a random flip when asked)."""
    width, height = photo.size
    short = min(width, height)
    # Upper scale capped at the photo's own resolution so crops are not blurry upsamplings.
    high = max(image_size, min(round(MAX_SCALE * image_size), short))
    target = int(rng.integers(image_size, high + 1))
    scale = target / short
    size = (max(image_size, round(width * scale)), max(image_size, round(height * scale)))
    resized = photo.resize(size, Image.Resampling.BICUBIC)
    left = int(rng.integers(0, size[0] - image_size + 1))
    top = int(rng.integers(0, size[1] - image_size + 1))
    crop = np.asarray(resized)[top:top + image_size, left:left + image_size]
    if flip and rng.random() < 0.5:
        crop = crop[:, ::-1]
    return np.ascontiguousarray(crop)


def demo_source(path: Path) -> str:
    """The photograph a demo crop `<photo>_<k>.png` was cut from (`build_demo` names them so)."""
    return Path(path).stem.rsplit("_", 1)[0]


def write_demo_lists(root: Path, written: dict[str, list[Path]]) -> dict[str, str]:
    """The demo's crops as a folder dataset reads them (put/data/folder.py): its own train and test lists and a
    sources file naming each crop's photograph, under root; returns them as the data settings that name them."""
    root = Path(root)
    settings = {}
    for split, paths in written.items():
        listed = root / f"{split}.txt"
        listed.write_text("".join(f"{p.relative_to(root).as_posix()}\n" for p in paths))
        settings[f"{split}_list"] = str(listed)
    rows = [f"{p.relative_to(root).as_posix()},{demo_source(p)}\n" for paths in written.values() for p in paths]
    (root / "sources.csv").write_text("path,source\n" + "".join(rows))
    return {**settings, "sources": str(root / "sources.csv")}


def build_demo(
    out_dir: Path,
    image_size: int,
    seed: int = 0,
    train_crops_per_photo: int = 24,
    test_crops_per_photo: int = 8,
    test_photos: int = 3,
) -> dict[str, list[Path]]:
    """Write out_dir/{train,test}/<photo>_<k>.png crops; the same seed gives the same bytes."""
    out_dir = Path(out_dir)
    photos = available_photos()
    if len(photos) < test_photos + 2:
        raise MissingFileError(
            f"demo dataset needs at least {test_photos + 2} photos ({test_photos} for test, 2 for "
            f"train) but only {len(photos)} loaded ({', '.join(sorted(photos)) or 'none'}); "
            "reinstall scikit-image, scikit-learn and matplotlib"
        )
    names = sorted(photos)
    held_out = set(np.random.default_rng(seed).choice(names, size=test_photos, replace=False).tolist())

    written: dict[str, list[Path]] = {"train": [], "test": []}
    for name in names:
        split = "test" if name in held_out else "train"
        count = test_crops_per_photo if split == "test" else train_crops_per_photo
        # A stream per photo (keyed by its name) so one missing photo does not change the others.
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        photo = Image.fromarray(photos[name])
        for k in range(count):
            path = out_dir / split / f"{name}_{k:03d}.png"
            write_png(path, random_crop(photo, image_size, rng, flip=split == "train"))
            written[split].append(path)

    # Crops left from an earlier build with other settings would silently join the dataset.
    for split, paths in written.items():
        keep = set(paths)
        for stale in (out_dir / split).glob("*.png"):
            if stale not in keep:
                stale.unlink()
    return {split: sorted(paths) for split, paths in written.items()}

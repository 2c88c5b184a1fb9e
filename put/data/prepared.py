"""The prepared image cache: every image decoded and resized once, as raw pixels in numpy shards with an index and
checksums, resumable (docs/pipeline.md, "The prepared images"; docs/fidelity.md, "Prepared images")."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO, get_args

import numpy as np
import pandas as pd
from tqdm import tqdm

from put.config.presets import PreparedStorage, ResizeFilter
from put.data.dataset import AugmentedImages, check_sizes, stored_pixels
from put.data.images import open_image, to_rgb
from put.data.split import read_split
from put.errors import FileMismatchError, InputError
from put.io.files import (
    atomic_path,
    atomic_write_text,
    file_sha256,
    left_by_dead_run,
    read_csv,
    read_json,
    replace_folder,
)

FORMAT = "put-prepared/1"
SPLITS = ("train", "test")
SHARD_BYTES = 512 << 20  # a shard's size (images of the nominal size): few files on a shared file system
MANIFEST, INDEX = "manifest.json", "index.csv"
INDEX_COLUMNS = ["split", "position", "shard", "offset", "height", "width", "sha256", "source_sha256"]


def partial_dir(out: Path) -> Path:
    """Where an unfinished preparation keeps its finished shards (outside the declared output)."""
    return Path(out).with_name(Path(out).name + ".partial")


def settings_of(split_dir: Path, image_size: int, train_resize: int | None, resize_filter: ResizeFilter,
                storage: PreparedStorage) -> dict:
    """What defines a prepared cache: a cache made with other settings is never read (nor resumed)."""
    check_sizes(image_size, train_resize, resize_filter)
    if storage not in get_args(PreparedStorage):
        raise InputError(f"data.prepared must be one of {', '.join(get_args(PreparedStorage))}, got {storage!r}")
    return {"format": FORMAT, "image_size": image_size, "train_resize": train_resize or image_size,
            "resize_filter": resize_filter, "storage": storage,
            "splits": {s: file_sha256(Path(split_dir) / f"{s}.csv") for s in SPLITS}}


def shard_name(split: str, number: int) -> str:
    return f"{split}-{number:05d}"


def _source_rows(csv: Path) -> tuple[list[Path], list[str]]:
    """The split's image paths and the SHA-256 `put split` recorded for each."""
    table = read_csv(csv, "a split file written by `put split`", dtype=str, keep_default_na=False)
    return read_split(csv), list(table["sha256"]) if "sha256" in table.columns else [""] * len(table)


def _load(path: Path, expected_sha256: str, csv: Path, settings: dict, train: bool) -> np.ndarray:
    """One image as stored: decoded (an unreadable file is named), checked against the checksum `put split`
    recorded, resized."""
    image = open_image(path)
    if expected_sha256 and file_sha256(path) != expected_sha256:
        raise FileMismatchError(f"{path}: its SHA-256 differs from the one recorded in {csv} (the file changed after "
                         "`put split`); re-run `put split`")
    pixels = stored_pixels(to_rgb(image), settings["image_size"], train, settings["train_resize"],
                           settings["resize_filter"])
    if settings["storage"] == "uint8":
        return np.rint(pixels).astype(np.uint8)  # astype alone would truncate: round half to even first
    return pixels.astype(np.float16)  # round to nearest


def _write_shard(work: Path, name: str, images: list[np.ndarray], rows: list[dict]) -> dict:
    offset = 0
    for row, image in zip(rows, images):
        row.update(offset=offset, height=image.shape[0], width=image.shape[1],
                   sha256=hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest())
        offset += image.size
    data = work / f"{name}.npy"
    with atomic_path(data) as tmp, open(tmp, "wb") as f:
        np.save(f, np.concatenate([image.reshape(-1) for image in images]))
    # The shard's index last: its presence says the pixels are complete.
    info = {"rows": rows, "bytes": data.stat().st_size, "sha256": file_sha256(data)}
    atomic_write_text(work / f"{name}.json", json.dumps(info) + "\n")
    return info


def _finished(work: Path, name: str) -> dict | None:
    """The index of a shard an interrupted run finished, if its pixels are intact (the folder's settings,
    the split files' checksums among them, were checked already)."""
    try:
        info = json.loads((work / f"{name}.json").read_text())
        data = work / f"{name}.npy"
        return info if data.stat().st_size == info["bytes"] and file_sha256(data) == info["sha256"] else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _prepare_split(pool: ThreadPoolExecutor, work: Path, csv: Path, split: str, settings: dict,
                   progress: bool, index: TextIO) -> tuple[dict, int]:
    """The shards of one split (those an interrupted run finished are kept): their summaries, and their images'
    index rows appended to `index` shard by shard (memory: one shard, whatever the split's size); returns the
    summaries and the number of images."""
    paths, sources = _source_rows(csv)
    train = split == "train"
    side = settings["train_resize"] if train else settings["image_size"]
    per_shard = max(1, SHARD_BYTES // (side * side * 3 * np.dtype(settings["storage"]).itemsize))
    shards, count, kept = {}, 0, 0
    with tqdm(total=len(paths), desc=f"prepare {split}", unit="img", disable=not progress) as bar:
        for number, first in enumerate(range(0, len(paths), per_shard)):
            name, positions = shard_name(split, number), range(first, min(first + per_shard, len(paths)))
            info = _finished(work, name)
            if info is None:
                # Decoding, hashing and resizing release the GIL: threads run them in parallel.
                images = list(pool.map(lambda i: _load(paths[i], sources[i], csv, settings, train), positions))
                info = _write_shard(work, name, images, [{"split": split, "position": i, "shard": name,
                                                          "source_sha256": sources[i]} for i in positions])
            else:
                kept += len(positions)
            shards[name] = {"images": len(positions), "bytes": info["bytes"], "sha256": info["sha256"]}
            pd.DataFrame(info["rows"], columns=INDEX_COLUMNS).to_csv(index, header=False, index=False)
            count += len(positions)
            bar.update(len(positions))
    if kept and progress:
        print(f"prepare {split}: kept {kept} images from the shards of an interrupted run in {work}")
    return shards, count


def prepare(split_dir: Path, out: Path, image_size: int, train_resize: int | None, resize_filter: ResizeFilter,
            storage: PreparedStorage, workers: int | None = None, progress: bool = True) -> dict:
    """Write the prepared cache of the split in `split_dir` to the folder `out`; returns its manifest.

    storage "originals" writes only the manifest: the training stages then read the original files.
    """
    split_dir, out = Path(split_dir), Path(out)
    settings = settings_of(split_dir, image_size, train_resize, resize_filter, storage)
    work = partial_dir(out)
    if work.is_dir():
        try:
            same = read_json(work / MANIFEST, "settings")["settings"] == settings
        except (OSError, ValueError, KeyError, TypeError):
            same = False
        if not same:  # made for other settings or other split files: nothing in it can be reused
            shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    for stale in work.glob(".*.tmp-*"):  # a kill -9 in the middle of a write (not a live run's on another node)
        if left_by_dead_run(stale):
            stale.unlink()
    atomic_write_text(work / MANIFEST, json.dumps({"settings": settings}, indent=2) + "\n")

    shards, counts = {}, {}
    with open(work / INDEX, "w", newline="") as index:  # the folder appears only once complete (below)
        index.write(",".join(INDEX_COLUMNS) + "\n")
        if storage != "originals":
            with ThreadPoolExecutor(workers or min(16, len(os.sched_getaffinity(0)))) as pool:
                for split in SPLITS:
                    split_shards, counts[split] = _prepare_split(pool, work, split_dir / f"{split}.csv", split,
                                                                 settings, progress, index)
                    shards.update(split_shards)
    manifest = {"settings": settings, "images": counts, "shards": shards,
                "bytes": sum(s["bytes"] for s in shards.values())}
    atomic_write_text(work / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    for name in shards:
        (work / f"{name}.json").unlink()
    replace_folder(work, out)  # the complete cache appears at once
    shutil.rmtree(work, ignore_errors=True)  # the previous cache, where the two folders were exchanged
    return manifest


def read_manifest(folder: Path) -> dict:
    manifest = read_json(Path(folder) / MANIFEST, "the manifest of a folder written by `put prepare`")
    if not isinstance(manifest, dict) or manifest.get("settings", {}).get("format") != FORMAT:
        raise FileMismatchError(f"{Path(folder) / MANIFEST}: not a manifest of format {FORMAT} (re-run `put prepare`)")
    return manifest


def check_settings(folder: Path, manifest: dict, expected: dict) -> None:
    """The cache must be what this run would prepare: same split files, sizes, filter and storage."""
    saved = manifest["settings"]
    changed = [f"{key}: {saved.get(key)!r} in the cache, {value!r} now" for key, value in expected.items()
               if saved.get(key) != value]
    if changed:
        raise FileMismatchError(f"{folder}: prepared with other settings than this run's ({'; '.join(changed)}); "
                         "re-run `put prepare` (the DAG does) or set data.prepared: originals")


class PreparedImages(AugmentedImages):
    """One split of a prepared cache: the same tensors as ImageListDataset over the original files, up to the
    storage's rounding (none for float16 on FFHQ), without decoding or resizing anything."""

    def __init__(self, folder: Path, split_dir: Path, split: str, image_size: int, train: bool, *,
                 train_resize: int | None = None, resize_filter: ResizeFilter = "bilinear",
                 storage: PreparedStorage = "float16") -> None:
        self.folder, self.split, self.image_size, self.train = Path(folder), split, image_size, train
        manifest = read_manifest(self.folder)
        expected = settings_of(split_dir, image_size, train_resize, resize_filter, storage)
        check_settings(self.folder, manifest, expected)
        if storage == "originals":
            raise InputError(f"{self.folder}: data.prepared is 'originals': read the original files")
        table = read_csv(self.folder / INDEX, "the index of a folder written by `put prepare`",
                         dtype={"split": str, "shard": str})
        table = table[table["split"] == split].sort_values("position")
        if len(table) != manifest["images"][split] or not len(table):
            raise FileMismatchError(f"{self.folder / INDEX}: lists {len(table)} {split} images, the manifest "
                             f"{manifest['images'][split]} (re-run `put prepare`)")
        for name, shard in manifest["shards"].items():
            path = self.folder / f"{name}.npy"
            if not path.is_file() or path.stat().st_size != shard["bytes"]:
                raise FileMismatchError(f"{path}: missing or not the size the manifest records "
                                        f"({shard['bytes']} bytes); "
                                 "re-run `put prepare`")
        self.names = sorted(set(table["shard"]))
        self.shard = table["shard"].map({n: i for i, n in enumerate(self.names)}).to_numpy()
        self.offset, self.height, self.width = (table[c].to_numpy() for c in ("offset", "height", "width"))
        self.sha256 = table["sha256"].tolist()
        self._open: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.shard)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_open": {}}  # a data-loader worker maps the shards itself, never copies them

    def describe(self, index: int) -> str:
        return f"the {self.split} split of {self.folder}"

    def pixels(self, index: int) -> np.ndarray:
        """The stored (H, W, 3) image (float16 or uint8), a view of the memory-mapped shard."""
        number = int(self.shard[index])
        if number not in self._open:
            self._open[number] = np.load(self.folder / f"{self.names[number]}.npy", mmap_mode="r")
        height, width, start = int(self.height[index]), int(self.width[index]), int(self.offset[index])
        return self._open[number][start:start + height * width * 3].reshape(height, width, 3)

    def verify(self, index: int) -> bool:
        """Whether image `index` still has the checksum written with it."""
        return hashlib.sha256(np.ascontiguousarray(self.pixels(index)).tobytes()).hexdigest() == self.sha256[index]

"""The `put split` stage: verify every image, checksum it, and write the split CSVs and a report.

A file that does not fully decode is reported and left out, so a damaged download shows up here, not as a crash
hours into training. Each row names the image's source, which the evaluation's bootstrap resamples.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from put.config import DataConfig, Preset
from put.data.demo import build_demo, write_demo_lists
from put.data.folder import folder_name, split_folder
from put.data.groups import image_sources
from put.data.images import check_image
from put.data.sources import list_dataset
from put.errors import FileMismatchError, InputError, MissingFileError
from put.io.files import atomic_write_text, read_csv

COLUMNS = ["path", "sha256", "width", "height", "source"]


class SplitError(InputError):
    pass


def _stored_path(path: Path, base: Path | None) -> str:
    if base is None:
        return path.as_posix()
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        raise SplitError(f"{path}: not inside the base folder {base}") from None


def write_split(files: dict[str, list[Path]], out_dir: Path, base: Path | None = None,
                workers: int | None = None, info: dict | None = None, sources: dict[Path, str] | None = None,
                checked: dict[Path, dict] | None = None, excluded: list[dict] | None = None) -> dict:
    """Write out_dir/<split>.csv (path, sha256, width, height, source) and split_report.json (starting with
    `info`). `sources`: shared sources by path (others are their own); `checked`: rows already verified;
    `excluded`: images left out before ({path, kind, reason}), listed first. Returns the report; raises
    SplitError when a split has no usable image left.
    """
    out_dir = Path(out_dir)
    base = Path(base) if base is not None else None
    workers = workers or min(8, os.cpu_count() or 1)
    report: dict = {**(info or {}), "base": str(base) if base is not None else None, "splits": {},
                    "excluded": [{"split": None, **entry} for entry in excluded or ()]}
    tables = {}
    for split, paths in files.items():
        paths = [Path(p) for p in paths]
        stored = [_stored_path(p, base) for p in paths]
        # Decoding is mostly C code that releases the GIL, so threads give real parallelism.
        with ThreadPoolExecutor(workers) as pool:
            results = list(tqdm(pool.map(lambda p: (checked or {}).get(p) or check_image(p), paths),
                                total=len(paths), desc=f"verify {split}", unit="img", leave=False))
        rows = [{"path": s, **r, "source": (sources or {}).get(p, s)}
                for p, s, r in zip(paths, stored, results) if "reason" not in r]
        report["excluded"] += [{"split": split, "path": s, "reason": r["reason"]}
                               for s, r in zip(stored, results) if "reason" in r]
        report["splits"][split] = {"listed": len(paths), "usable": len(rows), "excluded": len(paths) - len(rows)}
        tables[split] = pd.DataFrame(rows, columns=COLUMNS)

    # The same picture in train and test would inflate the scores; report it, by checksum.
    if "train" in tables and "test" in tables:
        shared = set(tables["train"]["sha256"]) & set(tables["test"]["sha256"])
        report["train_test_duplicates"] = sorted(tables["test"].loc[tables["test"]["sha256"].isin(shared), "path"])

    for split, table in tables.items():
        atomic_write_text(out_dir / f"{split}.csv", table.to_csv(index=False))
    report_path = out_dir / "split_report.json"
    atomic_write_text(report_path, json.dumps(report, indent=2) + "\n")

    empty = [split for split, table in tables.items() if table.empty]
    if empty:
        raise SplitError(f"split {', '.join(empty)} has no usable image left; see {report_path} "
                         "for the files excluded and why")
    return report


def read_split(csv: Path, base: Path | None = None) -> list[Path]:
    """Image paths of a split CSV, joined to base when the CSV stores relative paths."""
    csv = Path(csv)
    if not csv.is_file():
        raise MissingFileError(f"{csv}: split file not found; run `put split` first")
    table = read_csv(csv, "a split file written by `put split`", dtype={"path": str, "sha256": str},
                     keep_default_na=False)
    if "path" not in table.columns:
        raise FileMismatchError(f"{csv}: expected a 'path' column (columns: {', '.join(COLUMNS)}), "
                         f"got {', '.join(table.columns)}")
    base = Path(base) if base is not None else None
    return [base / p if base is not None else Path(p) for p in table["path"]]


def read_sources(csv: Path) -> list[str]:
    """The source of each image of a split CSV, in its order."""
    table = read_csv(Path(csv), "a split file written by `put split`", dtype=str, keep_default_na=False)
    if "source" not in table.columns:
        raise ValueError(f"{csv}: no 'source' column (a split written before sources were recorded); re-run "
                         "`put split`")
    return list(table["source"])


def split_dataset(preset: Preset, out_dir: Path) -> dict:
    """The preset's train/test lists (and for the demo, its images first) written into `out_dir`."""
    data = preset.data
    if data.dataset == "demo" and data.root is None:
        # The demo's crops, written here, are read as a folder dataset with their own lists and photographs as
        # sources: the DAG's demo run is a run on a folder of images.
        root = Path(out_dir) / "images"
        lists = write_demo_lists(root, build_demo(root, preset.model.image_size, seed=data.seed))
        return _split_folder(root, data.model_copy(update={**lists, "name": "demo"}), preset.model.image_size,
                             Path(out_dir), dataset="demo")
    if data.root is None:
        raise InputError(f"data.root: the {data.dataset} preset needs the folder of its raw images "
                         f"(set overrides.data.root in params.yaml)")
    else:
        root = Path(data.root)
    if data.dataset == "folder":
        return _split_folder(root, data, preset.model.image_size, Path(out_dir))
    files = list_dataset(data.dataset, root, seed=data.seed, eval_count=data.eval_count,
                         places_train=data.places_train, places_images=data.places_images)
    info = {"dataset": data.dataset}  # which split a run used (e.g. places2 vs places2_nature) ...
    if data.dataset.startswith("places2"):  # ... and which Places365 training set and image folders
        info.update(places_train=data.places_train, places_images=data.places_images)
    sources = image_sources(data.dataset, root, files, data.sources)  # checked before anything is written
    return write_split(files, Path(out_dir), info=info, sources=sources)


def _split_folder(root: Path, data: DataConfig, image_size: int, out_dir: Path, dataset: str = "folder") -> dict:
    """A folder of images, screened and split (put/data/folder.py; every image left out is named on one line of
    stderr); the counts go in the report's `screened` summary."""
    split = split_folder(root, data, min_side=image_size)
    info = {"dataset": dataset, "name": folder_name(data), "screened": split.summary}
    return write_split(split.files, out_dir, info=info, sources=split.sources, checked=split.screened.rows,
                       excluded=split.screened.excluded)

"""The results `put compare` reads: one variant's evaluation (its per-image values and its record, `_info.json`)
in a workspace or a folder of metrics files, or in a git revision or DVC experiment, read from git's objects
without checking it out (put/io/revisions.py). A result is named `WHERE[:VARIANT]`: WHERE a folder, a revision or
an experiment (empty: the working directory), VARIANT its evaluated label (default `--variant`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from put.config.paths import METRICS_FILE, masks_dir, metrics_images_file, metrics_info_file, path_of
from put.errors import FileMismatchError, MissingFileError
from put.io.revisions import resolve
from put.metrics.per_image import read_per_image, recorded_masks

DVC_LOCK = "dvc.lock"


@dataclass(frozen=True)
class Result:
    """One evaluated result: what the user called it, where it was read, its label, its evaluation record and
    per-image values, and what identifies its masks (by kind: the record's digest, dvc.lock's hash)."""

    name: str
    where: str
    label: str
    info: dict
    images: pd.DataFrame
    masks: dict[str, str]


def split_name(text: str, variant: str) -> tuple[str, str]:
    """WHERE[:VARIANT] -> (WHERE, VARIANT); an existing folder's name is taken whole (it may hold a colon)."""
    if Path(text).is_dir() or ":" not in text:
        return text or ".", variant
    where, label = text.rsplit(":", 1)
    return where or ".", label or variant


def _files(preset: str, label: str) -> tuple[str, str, str]:
    """The metrics file, its record and its per-image values, relative to a workspace's root."""
    metrics = path_of(METRICS_FILE, preset, label)
    return metrics.as_posix(), metrics_info_file(metrics).as_posix(), metrics_images_file(metrics).as_posix()


def _masks_from_lock(lock: bytes | None, metrics: str, masks: str) -> str | None:
    """The hash dvc.lock records for the masks folder the stage writing `metrics` read."""
    if lock is None:
        return None
    try:
        stages = (yaml.safe_load(lock) or {}).get("stages", {})
    except yaml.YAMLError:
        return None
    for stage in stages.values():
        if any(out.get("path") == metrics for out in stage.get("outs", [])):
            found = [dep.get("md5") for dep in stage.get("deps", []) if dep.get("path") == masks]
            return f"dvc.lock md5 {found[0]}" if found and found[0] else None
    return None


def _folder(root: Path, images_file: str) -> tuple[Callable[[str], bytes | None], Callable[[str], str], str]:
    """Reading a workspace (the files under their paths), or a folder of metrics files (the files by name; no
    dvc.lock): how to read a file, how to name it, how to name the folder."""
    workspace = (root / images_file).is_file() or not (root / Path(images_file).name).is_file()

    def locate(path: str) -> Path | None:
        return root / path if workspace else None if path == DVC_LOCK else root / Path(path).name

    def read(path: str) -> bytes | None:
        file = locate(path)
        return file.read_bytes() if file is not None and file.is_file() else None

    return read, lambda path: str(locate(path) or root / path), f"{'workspace' if workspace else 'folder'} {root}"


def read_result(text: str, preset: str, variant: str, repo: Path = Path(".")) -> Result:
    """The result `text` names (WHERE[:VARIANT]) of `preset`; a missing file is an error naming it and where it was
    looked for."""
    where, label = split_name(text, variant)
    metrics, info_file, images_file = _files(preset, label)
    if Path(where).is_dir():
        read, shown, described = _folder(Path(where), images_file)
    else:
        revision = resolve(where, repo)
        read, shown, described = revision.read, revision.shown, revision.describe()
    raw_images, raw_info = read(images_file), read(info_file)
    for raw, path in ((raw_images, images_file), (raw_info, info_file)):
        if raw is None:
            raise MissingFileError(f"{shown(path)}: not found in {described} (expected the evaluation of {label!r} "
                                   f"for preset {preset!r}: is it evaluated there, and is the variant right?)")
    try:
        info = json.loads(raw_info)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FileMismatchError(f"{shown(info_file)}: not valid JSON ({err}); expected the record `put evaluate` "
                                "writes") from None
    if not isinstance(info, dict) or not isinstance(info.get("protocol"), dict):
        raise FileMismatchError(f"{shown(info_file)}: no metric protocol recorded -- re-run the evaluate stage")
    masks = {"record": recorded_masks(info),
             DVC_LOCK: _masks_from_lock(read(DVC_LOCK), metrics, masks_dir(preset).as_posix())}
    return Result(text, f"{described}, {label}", label, info, read_per_image(raw_images, shown(images_file)),
                  {kind: value for kind, value in masks.items() if value})

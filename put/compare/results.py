"""The results `put compare` reads: one variant's evaluation (per-image values and `_info.json`) in a workspace, a
metrics folder, a git revision or a DVC experiment (read from git's objects). Named `WHERE[:VARIANT]`: WHERE a
folder, revision or experiment (empty: the working directory), VARIANT its label (default `--variant`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from put.compare.presets import DEFAULT_PRESET, OWN, RECORD, OwnPreset, check_presets, preset_of
from put.compare.rules import check_rules, files_rule
from put.config.paths import (
    METRICS_FILE,
    masks_dir,
    metrics_images_file,
    metrics_info_file,
    pasted_metrics_file,
    path_of,
)
from put.errors import FileMismatchError, InputError, MissingFileError
from put.io.revisions import resolve
from put.metrics.per_image import read_per_image, recorded_masks, rule_of

DVC_LOCK = "dvc.lock"
PARAMS = "params.yaml"


@dataclass(frozen=True)
class Result:
    """One evaluated result: its name, where it was read (place, label, preset, rule, each with its origin), its
    record and per-image values (with `rule`), what identifies its masks and the file its values came from."""

    name: str
    where: str
    label: str
    info: dict
    images: pd.DataFrame
    masks: dict[str, str]
    preset: str
    rule: str
    read_from: str


def split_name(text: str, variant: str) -> tuple[str, str]:
    """WHERE[:VARIANT] -> (WHERE, VARIANT); an existing folder's name is taken whole (it may hold a colon)."""
    if Path(text).is_dir() or ":" not in text:
        return text or ".", variant
    where, label = text.rsplit(":", 1)
    return where or ".", label or variant


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


@dataclass(frozen=True)
class Place:
    """Where a result's files are read: how to read (bytes, None when absent), name and identify one, the place,
    its parameter file and whether it is a metrics folder (files by name; no dvc.lock or params.yaml)."""

    read: Callable[[str], bytes | None]
    shown: Callable[[str], str]
    identity: Callable[[str], str]
    described: str
    params: str | None = PARAMS
    by_name: bool = False
    params_source: str = OWN


def _folder(root: Path, label: str, params: Path | None) -> Place:
    """A workspace (the files under their paths), or a folder of metrics files: one with `label`'s per-image
    values at its top and no params.yaml."""
    name = metrics_images_file(path_of(METRICS_FILE, "", label)).name
    by_name = params is None and (root / name).is_file() and not (root / PARAMS).is_file()
    params_file = params or root / PARAMS

    def read(path: str) -> bytes | None:
        file = params_file if path == PARAMS else root / path
        return file.read_bytes() if file.is_file() else None

    shown = lambda path: str(params_file if path == PARAMS else root / path)  # noqa: E731
    return Place(read, shown, lambda path: str((root / path).resolve()),
                 f"{'folder' if by_name else 'workspace'} {root}", None if by_name else PARAMS, by_name,
                 f"--params {params}" if params else OWN)


def place_of(where: str, label: str, repo: Path, params: Path | None = None) -> Place:
    """The place WHERE names: a folder, else a git revision or DVC experiment of `repo`. `params`: the working
    directory's parameter file (--params), for `.`."""
    if Path(where).is_dir():
        own = params if params is not None and Path(where).resolve() == Path(".").resolve() else None
        if own is not None and not own.is_file():
            raise MissingFileError(f"{own}: parameter file not found (--params, the working directory's)")
        return _folder(Path(where), label, own)
    revision = resolve(where, repo)
    return Place(revision.read, revision.shown, lambda path: f"{path} of commit {revision.commit[:7]}",
                 revision.describe())


def _files(preset: str, label: str, pasted: bool, by_name: bool) -> tuple[str, str, str]:
    """The metrics file, its record and its per-image values under the main or the pasted rule, relative to a
    workspace's root (or, `by_name`, to the folder of metrics files)."""
    main = path_of(METRICS_FILE, preset, label)
    metrics = pasted_metrics_file(main) if pasted else main
    files = [metrics, metrics_info_file(metrics), metrics_images_file(metrics)]
    return tuple((f.relative_to(main.parent) if by_name else f).as_posix() for f in files)  # type: ignore[return-value]


def _read_files(place: Place, preset: str, label: str, pasted: bool) -> tuple[bytes, dict, str] | None:
    """The per-image values, the record and the per-image file's path of one rule's files; None when absent."""
    _, info_file, images_file = _files(preset, label, pasted, place.by_name)
    raw_images, raw_info = place.read(images_file), place.read(info_file)
    if raw_images is None or raw_info is None:
        return None
    try:
        info = json.loads(raw_info)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FileMismatchError(f"{place.shown(info_file)}: not valid JSON ({err}); expected the record `put "
                                "evaluate` writes") from None
    if not isinstance(info, dict) or not isinstance(info.get("protocol"), dict):
        raise FileMismatchError(f"{place.shown(info_file)}: no metric protocol recorded -- re-run the evaluate "
                                "stage")
    return raw_images, info, images_file


def _missing(place: Place, preset: OwnPreset, label: str, pasted: bool) -> MissingFileError:
    _, info_file, images_file = _files(preset.preset, label, pasted, place.by_name)
    path = next(p for p in (images_file, info_file) if place.read(p) is None)
    what = "under the pasted rule (the evaluate stage writes them beside its main files: re-run it)" if pasted \
        else "(is it evaluated there, and is the variant right?)"
    named = f"for preset {preset} " if preset.preset else ""  # a folder whose record is missing names none
    return MissingFileError(f"{place.shown(path)}: not found in {place.described} (expected the evaluation of "
                            f"{label!r} {named}{what})")


def read_result(text: str, preset: str | None, variant: str, repo: Path = Path("."), rule: str | None = None,
                params: Path | None = None) -> Result:
    """The one result `text` names (WHERE[:VARIANT]), as `read_results` reads it."""
    return read_results([text], variant, repo, preset, rule, params)[0]


def _read(name: str, label: str, place: Place, own: OwnPreset, rule: str | None, why: str) -> Result:
    """One result's files under `own` preset and `rule` (None: its main files), checked."""
    pasted = rule == "pasted"
    found = _read_files(place, own.preset, label, pasted)
    if found is None and pasted:  # main files scored pasted are the pasted files
        main = _read_files(place, own.preset, label, False)
        found = main if main is not None and rule_of(main[1]) == "pasted" else None
    if found is None:
        raise _missing(place, own, label, pasted)
    raw_images, info, images_file = found
    recorded = rule_of(info)
    if rule is not None and recorded != rule:
        raise FileMismatchError(f"{name}: {place.shown(images_file)} is scored under rule {recorded} (its "
                                f"evaluate.known_pixels), not {rule}: no {rule} files to compare -- compare under "
                                f"--rule {recorded}")
    if place.by_name:  # no params.yaml: the preset its record names (checked against the others' by the caller)
        own = OwnPreset(str(info.get("preset", own.preset or DEFAULT_PRESET)), RECORD)
    metrics = path_of(METRICS_FILE, own.preset, label).as_posix()
    masks = {"record": recorded_masks(info),
             DVC_LOCK: None if place.by_name else _masks_from_lock(place.read(DVC_LOCK), metrics,
                                                                   masks_dir(own.preset).as_posix())}
    images = read_per_image(raw_images, place.shown(images_file)).assign(rule=recorded)
    return Result(name, f"{place.described}, {label}; preset {own}, rule {recorded} ({why})", label, info, images,
                  {kind: value for kind, value in masks.items() if value}, own.preset, recorded,
                  place.identity(images_file))


def read_results(texts: Sequence[str], variant: str, repo: Path = Path("."), preset: str | None = None,
                 rule: str | None = None, params: Path | None = None) -> list[Result]:
    """The results `texts` name, each under its own preset (one for all: else an error naming the result that
    differs) and one compositing rule's files (rules.py); the same files named twice are an error."""
    named = [split_name(text, variant) for text in texts]
    if params is not None and not any(Path(where).resolve() == Path(".").resolve() for where, _ in named
                                      if Path(where).is_dir()):
        raise InputError(f"--params {params}: the working directory's parameter file, but no result is read from "
                         "the working directory (`.` or `:VARIANT`); a revision or folder is read under its own")
    places = [place_of(where, label, repo, params) for where, label in named]
    presets = [None if place.params is None else preset_of(place.read(place.params), place.shown(place.params),
                                                           preset, place.params_source) for place in places]
    check_presets(texts, presets, preset)
    chosen, why = files_rule([(text, label) for text, (_, label) in zip(texts, named)], rule)
    results = [_read(text, label, place, own or OwnPreset(preset or "", RECORD), chosen, why)
               for text, (_, label), place, own in zip(texts, named, places, presets)]
    check_presets(texts, [OwnPreset(r.preset, RECORD if p is None else p.source) for r, p in zip(results, presets)],
                  preset)
    check_rules(texts, [r.rule for r in results])
    seen: dict[str, str] = {}
    for result in results:
        if result.read_from in seen:
            raise InputError(f"{seen[result.read_from]} and {result.name}: both name {result.read_from}: a result "
                             "compared with itself")
        seen[result.read_from] = result.name
    return results

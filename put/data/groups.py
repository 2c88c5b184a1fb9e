"""Which images share a source: the independent units the evaluation's bootstrap resamples.

Crops of one photograph are not independent draws: resampling them one by one makes intervals too narrow. The
demo's crops name their photograph (`<photo>_<k>.png`); any dataset may name sources in a `data.sources` CSV
(`path`, `source`). An image no entry names is its own source.
"""

from __future__ import annotations

from pathlib import Path

from put.data.demo import demo_source
from put.errors import InputError
from put.io.files import read_csv

KEY = "data.sources"


def read_groups(path: Path, root: Path, images: list[Path]) -> dict[Path, str]:
    """The sources a `data.sources` file names, keyed by image path (as listed in `images`); a file that lacks
    its columns, names an image that is not among `images`, or leaves a source blank is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{KEY}: {path}: file not found; expected a CSV file with columns path, source")
    table = read_csv(path, "a CSV file with columns path, source", dtype=str, keep_default_na=False)
    missing = [c for c in ("path", "source") if c not in table.columns]
    if missing:
        raise InputError(f"{KEY}: {path} lacks column(s) {', '.join(missing)}; expected path, source")
    known = {image.resolve(): image for image in images}
    groups = {}
    for line, (name, source) in enumerate(zip(table["path"], table["source"]), 2):
        image = known.get((Path(root) / name).resolve())
        if image is None:
            raise InputError(f"{KEY}: {path} line {line} names {name!r}, which is no image of the split under "
                             f"{root}")
        if not source.strip():
            raise InputError(f"{KEY}: {path} line {line} gives {name!r} a blank source")
        groups[image] = source
    return groups


def image_sources(dataset: str, root: Path, files: dict[str, list[Path]],
                  sources_file: str | None) -> dict[Path, str]:
    """The source of every image that shares one with others: the demo's photographs, or a `data.sources`
    file's entries."""
    images = [p for paths in files.values() for p in paths]
    if sources_file is not None:
        return read_groups(Path(sources_file), root, images)
    if dataset == "demo":
        return {p: demo_source(p) for p in images}
    return {}

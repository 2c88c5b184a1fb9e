"""The frozen evaluation images and masks of a preset, laid out as other inpainting codebases read them.

Per mask group: LaMa's layout (`<name>.png` beside `<name>_mask001.png`) or plain `images/` and `masks/` folders
(`folder`, `ict`), with a manifest mapping every name back to its group, image and mask; with `blank`, holes are
zeroed. Why these names: docs/pipeline.md, "Exporting the evaluation masks"; docs/external.md.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from put.config.external import EXPORT_FORMATS
from put.data.images import open_image, read_rgb, write_png
from put.errors import InputError, PathError
from put.io.files import atomic_dir, atomic_write_text, read_csv
from put.masks.evaluation import read_manifest
from put.masks.io import MaskError, keep_mask_from_array, read_mask_values, size_mismatch
from put.masks.layouts import FIXED_HOLE_VALUE, HOLE_VALUES, exported_name, layout

EXPORT_MANIFEST = "export_manifest.csv"  # not manifest.csv: an export is never mistaken for a `put masks` folder
EXPORT_COLUMNS = ("preset", "format", "hole_value", "group", "image", "mask", "image_file", "mask_file",
                  "result_file")


class ExportedPair(NamedTuple):
    group: str  # the mask group (hole-ratio bin), e.g. "20-40"
    image: str  # the test image, as the split and the masks' manifest name it
    mask: str  # the mask, as the masks' manifest names it: <group>/<image stem>.png under the masks folder


def _check_options(fmt: str, hole_value: int) -> None:
    if fmt not in EXPORT_FORMATS:
        raise InputError(f"export format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    if hole_value not in HOLE_VALUES:
        raise InputError(f"hole value must be one of {', '.join(map(str, HOLE_VALUES))}, got {hole_value!r}")
    fixed, reader = FIXED_HOLE_VALUE.get(fmt, (hole_value, ""))
    if hole_value != fixed:  # e.g. a black-hole mask for LaMa would inpaint the rest
        raise InputError(f"the {fmt} layout's masks are {'white' if fixed == 255 else 'black'} = hole ({reader}); "
                         f"hole value {hole_value} is for --format folder")


def _check_out(out: Path, preset: str, masks_dir: Path) -> None:
    """An --out that holds anything but an earlier export of this preset is refused, before any work; so is one
    inside the masks folder, a stage's output that the DAG tracks."""
    if out.resolve().is_relative_to(masks_dir.resolve()):
        raise PathError(errno.EINVAL, f"inside the masks folder {masks_dir}; give a folder outside it", str(out))
    if not out.is_dir() or not any(out.iterdir()):
        return
    manifest = out / EXPORT_MANIFEST
    table = read_csv(manifest, "an export manifest", dtype=str) if manifest.is_file() else None
    if table is None or "preset" not in table.columns:
        raise PathError(errno.ENOTEMPTY, "not empty and not an earlier masks export; give an empty or new folder",
                        str(out))
    presets = set(table["preset"])
    if presets != {preset}:
        raise PathError(errno.EEXIST, f"holds an export of preset {', '.join(sorted(presets))}, not {preset}; "
                        "give an empty or new folder", str(out))


def _export_mask(source: Path, target: Path, size: tuple[int, int], hole_value: int) -> np.ndarray:
    """One mask of the masks folder (255 = hole) rewritten with `hole_value` for holes, checked binary and of
    the image's size (H, W); returns its hole (H, W bool)."""
    values = read_mask_values(source, expected=size)
    if values.shape != size:
        raise MaskError(size_mismatch(str(source), values.shape, size))
    hole = keep_mask_from_array(values, "hole-white", str(source)) < 0.5
    write_png(target, np.where(hole, hole_value, 255 - hole_value).astype(np.uint8))
    return hole


def _exported_names(pairs: pd.DataFrame) -> dict[str, str]:
    """Test image -> its exported file stem (an image's name, the same in every group: its masks' stem)."""
    first = pairs.drop_duplicates("image")
    stems = [Path(mask).stem for mask in first["mask"]]
    return {image: exported_name(i, stem) for i, (image, stem) in enumerate(zip(first.image, stems))}


def result_files(masks_dir: Path, fmt: str) -> dict[str, str]:
    """Mask (as the masks' manifest names it) -> the result file its completed image bears in a folder of results
    written from an export of `masks_dir` in layout `fmt`, without the export itself (the names are the same)."""
    _check_options(fmt, 255)
    pairs = read_manifest(Path(masks_dir))
    names = _exported_names(pairs)
    return {mask: layout(fmt, group, names[image])[2] for image, mask, group in zip(pairs.image, pairs["mask"],
                                                                                   pairs.group)}


def export_masks(masks_dir: Path, out: Path, fmt: str, preset: str, hole_value: int = 255,
                 blank: bool = False) -> Path:
    """Export every (test image, mask) pair of the `put masks` folder `masks_dir` to `out` in layout `fmt`;
    returns the export manifest's path. Images are the ground truth (LaMa and MAT blank the hole), or with `blank`
    hole-zeroed (docs/external.md). `out` is replaced as a whole, so a killed export leaves it as it was."""
    _check_options(fmt, hole_value)
    masks_dir, out = Path(masks_dir), Path(out)
    _check_out(out, preset, masks_dir)
    pairs = read_manifest(masks_dir)
    names = _exported_names(pairs)
    rows = []
    with atomic_dir(out) as staging:
        for image, mask, group in zip(pairs.image, pairs["mask"], pairs.group):
            image_file, mask_file, result_file = layout(fmt, group, names[image])
            gt = masks_dir / "gt" / f"{Path(mask).stem}.png"  # the stage's ground truth, named as the mask
            (staging / image_file).parent.mkdir(parents=True, exist_ok=True)
            (staging / mask_file).parent.mkdir(parents=True, exist_ok=True)
            with open_image(gt) as opened:
                size = (opened.height, opened.width)
            hole = _export_mask(masks_dir / mask, staging / mask_file, size, hole_value)
            if blank:
                write_png(staging / image_file, np.where(hole[..., None], 0, read_rgb(gt)).astype(np.uint8))
            else:
                shutil.copyfile(gt, staging / image_file)  # the bytes themselves: the exported image is the one scored
            rows.append({"preset": preset, "format": fmt, "hole_value": hole_value, "group": group, "image": image,
                         "mask": mask, "image_file": image_file, "mask_file": mask_file,
                         "result_file": result_file, "blanked": blank})
        table = pd.DataFrame(rows, columns=[*EXPORT_COLUMNS, "blanked"])  # blanked: not required of older exports
        atomic_write_text(staging / EXPORT_MANIFEST, table.to_csv(index=False, lineterminator="\n"))
    return out / EXPORT_MANIFEST


def read_export_table(out: Path) -> pd.DataFrame:
    """The manifest of an export folder, one row per pair; an error names a missing manifest, column or file."""
    path = Path(out) / EXPORT_MANIFEST
    if not path.is_file():
        raise MaskError(f"{path}: no export manifest (write one with `put masks-export`)")
    table = read_csv(path, "the manifest `put masks-export` writes", keep_default_na=False,
                     dtype={c: (int if c == "hole_value" else str) for c in EXPORT_COLUMNS})
    missing = [c for c in EXPORT_COLUMNS if c not in table.columns]
    if missing:
        raise MaskError(f"{path}: manifest lacks column(s) {', '.join(missing)}; expected {', '.join(EXPORT_COLUMNS)}")
    absent = [f for f in (*table.image_file, *table.mask_file) if not (path.parent / f).is_file()]
    if absent:
        raise MaskError(f"{path}: {len(absent)} listed file(s) missing, e.g. {path.parent / absent[0]}")
    return table


def read_export_manifest(out: Path) -> dict[str, ExportedPair]:
    """Exported name -> (group, image, mask). The names, relative to `out` or to a folder of results: each pair's
    image file, mask file and result file (`layout`), so a completed image comes back by its name."""
    table = read_export_table(out)
    pairs = [ExportedPair(*row) for row in zip(table.group, table.image, table["mask"])]
    return {name: pair for column in ("image_file", "mask_file", "result_file")
            for name, pair in zip(table[column], pairs)}

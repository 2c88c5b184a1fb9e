"""The `put masks` stage: one seeded evaluation mask per test image and hole-ratio group, written once.

Layout: `out_dir/<group>/<image stem>.png` (255 = hole) per group, and `manifest.csv` written last, so it always
points at complete files. Masks come from a mask folder (drawn among those whose ratio falls in the group), else
from `mask_with_ratio`; unlike the released code, the same inputs and seed give byte-identical files.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from put.config.bins import EVAL_GROUPS, hole_ratio
from put.errors import InputError
from put.io.files import atomic_write_text, read_manifest_csv
from put.masks.generate import mask_with_ratio
from put.masks.io import MaskError, MaskFolder, write_mask

MANIFEST = "manifest.csv"
COLUMNS = ("image", "mask", "ratio", "group", "source", "image_source")


def _rng(seed: int, *keys: str) -> np.random.Generator:
    """A generator keyed by the seed and names, so one mask does not depend on the order or number of others."""
    words = [int.from_bytes(hashlib.sha256(k.encode()).digest()[:8], "little") for k in keys]
    return np.random.default_rng(np.random.SeedSequence([seed, *words]))


def _stems(test_images: list[str]) -> list[str]:
    if not test_images:
        raise InputError("write_eval_masks: the list of test images is empty")
    stems = [Path(name).stem for name in test_images]
    seen: dict[str, str] = {}
    for name, stem in zip(test_images, stems):
        if stem in seen:
            raise InputError(f"write_eval_masks: test images {seen[stem]!r} and {name!r} share the stem {stem!r} "
                             "and would get the same mask file; give test images distinct file names")
        seen[stem] = name
    return stems


def pconv_ratios(pconv: MaskFolder, progress: bool = True) -> np.ndarray:
    """Hole ratio of every mask of a folder at the folder's size (each mask read once)."""
    # Progress bars as context managers: closed before an error naming a bad file is printed after them.
    with tqdm(range(len(pconv)), desc="PConv mask ratios", disable=not progress) as indices:
        return np.array([hole_ratio(pconv.load(i)) for i in indices])


def _pconv_orders(pconv: MaskFolder, seed: int, progress: bool) -> dict[str, np.ndarray]:
    """Per group, the indices of the folder's masks whose ratio lies in it, in a seeded order. Checked for
    every group before any file is written, so a folder that cannot fill a group fails at once."""
    ratios = pconv_ratios(pconv, progress)
    orders = {group: np.flatnonzero((ratios >= lo) & (ratios < hi)) for group, (lo, hi) in EVAL_GROUPS.items()}
    empty = [group for group, candidates in orders.items() if not len(candidates)]
    if empty:
        # PConv sets hold 0-60% holes: mostly-hole masks mean white was read as the wrong colour.
        hint = (f"; most are holes as read ({pconv.polarity}): is the polarity ({pconv.setting}_polarity) the other "
                "one?" if np.median(ratios) > 0.5 else "")
        raise MaskError(f"{pconv.root} ({pconv.setting}_root): no mask has a hole ratio (at "
                        f"{pconv.size[1]}x{pconv.size[0]}) in group(s) {', '.join(empty)}; its {len(ratios)} masks "
                        f"range from {ratios.min():.3f} to {ratios.max():.3f}{hint}")
    return {group: _rng(seed, "pconv", group).permutation(candidates) for group, candidates in orders.items()}


def write_eval_masks(test_images: list[str], out_dir: Path, size: tuple[int, int], seed: int,
                     pconv: MaskFolder | None = None, *, progress: bool = True,
                     sources: list[str] | None = None) -> Path:
    """Write one mask per test image and per group of EVAL_GROUPS; returns the manifest's path. `sources`: the
    source of each test image (the split's; default: each image its own).

    With `pconv`, each group's candidates are dealt in a seeded order, distinct while there are enough; without
    it, each mask comes from a generator keyed by (seed, group, image stem).
    """
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"write_eval_masks: seed must be a non-negative integer, got {seed!r}")
    size = (int(size[0]), int(size[1]))
    if pconv is not None and tuple(pconv.size) != size:
        raise InputError(f"write_eval_masks: PConv masks from {pconv.root} are read at {pconv.size}, expected {size}")
    stems = _stems(test_images)
    sources = list(test_images) if sources is None else list(sources)
    if len(sources) != len(test_images):
        raise ValueError(f"write_eval_masks: {len(sources)} sources for {len(test_images)} test images")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = out_dir / MANIFEST
    manifest.unlink(missing_ok=True)  # an old manifest must not vouch for files being rewritten below

    orders = _pconv_orders(pconv, seed, progress) if pconv is not None else None
    rows = []
    with tqdm(total=len(EVAL_GROUPS) * len(stems), desc="evaluation masks", disable=not progress) as bar:
        for group, (lo, hi) in EVAL_GROUPS.items():
            for i, (image, stem, image_source) in enumerate(zip(test_images, stems, sources)):
                if orders is not None:
                    index = int(orders[group][i % len(orders[group])])
                    keep, source = pconv.load(index), pconv.paths[index].relative_to(pconv.root).as_posix()
                else:
                    keep, source = mask_with_ratio(size, lo, hi, _rng(seed, group, stem)), "generated"
                ratio = hole_ratio(keep)
                if not lo <= ratio < hi:  # a broken generator or folder must not leak into the protocol
                    raise MaskError(f"mask for {image!r} in group {group} has hole ratio {ratio}, outside [{lo}, {hi})")
                relative = f"{group}/{stem}.png"
                write_mask(out_dir / relative, keep)
                rows.append({"image": image, "mask": relative, "ratio": ratio, "group": group, "source": source,
                             "image_source": image_source})
                bar.update()
    atomic_write_text(manifest, pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(index=False, lineterminator="\n"))
    return manifest


def read_manifest(out_dir: Path) -> pd.DataFrame:
    """The manifest of an evaluation-mask folder; an error names a missing manifest, column or mask file."""
    path = Path(out_dir) / MANIFEST
    frame = read_manifest_csv(path, "evaluation-mask manifest", "`put masks`", "run the `put masks` stage first",
                              COLUMNS, {"image": str, "mask": str, "group": str, "source": str, "image_source": str},
                              MaskError)
    frame["ratio"] = frame["ratio"].astype(float)
    absent = [m for m in frame["mask"] if not (path.parent / m).is_file()]
    if absent:
        raise MaskError(f"{path}: {len(absent)} listed mask file(s) missing, e.g. {path.parent / absent[0]}")
    return frame

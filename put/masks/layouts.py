"""The names and layouts of exported evaluation masks (put/masks/export.py): light to import, since the command
line takes its choices from here. What LaMa's code reads (advimman/lama: README.md, configs/prediction/default.yaml,
saicinpainting/evaluation/data.py, bin/predict.py), and so these names: docs/pipeline.md, "Exporting the evaluation
masks".
"""

from __future__ import annotations

import re

FORMATS: tuple[str, ...] = ("lama", "folder")
HOLE_VALUES: tuple[int, ...] = (255, 0)  # the grey level of a hole pixel in an exported mask; the rest is the other
# LaMa's README names masks `[image name]_maskXXX[image suffix]`; its predict config's image suffix is `.png`.
LAMA_MASK_SUFFIX = "_mask001"


def exported_name(index: int, stem: str) -> str:
    """A test image's exported file stem: its position (unique even where two stems differ only in what is
    replaced) and its stem with "mask" spelled "msk", since LaMa takes every `*mask*.png` for a mask and cuts
    the image name at the last `_mask`."""
    return f"{index:05d}_{re.sub('mask', 'msk', stem, flags=re.IGNORECASE)}"


def layout(fmt: str, group: str, name: str) -> tuple[str, str, str]:
    """(image file, mask file, result file) of one pair, relative to the export folder, in the layout `fmt`. The
    result file is the name its completed image bears under a folder of results: LaMa's bin/predict.py names a
    result after its mask (the mask's path under `indir`, extension `.png`); other tools, run on a group's
    images/ and masks/ with their output in <results>/<group>/, after the image."""
    if fmt == "lama":
        mask = f"{group}/{name}{LAMA_MASK_SUFFIX}.png"
        return f"{group}/{name}.png", mask, mask
    return f"{group}/images/{name}.png", f"{group}/masks/{name}.png", f"{group}/{name}.png"

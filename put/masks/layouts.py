"""The names and layouts of exported evaluation masks, light to import for the command line. Why these names:
docs/pipeline.md, "Exporting the evaluation masks" (LaMa); docs/external.md, "Exporting for LaMa, MAT and ICT".
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from put.config.external import SAMPLE_INFIX

HOLE_VALUES: tuple[int, ...] = (255, 0)  # the grey level of a hole pixel in an exported mask; the rest is the other
# Formats whose reader fixes the polarity: the hole value they take, and the line of their code that reads it.
FIXED_HOLE_VALUE: dict[str, tuple[int, str]] = {
    # LaMa's bin/predict.py takes every non-zero mask pixel as hole: a black-hole mask would inpaint the rest.
    "lama": (255, "LaMa reads mask > 0 as hole"),
    # ICT: Transformer/inference.py:101-104 (`convert("L")`, `/255.`, `y>0.5`, then `a_tensor*=(1-b_tensor)`:
    # 1 = hole) and Guided_Upsample/src/dataset_my.py:177-180 (`convert("RGB")`, `(mask > 0)`).
    "ict": (255, "ICT reads mask > 0.5 (its transformer) and mask > 0 (its upsampler) as hole"),
}
# LaMa's README names masks `[image name]_maskXXX[image suffix]`; its predict config's image suffix is `.png`.
LAMA_MASK_SUFFIX = "_mask001"
# ICT's Guided_Upsample/src/Guided_Upsampler.py:208 names sample j of image `name`
# `name[:-4] + "_%d" % (index % condition_num) + ".png"`: `<name>_0.png` ... `<name>_<k-1>.png`.
ICT_SAMPLE = "_{k}"


def exported_name(index: int, stem: str) -> str:
    """A test image's exported file stem: its position (unique even where two stems differ only in what is
    replaced) and its stem with "mask" spelled "msk", since LaMa takes every `*mask*.png` for a mask and cuts
    the image name at the last `_mask`."""
    return f"{index:05d}_{re.sub('mask', 'msk', stem, flags=re.IGNORECASE)}"


def layout(fmt: str, group: str, name: str) -> tuple[str, str, str]:
    """(image file, mask file, result file) of one pair, relative to the export folder, in layout `fmt`. Results
    (the first sample's) are named as each tool names them: LaMa after the mask (bin/predict.py), ICT
    `<name>_0.png` (Guided_Upsampler.py:208, run.py:86), others after the image."""
    if fmt == "lama":
        mask = f"{group}/{name}{LAMA_MASK_SUFFIX}.png"
        return f"{group}/{name}.png", mask, mask
    image, mask = f"{group}/images/{name}.png", f"{group}/masks/{name}.png"
    if fmt == "ict":  # the same names in images/ and masks/: inference.py:77-78,90 pairs them by sorted name
        return image, mask, f"{group}/{name}{ICT_SAMPLE.format(k=0)}.png"
    return image, mask, f"{group}/{name}.png"


def sample_file(fmt: str, result_file: str, k: int) -> str:
    """The file of sample `k` (0, 1, ...) of a method with several results per input, from its `result_file`:
    ICT numbers its samples itself (`<name>_<k>.png`, Guided_Upsampler.py:208); any other, `<stem>_s<k>.png`."""
    path = PurePosixPath(result_file)
    if fmt == "ict":
        stem = path.stem.removesuffix(ICT_SAMPLE.format(k=0))
        return str(path.with_name(f"{stem}{ICT_SAMPLE.format(k=k)}.png"))
    return str(path.with_name(f"{path.stem}{SAMPLE_INFIX}{k}.png"))

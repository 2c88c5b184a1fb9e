"""The scale benchmark's data: n synthetic images in the ImageNet layout, each its own source (a `data.sources`
CSV, docs/cluster.md), and a workspace's params.yaml. Each image depends on (seed, number) only, so the smaller
sizes' images are the larger's first ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from PIL import Image

from put.config.external import EXTERNAL_PREFIX

CLASSES = 1000  # training images spread over ImageNet's 1000 class folders, as a real root is
SOURCES_FILE = "sources.csv"
METHOD = "telea"  # the built-in method that stands in for sampling (one result per mask, CPU)
LABEL = EXTERNAL_PREFIX + METHOD


def picture(seed: int, number: int, size: int) -> Image.Image:
    """A smooth random picture with fine noise (a JPEG of a photograph's size, not a flat one), reproducible."""
    rng = np.random.default_rng([seed, number])
    coarse = Image.fromarray(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)).resize((size, size),
                                                                                       Image.Resampling.BICUBIC)
    noisy = np.asarray(coarse, dtype=np.int16) + rng.integers(-12, 13, (size, size, 3), dtype=np.int16)
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def image_paths(train: int, test: int) -> tuple[list[str], list[str]]:
    """The images' paths under the data root: train/n<class>/<number>.JPEG and val/<number>.JPEG."""
    return ([f"train/n{i % CLASSES:08d}/{i:08d}.JPEG" for i in range(train)],
            [f"val/ILSVRC2012_val_{i:08d}.JPEG" for i in range(test)])


def fabricate(root: Path, train: int, test: int, size: int, seed: int = 0) -> Path:
    """Write the images (those already there are kept: a size's images are the next size's first) and the sources
    CSV; returns the CSV's path."""
    root = Path(root)
    train_paths, test_paths = image_paths(train, test)
    for number, name in enumerate([*train_paths, *test_paths]):
        path = root / name
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            # test images are numbered after every training image of the largest size, so no two are alike
            picture(seed, number if number < train else 10 ** 8 + number - train, size).save(path, quality=90)
    csv = root / SOURCES_FILE
    with open(csv, "w") as f:
        f.write("path,source\n")
        f.writelines(f"{name},{name.rsplit('/', 1)[1].split('.')[0]}\n" for name in [*train_paths, *test_paths])
    return csv


def write_params(workspace: Path, preset: str, root: Path, test: int, sources: Path) -> Path:
    """The workspace's params.yaml: the preset on the fabricated root, `test` evaluation images, generated
    evaluation masks (no PConv set here) and the built-in Telea method as the one `external` entry."""
    params = {"preset": preset,
              "overrides": {"data": {"root": str(root), "eval_count": test, "sources": str(sources)},
                            "masks": {"pconv_root": None}},
              "external": {METHOD: {"label": "Telea", "citation": "Telea 2004", "method": METHOD}}}
    path = Path(workspace) / "params.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path

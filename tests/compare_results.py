"""Evaluation results the `put compare` tests write (tests/test_compare.py, test_sweeps.py, test_tracking_logins.py):
per-image values of a variant with a planted PSNR shift, the evaluate stage's files of a result, and the
evaluate.py of a one-stage DVC pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from put.config.evaluation import MetricProtocol
from put.config.paths import METRICS_FILE, metrics_images_file, metrics_info_file, pasted_metrics_file, path_of

# 60 sources: above min_units (50), so every cell has an interval; resamples enough for the expanded 95% level.
PROTOCOL = MetricProtocol(bootstrap_resamples=3000)
SOURCES, PER_SOURCE = 60, 2
TABLE_CELLS = [(mode, group) for mode in ("all", "k50") for group in ("20-40", "40-60", "10-60")]


def per_image(shift: float = 0.0, seed: int = 0, top_k: int = 50, images: int = SOURCES * PER_SOURCE) -> pd.DataFrame:
    """A variant's per-image values: the same images and sources for every seed, a source effect shared by all
    variants (what pairing removes), noise of the variant's own, and `shift` added to its PSNR."""
    base = np.random.default_rng(1)
    effect = base.normal(0, 2, SOURCES)
    noise = np.random.default_rng(seed)
    rows = []
    for mode, group in TABLE_CELLS:
        mode = f"k{top_k}" if mode == "k50" else mode
        for i in range(images):
            source = i // PER_SOURCE
            rows.append({"mode": mode, "group": group, "image": f"data/demo/splits/images/test/img_{i:03d}.png",
                         "source": f"photo_{source:02d}", "sample": 0,
                         "psnr": 20 + effect[source] + noise.normal(0, 0.5) + shift,
                         "ssim": 0.6 + effect[source] / 20 + noise.normal(0, 0.01),
                         "mae": 0.2 - effect[source] / 40 + noise.normal(0, 0.005), "lpips": np.nan})
    return pd.DataFrame(rows)


def write_result(root: Path, label: str, frame: pd.DataFrame, protocol: MetricProtocol = PROTOCOL,
                 masks: str | None = "a1b2", under: str = "demo", pasted: bool = False, **info) -> Path:
    """The evaluate stage's per-image file and record of `label`, under `root` as in a workspace, at preset
    `under`'s paths (`pasted`: its files under the pasted rule, in `pasted/`, as the stage writes them beside the
    main ones)."""
    metrics = root / path_of(METRICS_FILE, under, label)
    if pasted:
        metrics, protocol = pasted_metrics_file(metrics), protocol.model_copy(update={"known_pixels": "pasted"})
    metrics.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(metrics_images_file(metrics), index=False)
    record = {"variant": label, "seed": 0, "preset": under, "protocol": protocol.model_dump(),
              "sampling": {"top_k": 50, "temperature": 1.0}, "groups": {"20-40": [0.2, 0.4]},
              **({"masks": {"manifest_sha256": masks}} if masks else {}), **info}
    metrics_info_file(metrics).write_text(json.dumps(record))
    return metrics


# The evaluate.py of a one-stage DVC pipeline: an evaluation's files from the parameter top_k (format it with
# the metric protocol).
STAGE_SCRIPT = """import json, sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

top_k = yaml.safe_load(open("params.yaml"))["top_k"]
rng = np.random.default_rng(top_k)
rows = [{{"mode": mode, "group": "10-60", "image": f"img_{{i:03d}}.png", "source": f"photo_{{i // 2}}", "sample": 0,
          "psnr": 20 + i % 7 + rng.normal(0, 0.3) + (top_k < 50 and mode != "all") * 0.5,
          "ssim": 0.6 + rng.normal(0, 0.01), "mae": 0.2 + rng.normal(0, 0.01), "lpips": None}}
         for mode in ("all", f"k{{top_k}}") for i in range(120)]
out = Path("results/demo/metrics")
out.mkdir(parents=True, exist_ok=True)
pd.DataFrame(rows).to_csv(out / "put_images.csv", index=False)
info = {{"variant": "put", "seed": 0, "preset": "demo", "protocol": {protocol}, "sampling": {{"top_k": top_k}},
        "groups": {{"10-60": [0.1, 0.6]}}, "masks": {{"manifest_sha256": "a1b2"}}}}
(out / "put_info.json").write_text(json.dumps(info))
"""

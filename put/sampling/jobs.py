"""The results a sampling of the evaluation masks makes, and the manifest of a samples folder: for each table group
one deterministic result (PUT_all) and one top-K result (PUT_K) per test image, for each fine bin
`diversity_samples` top-K results per image. Files: <out>/<mode>/<group>/<stem>[_<i>].png and <out>/samples.csv."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from put.config.bins import FINE_BINS, TABLE_GROUPS
from put.io.files import read_manifest_csv

TABLE_MODES = ("all", "topk")
SAMPLES_MANIFEST = "samples.csv"
SAMPLE_COLUMNS = ("image", "mask", "group", "mode", "sample", "output")


def sampling_jobs(manifest: pd.DataFrame, diversity_samples: int, diversity_images: int | None) -> pd.DataFrame:
    """One row per result to produce: image, mask, group, mode, sample, output (relative path)."""
    stems = manifest["mask"].map(lambda m: Path(m).stem)
    table = manifest[manifest["group"].isin(TABLE_GROUPS)].assign(stem=stems)
    jobs = [table.assign(mode=mode, sample=0) for mode in TABLE_MODES]
    fine = manifest[manifest["group"].isin(FINE_BINS)].assign(stem=stems)
    if diversity_images is not None:
        fine = fine[fine["image"].isin(fine["image"].drop_duplicates().head(diversity_images))]
    jobs += [fine.assign(mode="diversity", sample=i) for i in range(diversity_samples)]
    jobs = pd.concat(jobs, ignore_index=True)
    jobs["output"] = [f"{m}/{g}/{s}_{i:02d}.png" if m == "diversity" else f"{m}/{g}/{s}.png"
                      for m, g, s, i in zip(jobs["mode"], jobs["group"], jobs["stem"], jobs["sample"])]
    return jobs.drop(columns=["stem"])


def read_samples(samples: Path) -> pd.DataFrame:
    """The manifest of a samples folder; an error names a missing manifest or column."""
    return read_manifest_csv(Path(samples) / SAMPLES_MANIFEST, "samples manifest", "`put sample`",
                             "expected the folder written by `put sample`", SAMPLE_COLUMNS,
                             {"image": str, "mask": str, "group": str, "mode": str, "output": str})

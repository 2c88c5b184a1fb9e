"""Stage `external`: one entry of params.yaml's `external` turned into a samples folder like `put sample`'s, which
the evaluate stage scores: another codebase's images, checked and converted, or a built-in classical method run on
the frozen masks (docs/external.md). Results that hold the ground truth in the hole on more than a few percent of a
group's images are refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from put.config.external import EXTERNAL_PREFIX, ExternalMethod
from put.config.params import Params, ParamsError
from put.data.images import open_image, read_rgb, write_png
from put.external.builtin import inpaint
from put.external.folder import check_apart, check_present, conversion_notice, raise_wrong, read_result
from put.external.leaks import Agreements, hole_agreement, leak_notice, other_masks_notice
from put.external.modes import is_grey
from put.io.files import atomic_dir, atomic_write_text
from put.masks.evaluation import MANIFEST, read_manifest
from put.masks.export import result_files
from put.masks.io import read_mask
from put.masks.layouts import sample_file
from put.sampling.jobs import SAMPLES_MANIFEST, sampling_jobs
from put.tracking.base import Tracker, tracked
from put.tracking.factory import stage_tracker


def entry_of(params: Params, label: str) -> tuple[str, ExternalMethod]:
    name = label.removeprefix(EXTERNAL_PREFIX)
    if not label.startswith(EXTERNAL_PREFIX) or name not in params.external:
        raise ParamsError(f"{params.source}: external: no entry for {label!r} (entries: "
                          f"{', '.join(params.external) or 'none'})")
    return name, params.external[name]


def external_jobs(params: Params, entry: ExternalMethod, masks: Path) -> pd.DataFrame:
    """The rows `put sample` would write for this method, each with its source file (`result`). A deterministic
    method fills mode all, a stochastic one mode topk (first sample); the fine bins take every sample."""
    jobs = sampling_jobs(read_manifest(masks), entry.samples, params.resolved().sample.diversity_images)
    jobs = jobs[jobs["mode"] != ("all" if entry.stochastic else "topk")].reset_index(drop=True)
    if entry.folder is not None:
        names = result_files(masks, entry.format)
        jobs["result"] = [names[m] if not entry.stochastic else sample_file(entry.format, names[m], k)
                          for m, k in zip(jobs["mask"], jobs["sample"])]
    return jobs


def run_external(params: Params, label: str, masks: Path, out: Path, tags: dict[str, str] | None = None) -> Path:
    with tracked(stage_tracker(params.preset, label, "external", params.dag_id(), tags,
                               labels=params.evaluated_labels(), seed=params.seed)) as tracker:
        manifest = write_external(params, label, Path(masks), Path(out))
        log_outputs(tracker, params, label, Path(masks))
        return manifest


def log_outputs(tracker: Tracker, params: Params, label: str, masks: Path) -> None:
    """The run, from its files: the entry's settings and the frozen masks' manifest as dataset."""
    _, entry = entry_of(params, label)
    tracker.log_params({k: v for k, v in entry.model_dump().items() if v is not None})
    tracker.log_dataset(masks / MANIFEST, f"{params.preset} test masks", "evaluation")


def write_external(params: Params, label: str, masks: Path, out: Path) -> Path:
    """The samples folder `out` (written whole, or not at all: a missing or wrong file leaves it as it was). What
    was converted, and any copy of the ground truth within the share allowed, is printed in one line each."""
    _, entry = entry_of(params, label)
    jobs = external_jobs(params, entry, masks)
    first_gt = masks / "gt" / f"{Path(jobs['mask'].iloc[0]).stem}.png"
    with open_image(first_gt) as opened:
        size = (opened.height, opened.width)
    folder = Path(entry.folder or ".")
    if entry.folder is not None:
        check_apart(folder, out)
        check_present(folder, jobs["result"])  # before reading any image
    wrong: dict[str, str] = {}
    converted: dict[str, list[str]] = {}  # lossless conversion -> the results that took it
    agreements: Agreements = {}  # how much of the ground truth each result holds in the hole, by mask group
    with atomic_dir(out) as staging:
        # One row per result file: a pair's mask lies in one group, and only its sample k is the row's.
        for row in tqdm(jobs.itertuples(), total=len(jobs), desc=f"external {label}", unit="img"):
            gt = read_rgb(masks / "gt" / f"{Path(row.mask).stem}.png")
            hole = read_mask(masks / row.mask, "hole-white", size)[0].numpy() == 0
            if entry.folder is not None:
                read = read_result(folder / row.result, size, is_grey(gt))
                if isinstance(read, str):
                    wrong[row.result] = read
                    continue
                rgb, conversion = read
                if conversion is not None:
                    converted.setdefault(conversion, []).append(row.result)
                if (agreement := hole_agreement(rgb, gt, hole)) is not None:
                    agreements.setdefault(row.group, {})[row.result] = agreement
            else:
                rgb = inpaint(entry.method, gt, hole)
            write_png(staging / row.output, rgb)
        # nothing half-converted, nothing leaked: the folder is dropped
        raise_wrong(folder, wrong, len(jobs))
        notices = [leak_notice(folder, agreements, jobs["group"].value_counts().to_dict()),
                   other_masks_notice(folder, agreements), conversion_notice(folder, converted, len(jobs))]
        columns = [c for c in jobs.columns if c != "result"]
        atomic_write_text(staging / SAMPLES_MANIFEST, jobs[columns].to_csv(index=False))
    for notice in filter(None, notices):
        print(f"put external: note: {notice}", file=sys.stderr)
    return out / SAMPLES_MANIFEST

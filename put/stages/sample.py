"""Stage `sample`: one variant's inpainting results on the frozen evaluation masks.

Per table group and test image: PUT_all and PUT_K; per fine bin, `diversity_samples` top-K results.
Files: <out>/<mode>/<group>/<stem>[_<i>].png and <out>/samples.csv.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from put.config.params import Params
from put.data.images import read_image, read_rgb, write_image
from put.io.files import atomic_dir, atomic_write_text
from put.masks.evaluation import MANIFEST, read_manifest
from put.masks.io import read_mask
from put.models.checkpoint import load_put_model
from put.models.device import autocast
from put.models.seeding import derive_seed
from put.sampling.engine import Sampler, inpaint_batch
from put.sampling.jobs import SAMPLES_MANIFEST, TABLE_MODES, read_samples, sampling_jobs
from put.sampling.schedules import SamplingOptions
from put.tracking.base import Tracker, tracked
from put.tracking.factory import stage_tracker

# Deterministic all-at-once (PUT_all), top-K sampling (PUT_K), and the fine-bin diversity samples.
MODE_SEED_KEYS = {"all": 0, "topk": 1, "diversity": 2}


def preview(jobs: pd.DataFrame, masks: Path, out_dir: Path, rows: int = 4) -> np.ndarray:
    """Masked input | PUT_all | PUT_K | ground truth for a few 40-60% inputs, as one uint8 image."""
    picked = jobs[(jobs["group"] == "40-60") & jobs["mode"].isin(TABLE_MODES)]
    lines = []
    for _, results in list(picked.groupby("image", sort=True))[:rows]:
        mask = results["mask"].iloc[0]
        gt = read_rgb(masks / "gt" / f"{Path(mask).stem}.png")
        hole = read_mask(masks / mask)[0].numpy() == 0
        masked = np.where(hole[..., None], 255, gt).astype(np.uint8)
        outs = [read_rgb(out_dir / o) for o in results.sort_values("mode")["output"]]
        lines.append(np.concatenate([masked, *outs, gt], axis=1))
    return np.concatenate(lines, axis=0)


def run_sample(params: Params, variant: str, transformer: Path, masks: Path, out_dir: Path,
               device: str | None = None, tags: dict[str, str] | None = None, pvqvae: Path | None = None) -> Path:
    with tracked(stage_tracker(params.preset, variant, "sample", params.dag_id(), tags,
                               labels=params.evaluated_labels(), system_metrics=True, seed=params.seed)) as tracker:
        manifest = sample_variant(params, variant, transformer, masks, out_dir, device, pvqvae)
        log_outputs(tracker, params, Path(masks), Path(out_dir))
        return manifest


def log_outputs(tracker: Tracker, params: Params, masks: Path, out_dir: Path) -> None:
    """The sampling's run, from its files (the stage at its end; `put track` when DVC skipped the stage): its
    parameters, the frozen masks' manifest as dataset, the transformer it read, a preview of the results."""
    tracker.log_params(params.resolved().sample.model_dump())
    tracker.log_dataset(masks / MANIFEST, f"{params.preset} test masks", "evaluation")
    tracker.use_model("transformer")
    tracker.log_image(preview(read_samples(out_dir), masks, out_dir), "preview_40-60.png")


def sample_variant(params: Params, variant: str, transformer: Path, masks: Path, out_dir: Path,
                   device: str | None = None, pvqvae: Path | None = None) -> Path:
    preset = params.resolved()
    cfg = preset.sample
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = load_put_model(transformer, pvqvae, device=device, variant=params.checkpoint_variant(variant),
                           label=variant, generation=params.label_generation(variant))
    masks, out_dir = Path(masks), Path(out_dir)
    jobs = sampling_jobs(read_manifest(masks), cfg.diversity_samples, cfg.diversity_images)
    options = SamplingOptions(top_k=cfg.top_k, temperature=cfg.temperature, tokens_per_step=cfg.tokens_per_step,
                              position_rule=cfg.position_rule, schedule=cfg.schedule,
                              schedule_scope=cfg.schedule_scope)
    size = (model.config.image_size, model.config.image_size)
    gt = {image: read_image(masks / "gt" / f"{Path(mask).stem}.png")
          for image, mask in zip(jobs["image"], jobs["mask"])}

    sampler = Sampler(model)  # this stage's engines, reused by its batches
    with atomic_dir(out_dir) as staging, tqdm(total=len(jobs), desc=f"sample {variant}", unit="img") as progress:
        for mode, rows in jobs.groupby("mode", sort=True):
            for start in range(0, len(rows), cfg.batch_size):
                batch = rows.iloc[start:start + cfg.batch_size]
                images = torch.stack([gt[image] for image in batch["image"]]).to(device)
                keep = torch.stack([read_mask(masks / m, "hole-white", size) for m in batch["mask"]]).to(device)
                # A seed per batch, keyed by the mode and the batch's first row: reproducible for a seed.
                seed = derive_seed(cfg.seed, MODE_SEED_KEYS[mode], start)
                with autocast(torch.device(device)):
                    results = inpaint_batch(model, images, keep, "all" if mode == "all" else "iterative", options,
                                            seed, composite=cfg.composite, engine=sampler)
                for output, result in zip(batch["output"], results.float().cpu()):
                    write_image(staging / output, result)
                progress.update(len(batch))
        atomic_write_text(staging / SAMPLES_MANIFEST, jobs.to_csv(index=False))
    return out_dir / SAMPLES_MANIFEST



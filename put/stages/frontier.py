"""Stage `frontier`: what faster sampling costs the full model in quality.

Each sampling setting (N tokens per step, a cosine confidence schedule over S steps, each at every top-K,
and argmax all at once) inpaints the evaluation masks of the chosen groups; the stage times it on the device
at hand, counts the transformer forward passes each image needs (from `step_counts`, the function the
sampler itself follows) and measures PSNR/SSIM/MAE, LPIPS diversity and FID (the last two where their
weights exist) with the evaluate stage's code, under the same protocol.

Files in `out`: metrics.json (numbers only, {setting: {group: {metric: value}}}, for `dvc metrics`),
frontier.csv (one row per setting and group, with why a value is absent), frontier.tex and frontier.png; the
inpainted images in a separate folder, <samples>/<setting>/<group>/<stem>_<sample>.png.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from put.bench import device_name, synchronize
from put.config.evaluation import FrontierConfig, MetricProtocol, parse_schedule
from put.config.params import Params
from put.data.images import read_image, write_image
from put.fileio import atomic_write_text
from put.masks.evaluation import MANIFEST, read_manifest
from put.masks.io import read_mask
from put.metrics import MetricValue
from put.metrics.diversity import diversity_lpips
from put.model_io import load_put_model
from put import paths
from put.models.put_model import PUTModel
from put.report.frontier import FRONTIER_FIGURE, FRONTIER_TABLE, QUALITY, frontier_table, plot_frontier
from put.report.tables import write_latex
from put.sampling import SamplingOptions, step_counts
from put.sampling_engine import inpaint_batch
from put.seeding import derive_seed
from put.stages.evaluate import Cells, files_fid, pixel_metrics
from put.tracking.names import metric_names
from put.tracking.runs import stage_tracker, tracked
from put.tracking.source import git_commit
from put.train.common import autocast

METRICS_FILE = Path(paths.FRONTIER_METRICS).name
CSV_FILE = Path(paths.FRONTIER_CSV).name
FAMILY_SEED = {"argmax": 0, "tokens_per_step": 1, "cosine": 2, "schedule": 3}
VALUES = ("forward_passes", "seconds_per_image", *QUALITY)  # per setting and group (metrics.json: no counts)


@dataclass(frozen=True)
class Setting:
    name: str  # key in the metrics file
    label: str  # for people
    family: str  # argmax | tokens_per_step | cosine | schedule (the TPAMI release's)
    value: int  # tokens per step, or the schedule's steps (1 for argmax)
    options: SamplingOptions | None  # None: argmax, all positions from one forward

    @property
    def top_k(self) -> int | None:
        return None if self.options is None else self.options.top_k


def settings(config: FrontierConfig, sample: SamplingOptions) -> list[Setting]:
    """Every setting to measure, argmax first; temperature and position rule are the preset's."""
    found = [Setting("argmax", "argmax, all at once", "argmax", 1, None)] if config.argmax else []
    for k in config.top_k:
        base = dict(top_k=k, temperature=sample.temperature, position_rule=sample.position_rule)
        found += [Setting(f"tps{n}_k{k}", f"{n} token{'s' * (n > 1)}/step", "tokens_per_step", n,
                          SamplingOptions(tokens_per_step=n, **base)) for n in config.tokens_per_step]
        found += [Setting(f"cosine{s}_k{k}", f"cosine, {s} steps", "cosine", s, SamplingOptions(steps=s, **base))
                  for s in config.schedule_steps]
        found += [Setting(f"{name}_k{k}", "TPAMI {}, {} steps".format(*parse_schedule(name)), "schedule",
                          parse_schedule(name)[1], SamplingOptions(schedule=name, **base)) for name in config.schedules]
    return found


def forward_passes(masked: torch.Tensor, setting: Setting) -> torch.Tensor:
    """(B,) masked patches -> (B,) transformer forwards each image needs on its own (batch 1)."""
    if setting.options is None:
        return torch.ones_like(masked)
    options = setting.options
    return (step_counts(masked, options.tokens_per_step, options.steps, options.schedule) > 0).sum(0)


def frontier_inputs(masks: Path, config: FrontierConfig) -> pd.DataFrame:
    """image, mask, group, stem: the first `config.images` test images (by name) of each chosen group."""
    manifest = read_manifest(masks)
    rows = manifest[manifest["group"].isin(config.groups)].sort_values(["group", "image"])
    if config.images is not None:
        rows = rows.groupby("group", sort=False).head(config.images)
    return rows.assign(stem=rows["mask"].map(lambda m: Path(m).stem)).reset_index(drop=True)


def diversity(setting: Setting, groups: list[list[Path]], protocol: MetricProtocol, samples: int,
              seed: int) -> MetricValue:
    if setting.options is None:
        return MetricValue.missing("argmax is deterministic: every sample of an input is the same")
    if samples * (samples - 1) // 2 < protocol.lpips_pairs:
        return MetricValue.missing(f"LPIPS diversity needs {protocol.lpips_pairs} distinct sample pairs per input; "
                                   f"frontier.samples = {samples} gives {samples * (samples - 1) // 2}")
    return diversity_lpips(groups, protocol, seed)


def measure_setting(model: PUTModel, setting: Setting, inputs: pd.DataFrame, masks: Path, samples_dir: Path,
                    config: FrontierConfig, composite: bool, device: torch.device) -> tuple[pd.DataFrame, float]:
    """Inpaint every input `samples` times (once for argmax), writing each result. Returns one row per result
    (its file, target and forward passes) and the seconds per image: the best of `timing_repeats` timed runs
    of the first batch, each from the same seed."""
    samples = 1 if setting.options is None else config.samples
    rows = pd.concat([inputs.assign(sample=i) for i in range(samples)], ignore_index=True)
    rows["result"] = [samples_dir / setting.name / g / f"{s}_{i:02d}.png"
                      for g, s, i in zip(rows["group"], rows["stem"], rows["sample"])]
    rows["target"] = [masks / "gt" / f"{s}.png" for s in rows["stem"]]
    size = (model.config.image_size, model.config.image_size)
    mode = "all" if setting.options is None else "iterative"
    passes = []

    def inpaint(images: torch.Tensor, keep: torch.Tensor, start: int) -> tuple[torch.Tensor, float]:
        seed = derive_seed(config.seed, FAMILY_SEED[setting.family], setting.value, setting.top_k or 0, start)
        synchronize(device)
        began = time.perf_counter()
        with autocast(device):
            results = inpaint_batch(model, images, keep, mode, setting.options or SamplingOptions(), seed,
                                    composite=composite)
        synchronize(device)
        return results, time.perf_counter() - began

    for start in range(0, len(rows), config.batch_size):
        batch = rows.iloc[start:start + config.batch_size]
        images = torch.stack([read_image(t) for t in batch["target"]]).to(device)
        keep = torch.stack([read_mask(masks / m, "hole-white", size) for m in batch["mask"]]).to(device)
        results, seconds = inpaint(images, keep, start)
        if start == 0:
            repeats = [inpaint(images, keep, start)[1] for _ in range(config.timing_repeats - 1)]
            per_image = min(seconds, *repeats) / len(batch)
        masked = (~model.pvqvae.patch_known(keep)).flatten(1).sum(1)
        passes += forward_passes(masked, setting).tolist()
        for path, result in zip(batch["result"], results.float().cpu()):
            write_image(path, result)
    return rows.assign(forward_passes=passes), per_image


def measure_frontier(params: Params, variant: str, checkpoint: Path, masks: Path, samples_dir: Path,
                     device: str | None = None, pvqvae: Path | None = None) -> tuple[pd.DataFrame, Cells]:
    preset = params.resolved()
    config, protocol = preset.frontier, preset.evaluate
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = load_put_model(checkpoint, pvqvae, device=str(dev), variant=params.checkpoint_variant(variant),
                           label=variant, generation=params.label_generation(variant))
    masks, samples_dir = Path(masks), Path(samples_dir)
    inputs = frontier_inputs(masks, config)
    sample = SamplingOptions(temperature=preset.sample.temperature, position_rule=preset.sample.position_rule)
    chosen = settings(config, sample)
    with tempfile.TemporaryDirectory() as tmp:  # warm-up (threads, allocator): the first timed setting must not pay
        measure_setting(model, chosen[0], inputs.head(config.batch_size), masks, Path(tmp), config,
                        preset.sample.composite, dev)

    cells, rows = Cells(), []
    for setting in tqdm(chosen, desc=f"frontier {variant}", unit="setting"):
        results, seconds = measure_setting(model, setting, inputs, masks, samples_dir, config,
                                           preset.sample.composite, dev)
        for group, part in results.groupby("group", sort=False):
            keys = (setting.name, group)
            first = part[part["sample"] == 0]
            cells.put(keys, "forward_passes", float(first["forward_passes"].mean()))
            cells.put(keys, "seconds_per_image", seconds)
            for metric, value in pixel_metrics(list(part["result"]), list(part["target"]), protocol).items():
                cells.put(keys, metric, value)
            per_input = [list(g["result"]) for _, g in part.groupby("image", sort=True)]
            cells.put(keys, "lpips", diversity(setting, per_input, protocol, config.samples, preset.sample.seed))
            cells.put(keys, "fid", files_fid(list(first["result"]), list(first["target"]), protocol))
            measured = cells.values[setting.name][group]
            rows.append({"setting": setting.name, "label": setting.label, "family": setting.family,
                         "value": setting.value, "top_k": setting.top_k, "group": group, "n": len(first),
                         **{m: measured.get(m, float("nan")) for m in VALUES},
                         **{f"{m}_unavailable": cells.unavailable.get(f"{setting.name}/{group}/{m}", "")
                            for m in QUALITY},
                         "samples": int(part["sample"].max()) + 1, "batch_size": config.batch_size,
                         "device": device_name(dev), "precision": "bf16-autocast" if dev.type == "cuda" else "fp32"})
    return pd.DataFrame(rows), cells


def run_frontier(params: Params, variant: str, checkpoint: Path, masks: Path, out_dir: Path, samples_dir: Path,
                 device: str | None = None, tags: dict[str, str] | None = None,
                 pvqvae: Path | None = None) -> pd.DataFrame:
    out_dir = Path(out_dir)
    command = "python -m put " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "put frontier"
    with tracked(stage_tracker(params.preset, variant, "frontier", params.dag_id(), tags,
                               labels=params.evaluated_labels(), system_metrics=True)) as tracker:
        tracker.log_params(params.resolved().frontier.model_dump())
        tracker.log_dataset(Path(masks) / MANIFEST, f"{params.preset} test masks", "evaluation")
        tracker.use_model("transformer")
        started = time.perf_counter()
        frame, cells = measure_frontier(params, variant, checkpoint, masks, samples_dir, device, pvqvae)
        atomic_write_text(out_dir / CSV_FILE, frame.to_csv(index=False))
        write_latex(frontier_table(frame, params.preset, variant), out_dir / FRONTIER_TABLE, None, "tab:frontier", command,
                    git_commit() or "unknown")
        plot_frontier(frame, out_dir / FRONTIER_FIGURE)
        atomic_write_text(out_dir / METRICS_FILE, json.dumps(cells.values, indent=2, allow_nan=False) + "\n")
        tracker.log_metrics(metric_names(cells.values), step=0)  # <setting>/<group>/<metric>
        tracker.log_metrics({"stage/wall_seconds": time.perf_counter() - started}, step=0)
        for name in (METRICS_FILE, CSV_FILE, FRONTIER_TABLE, FRONTIER_FIGURE):
            tracker.log_artifact(out_dir / name)
        return frame

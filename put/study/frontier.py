"""The frontier study: what faster sampling costs the full model in quality. Each setting is timed, counted in
forward passes and measured, with the paired interval of its difference from the exact schedule (docs/pipeline.md,
"The frontier's files"; docs/statistics.md, "The frontier with its noise")."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from put.config.evaluation import FrontierConfig, MetricProtocol, parse_schedule
from put.config.params import Params
from put.data.images import read_image, write_image
from put.masks.evaluation import read_manifest
from put.masks.io import read_mask
from put.metrics import MetricValue
from put.metrics.cells import Cells
from put.metrics.diversity import diversity_lpips_per_input
from put.metrics.fid import Features, fid_features, fid_of_features
from put.metrics.image import metrics_table
from put.metrics.summary import PIXEL_METRICS, fid_difference, mean_difference
from put.models.checkpoint import load_put_model
from put.models.device import autocast, device_name, precision, synchronize
from put.models.put_model import PUTModel
from put.models.seeding import derive_seed
from put.report.frontier import DIFFERENCE_COLUMNS, QUALITY
from put.sampling.engine import Sampler, inpaint_batch
from put.sampling.schedules import SamplingOptions, step_counts
from put.stats.bootstrap import Bootstrap, Interval, finite_mean
from put.stats.differences import interval_fields, mark_family

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
    """image, mask, group, stem, source: the first `config.images` test images (by name) of each chosen group."""
    manifest = read_manifest(masks).rename(columns={"source": "mask_source", "image_source": "source"})
    rows = manifest[manifest["group"].isin(config.groups)].sort_values(["group", "image"])
    if config.images is not None:
        rows = rows.groupby("group", sort=False).head(config.images)
    return rows.assign(stem=rows["mask"].map(lambda m: Path(m).stem)).reset_index(drop=True)


def diversity(setting: Setting, groups: list[list[Path]], protocol: MetricProtocol, samples: int,
              seed: int) -> np.ndarray | MetricValue:
    """LPIPS diversity per input, or why it is not measured."""
    if setting.options is None:
        return MetricValue.missing("argmax is deterministic: every sample of an input is the same")
    if samples * (samples - 1) // 2 < protocol.lpips_pairs:
        return MetricValue.missing(f"LPIPS diversity needs {protocol.lpips_pairs} distinct sample pairs per input; "
                                   f"frontier.samples = {samples} gives {samples * (samples - 1) // 2}")
    return diversity_lpips_per_input(groups, protocol, seed)


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
    sampler = Sampler(model)  # this setting's engines, reused by its batches

    def inpaint(images: torch.Tensor, keep: torch.Tensor, start: int) -> tuple[torch.Tensor, float]:
        seed = derive_seed(config.seed, FAMILY_SEED[setting.family], setting.value, setting.top_k or 0, start)
        synchronize(device)
        began = time.perf_counter()
        with autocast(device):
            results = inpaint_batch(model, images, keep, mode, setting.options or SamplingOptions(), seed,
                                    composite=composite, engine=sampler)
        synchronize(device)
        return results, time.perf_counter() - began

    for start in range(0, len(rows), config.batch_size):
        batch = rows.iloc[start:start + config.batch_size]
        images = torch.stack([read_image(t) for t in batch["target"]]).to(device)
        keep = torch.stack([read_mask(masks / m, "hole-white", size) for m in batch["mask"]]).to(device)
        results, seconds = inpaint(images, keep, start)
        if start == 0:
            repeats = [inpaint(images, keep, start)[1] for _ in range(config.timing_repeats - 1)]
            per_image = min([seconds, *repeats]) / len(batch)  # timing_repeats 1: no repeat
        masked = (~model.pvqvae.patch_known(keep)).flatten(1).sum(1)
        passes += forward_passes(masked, setting).tolist()
        for path, result in zip(batch["result"], results.float().cpu()):
            write_image(path, result)
    return rows.assign(forward_passes=passes), per_image


@dataclass
class Measured:
    """One setting's results in one mask group: per-result PSNR/SSIM/MAE with each image's source, the Inception
    features of each image's first result and its target, and LPIPS diversity per input (or why not)."""

    per_image: pd.DataFrame
    features: Features | MetricValue
    lpips: pd.DataFrame | MetricValue  # image, source, lpips


def measure_group(setting: Setting, part: pd.DataFrame, protocol: MetricProtocol, samples: int,
                  seed: int) -> Measured:
    values = metrics_table(list(zip(part["result"], part["target"])), protocol)
    per_image = pd.concat([part[["image", "source", "sample"]].reset_index(drop=True), values[list(PIXEL_METRICS)]],
                          axis=1)
    first = part[part["sample"] == 0]
    inputs = list(part.groupby("image", sort=True))
    lpips = diversity(setting, [list(g["result"]) for _, g in inputs], protocol, samples, seed)
    if not isinstance(lpips, MetricValue):
        lpips = pd.DataFrame({"image": [name for name, _ in inputs], "source": [g["source"].iloc[0] for _, g in inputs],
                              "lpips": lpips})
    return Measured(per_image, fid_features(list(first["result"]), list(first["target"]), protocol), lpips)


def values_of(measured: Measured) -> dict[str, MetricValue]:
    """The values of a setting and group (their intervals are the paired ones of `frontier_differences`)."""
    found = {m: MetricValue(finite_mean(measured.per_image[m])) for m in PIXEL_METRICS}
    found["lpips"] = measured.lpips if isinstance(measured.lpips, MetricValue) else \
        MetricValue(finite_mean(measured.lpips["lpips"]))
    return {**found, "fid": fid_of_features(measured.features)}


def reference_of(setting: Setting, chosen: list[Setting], top_k: int) -> str | None:
    """The exact schedule a setting is compared with: one token per step at its K (argmax: at the preset's K, or
    the first measured); None for that schedule itself, or when it was not measured."""
    exact = {s.top_k: s.name for s in chosen if s.family == "tokens_per_step" and s.value == 1}
    k = setting.top_k if setting.top_k is not None else (top_k if top_k in exact else next(iter(exact), None))
    name = exact.get(k)
    return None if name == setting.name else name


def difference(metric: str, a: Measured, b: Measured, boot: Bootstrap,
               fid_boot: Bootstrap) -> tuple[float, Interval] | None:
    """Setting a's value minus its reference b's, with the paired interval over the images' sources; None where
    either has no value."""
    if metric == "fid":
        if isinstance(a.features, MetricValue) or isinstance(b.features, MetricValue):
            return None
        first = a.per_image[a.per_image["sample"] == 0]
        return fid_difference(a.features, b.features, first["source"].to_numpy(), fid_boot)
    if metric == "lpips":
        if isinstance(a.lpips, MetricValue) or isinstance(b.lpips, MetricValue):
            return None
        x, y = a.lpips, b.lpips
    else:
        x, y = a.per_image, b.per_image
    x, y = finite_images(x, y, metric)
    if x.empty:
        return None
    return mean_difference(x[metric], y[metric], x["source"].to_numpy(), y["source"].to_numpy(), boot,
                           x["image"].nunique())


def finite_images(x: pd.DataFrame, y: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both sides without the images where either has a non-finite `metric` (a perfect fill's PSNR): the two
    means are then over the same images. By image, not by row: argmax has one sample where its reference has
    several."""
    bad = pd.concat([frame.loc[~np.isfinite(frame[metric].astype(float)), "image"] for frame in (x, y)])
    return x[~x["image"].isin(bad)], y[~y["image"].isin(bad)]


def frontier_differences(measured: dict[tuple[str, str], Measured], references: dict[str, str | None],
                         protocol: MetricProtocol) -> pd.DataFrame:
    """One row per setting (that has a reference) x group x metric: the paired difference from the reference,
    its interval and p-value, and the p-value adjusted over the whole family, with whether it survives."""
    boot, fid_boot = Bootstrap.of(protocol), Bootstrap.of(protocol, fid=True)
    rows = []
    for (name, group), a in measured.items():
        reference = references[name]
        if reference is None or (reference, group) not in measured:
            continue
        for metric in QUALITY:
            if (found := difference(metric, a, measured[(reference, group)], boot, fid_boot)) is None:
                continue
            value, bounds = found
            fields = interval_fields(bounds)
            rows.append({"setting": name, "group": group, "metric": metric, "reference": reference,
                         "diff": value, "diff_lo": fields.pop("lo"), "diff_hi": fields.pop("hi"), **fields})
    frame = pd.DataFrame(rows, columns=["setting", "group", "metric", "reference", "diff", "diff_lo", "diff_hi", "p",
                                        "resamples", "no_interval"])
    return mark_family(frame, protocol.multiplicity, protocol.interval_level)


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

    cells, rows, measured = Cells(), [], {}
    for setting in tqdm(chosen, desc=f"frontier {variant}", unit="setting"):
        results, seconds = measure_setting(model, setting, inputs, masks, samples_dir, config,
                                           preset.sample.composite, dev)
        for group, part in results.groupby("group", sort=False):
            keys = (setting.name, group)
            first = part[part["sample"] == 0]
            measured[keys] = measure_group(setting, part, protocol, config.samples, preset.sample.seed)
            cells.put(keys, "forward_passes", float(first["forward_passes"].mean()))
            cells.put(keys, "seconds_per_image", seconds)
            for metric, value in values_of(measured[keys]).items():
                cells.put(keys, metric, value)
            values = cells.values[setting.name][group]
            rows.append({"setting": setting.name, "label": setting.label, "family": setting.family,
                         "value": setting.value, "top_k": setting.top_k, "group": group, "n": len(first),
                         "sources": first["source"].nunique(),
                         **{m: values.get(m, float("nan")) for m in VALUES},
                         **{f"{m}_unavailable": cells.unavailable.get(f"{setting.name}/{group}/{m}", "")
                            for m in QUALITY},
                         "samples": int(part["sample"].max()) + 1, "batch_size": config.batch_size,
                         "device": device_name(dev), "precision": precision(dev.type == "cuda")})
    references = {s.name: reference_of(s, chosen, preset.sample.top_k) for s in chosen}
    differences = frontier_differences(measured, references, protocol)
    frame = pd.DataFrame(rows).assign(reference=lambda f: f["setting"].map(references), method=protocol.multiplicity)
    return with_differences(frame, differences), cells


def with_differences(frame: pd.DataFrame, differences: pd.DataFrame) -> pd.DataFrame:
    """The frontier rows with each metric's difference columns (`<metric>_diff`, ..., blank for a reference)."""
    wide = differences.pivot(index=["setting", "group"], columns="metric",
                             values=list(DIFFERENCE_COLUMNS)) if len(differences) else None
    for metric in QUALITY:
        for column in DIFFERENCE_COLUMNS:
            name = f"{metric}_{column}"
            if wide is not None and (column, metric) in wide.columns:
                frame[name] = [wide[(column, metric)].get((s, g), np.nan) for s, g in zip(frame["setting"],
                                                                                           frame["group"])]
            else:
                frame[name] = np.nan
    return frame



"""What each preset costs: GPU-hours and wall time of every DAG stage, from measured benchmark rows, the presets'
schedules and workflow/resources.yaml (docs/speed-and-cost.md, "What each preset costs").
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import numpy as np

from put.config import PVQVAE_OF_VARIANT, TPAMI_VARIANT, VARIANTS, model_config
from put.config import preset as load_preset
from put.config.bins import EVAL_GROUPS, FINE_BINS, TABLE_GROUPS
from put.data.sources import FFHQ_SIZE, FFHQ_TEST_START, IMAGENET_EVAL_COUNT, PLACES2_NATURE_CATEGORIES
from put.masks.generate import mask_with_ratio
from put.report.benchmarks import of_kind

COST_MODEL = (  # quoted in cost.json as its model
    "The model, stated so it can be checked: a training job of N GPUs takes the measured seconds per step of one "
    "GPU at its per-GPU batch (the preset's batch / N) times the preset's iterations (DDP's all-reduce, data loading "
    "and evaluation are not in the benchmark); a sampling job takes, per batch, as many steps as the batch's most "
    "masked image needs, at the seconds per step measured at the stage's batch (a group's test images at most), plus "
    "one forward per batch for the all-at-once results and a P-VQVAE pass per image. Masked patches per image come "
    "from generated evaluation masks of each hole-ratio group (put/masks; a real run's PConv masks of the same groups "
    "differ somewhat). A stage not measured at its batch is n/a, naming the batches that were measured and the "
    "command that would measure it: no figure is modelled from another batch."
)

# Test images of each dataset's published split (put/data/sources.py); a preset's eval_count overrides.
TEST_IMAGES = {"ffhq": FFHQ_SIZE - FFHQ_TEST_START, "imagenet": IMAGENET_EVAL_COUNT,
               "places2_nature": 100 * len(PLACES2_NATURE_CATEGORIES)}  # Places365 val: 100 per category
MASKS_PER_GROUP = 64
ABLATION_DAG = [v for v in VARIANTS if v != TPAMI_VARIANT]  # put and its five ablations
STAGE_JOBS = {"train_pvqvae": len({PVQVAE_OF_VARIANT[v] for v in ABLATION_DAG}), "train_transformer": len(ABLATION_DAG),
              "sample": len(ABLATION_DAG)}
TRAIN_STAGE = {"train_pvqvae": "pvqvae", "train_transformer": "transformer"}


def masked_patches(preset: str) -> dict[str, np.ndarray]:
    """Per evaluation group, the masked-patch counts of generated masks at the preset's size."""
    config = model_config(preset)
    return _masked_patches(config.image_size, config.pvqvae.patch_size)


@cache
def _masked_patches(size: int, patch: int, count: int = MASKS_PER_GROUP, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    found = {}
    for group, (lo, hi) in EVAL_GROUPS.items():
        keeps = np.stack([mask_with_ratio((size, size), lo, hi, rng) for _ in range(count)])
        patches = keeps.reshape(count, size // patch, patch, size // patch, patch).min(axis=(2, 4))
        found[group] = (patches < 0.5).sum(axis=(1, 2))
    return found


def expected_max(counts: np.ndarray, batch: int, draws: int = 256, seed: int = 0) -> float:
    """Mean over seeded draws of the largest of `batch` counts drawn from `counts`: a batch's steps."""
    rng = np.random.default_rng(seed)
    return float(rng.choice(counts, size=(draws, batch)).max(axis=1).mean())


def _preferred(rows: list[dict]) -> dict | None:
    """Figures measured by this repository's code first, then ones measured elsewhere; by source name."""
    return min(rows, key=lambda r: ("measured_elsewhere" in r, r["source"]), default=None)


def _device_type(gpus: int) -> str:
    return "cuda" if gpus > 0 else "cpu"


def train_row(rows: list[dict], preset: str, stage: str, batch: int, gpus: int) -> dict | None:
    return _preferred([r for r in of_kind(rows, "train") if r["preset"] == preset and r["stage"] == stage
                       and r["batch"] == batch and r["device"].split(":")[0] == _device_type(gpus)])


def sampling_rows(rows: list[dict], preset: str, tokens_per_step: int, gpus: int, code: str = "ours",
                  precision: str | None = None) -> list[dict]:
    """A sampler's rows (ours, or the authors' loop; of `precision` when given) for a preset on the stage's kind of
    device, any batch."""
    return [r for r in of_kind(rows, "sampling") if r.get("code") == code and r["preset"] == preset
            and r["tokens_per_step"] == tokens_per_step and r["device"].split(":")[0] == _device_type(gpus)
            and precision in (None, r["precision"])]


def at_batch(rows: list[dict], batch: int, gpus: int) -> dict | None:
    """The row at `batch`; of ours, the engine the stage uses before others."""
    at = [r for r in rows if r["batch"] == batch]
    auto = "graph" if gpus > 0 else "eager"  # put/sampling/engine.py resolve_engine("auto")
    return _preferred([r for r in at if r["engine"] == auto]) or _preferred(at)


def _where(row: dict) -> dict:
    return {"device_name": row["device_name"], "precision": row["precision"], "source": row["source"],
            **({"measured_elsewhere": row["measured_elsewhere"]} if "measured_elsewhere" in row else {})}


def train_cost(rows: list[dict], preset: str, rule: str, gpus: int) -> dict:
    stage = TRAIN_STAGE[rule]
    train = getattr(load_preset(preset), f"{stage}_train")
    devices = max(gpus, 1)
    base = {"preset": preset, "stage": rule, "jobs": STAGE_JOBS[rule], "gpus": gpus,
            "batch_per_gpu": train.batch_size / devices, "steps": train.iterations}
    if train.batch_size % devices:
        return {**base, "missing": f"batch {train.batch_size} does not split over {gpus} GPUs"}
    row = train_row(rows, preset, stage, train.batch_size // devices, gpus)
    measure = f"put bench train --preset {preset} --stage {stage} --gpu-counts {devices} --device {_device_type(gpus)}"
    if row is None:
        return {**base, "missing": f"not measured: {measure}"}
    if "oom" in row:
        return {**base, "missing": f"out of memory on {row['device_name']} ({row['source']})"}
    wall = row["seconds_per_step"] * train.iterations / 3600
    return {**base, "seconds_per_step": row["seconds_per_step"], "peak_gib": row.get("peak_gib"),
            "wall_hours": wall, "device_hours": wall * devices, **_where(row)}


def sample_cost(rows: list[dict], preset: str, gpus: int, masks: dict[str, np.ndarray]) -> dict:
    P = load_preset(preset)
    cfg = P.sample
    images = P.data.eval_count or TEST_IMAGES[P.data.dataset]
    base = {"preset": preset, "stage": "sample", "jobs": STAGE_JOBS["sample"], "gpus": gpus,
            "batch_per_gpu": cfg.batch_size}
    batch = min(cfg.batch_size, images)  # each group's images are batched on their own
    measured = sampling_rows(rows, preset, cfg.tokens_per_step, gpus)
    row = at_batch(measured, batch, gpus)
    if row is None:
        others = sorted({r["batch"] for r in measured})
        return {**base, "missing": f"not measured at batch {batch}"
                                   + (f" (measured: batch {', '.join(map(str, others))})" if others else "")
                                   + f": put bench sampling --preset {preset} --batch {batch} --tokens-per-step "
                                     f"{cfg.tokens_per_step} --device {_device_type(gpus)}"}
    per_batch = math.ceil(images / batch)
    diversity_images = min(cfg.diversity_images or images, images)

    def steps(group: str, n_images: int) -> float:
        needed = np.ceil(masks[group] / cfg.tokens_per_step)
        return math.ceil(n_images / batch) * expected_max(needed, batch)

    iterative = sum(steps(g, images) for g in TABLE_GROUPS)
    iterative += cfg.diversity_samples * sum(steps(g, diversity_images) for g in FINE_BINS)
    all_at_once = per_batch * len(TABLE_GROUPS)
    results = images * 2 * len(TABLE_GROUPS) + diversity_images * cfg.diversity_samples * len(FINE_BINS)
    seconds = (iterative + all_at_once) * row["seconds_per_step"]
    pvqvae = _preferred([r for r in of_kind(rows, "pvqvae") if r["preset"] == preset
                         and r["device"].split(":")[0] == _device_type(gpus)])
    if pvqvae is not None:
        seconds += results / pvqvae["images_per_second"]
    wall = seconds / 3600
    return {**base, "modelled_batch": batch, "engine": row["engine"], "results": results,
            "steps": round(iterative + all_at_once), "seconds_per_step": row["seconds_per_step"],
            "peak_gib": row.get("peak_gib"), "wall_hours": wall, "device_hours": wall * max(gpus, 1), **_where(row)}


def table_topk(rows: list[dict], preset: str, gpus: int, masks: dict[str, np.ndarray]) -> list[dict]:
    """Top-K sampling of the Table 1 groups per variant: our stage beside the authors' loop (fp32) on the same kind
    of device, per measured precision, each at its largest measured batch not above the stage's."""
    P = load_preset(preset)
    images = P.data.eval_count or TEST_IMAGES[P.data.dataset]
    found = []
    measured = [r for r in of_kind(rows, "sampling") if r["preset"] == preset and r["tokens_per_step"] == 1
                and r["device"].split(":")[0] == _device_type(gpus)]
    for code, precision in sorted({(r.get("code"), r["precision"]) for r in measured if r.get("code")},
                                  key=lambda k: (k[0] != "ours", k[1])):
        fits = [r for r in sampling_rows(rows, preset, 1, gpus, code, precision) if r["batch"] <= P.sample.batch_size]
        if not fits:
            continue
        row = at_batch(fits, max(r["batch"] for r in fits), gpus)
        steps = sum(math.ceil(images / row["batch"]) * expected_max(masks[g], row["batch"]) for g in TABLE_GROUPS)
        found.append({"preset": preset, "code": code, "engine": row["engine"], "images": images,
                      "batch": row["batch"], "steps": round(steps), "seconds_per_step": row["seconds_per_step"],
                      "hours": steps * row["seconds_per_step"] / 3600, **_where(row)})
    return found


def evaluation_cost(rows: list[dict], preset: str, gpus: int) -> dict:
    """One variant's evaluate stage: per-image metrics and intervals (CPU), Inception features and LPIPS (device),
    counted from the preset and timed by `put bench evaluate`. Intervals are timed at the largest cell and counted
    for every cell: an upper bound."""
    P = load_preset(preset)
    images = P.data.eval_count or TEST_IMAGES[P.data.dataset]
    diversity = min(P.sample.diversity_images or images, images)
    cells = 2 * len(TABLE_GROUPS)  # deterministic and top-K
    counts = {"images": images, "results": images * cells + diversity * P.sample.diversity_samples * len(FINE_BINS),
              "inception_images": 2 * (images * cells + diversity * len(FINE_BINS)),
              "lpips_pairs": diversity * P.evaluate.lpips_pairs * len(FINE_BINS),
              "mean_intervals": cells * 3 + len(FINE_BINS) * 4, "fid_intervals": cells + len(FINE_BINS)}
    base = {"preset": preset, "stage": "evaluate", "jobs": len(ABLATION_DAG), "gpus": gpus, **counts}
    cpu = _preferred([r for r in of_kind(rows, "evaluate") if r["preset"] == preset and r["device"] == "cpu"])
    command = f"put bench evaluate --preset {preset} --device {_device_type(gpus)}"
    if cpu is None:
        return {**base, "missing": f"not measured: put bench evaluate --preset {preset} --device cpu"}
    intervals = counts["mean_intervals"] * cpu["mean_interval_seconds"] + counts["fid_intervals"] * cpu[
        "fid_interval_seconds"]
    cpu_hours = {"interval_hours": intervals / 3600,
                 "metrics_hours": counts["results"] * cpu["seconds_per_result"] / 3600,
                 "cpu_workers": cpu["cpu_workers"], "cpu_source": cpu["source"], "cpu_name": cpu["device_name"]}
    device = cpu if gpus == 0 else _preferred([r for r in of_kind(rows, "evaluate") if r["preset"] == preset
                                              and r["device"].startswith("cuda")])
    if device is None:
        return {**base, **cpu_hours, "missing": f"Inception and LPIPS not measured on a GPU: {command}"}
    networks = (counts["inception_images"] * device["inception_seconds_per_image"]
                + counts["lpips_pairs"] * device["lpips_seconds_per_pair"]) / 3600
    wall = cpu_hours["interval_hours"] + cpu_hours["metrics_hours"] + networks
    return {**base, **cpu_hours, "network_hours": networks, "wall_hours": wall, "device_hours": wall * max(gpus, 1),
            **_where(device)}


def totals(preset: str, stages: list[dict]) -> dict:
    """The ablation DAG of one preset: device-hours, and wall time one job at a time or with every job of a
    stage at once (the critical path: P-VQVAE, then transformer, then sampling)."""
    missing = [s["stage"] for s in stages if "missing" in s]
    if missing:
        return {"preset": preset, "stage": "ablation DAG", "missing": "needs " + ", ".join(missing)}
    return {"preset": preset, "stage": "ablation DAG", "jobs": sum(s["jobs"] for s in stages),
            "device_hours": sum(s["jobs"] * s["device_hours"] for s in stages),
            "wall_hours": sum(s["wall_hours"] for s in stages),
            "wall_hours_one_job_at_a_time": sum(s["jobs"] * s["wall_hours"] for s in stages)}


def layouts(rows: list[dict], preset: str, rule: str) -> list[dict]:
    """Every measured GPU layout of a training stage (a per-GPU batch that splits the preset's batch)."""
    stage = TRAIN_STAGE[rule]
    train = getattr(load_preset(preset), f"{stage}_train")
    found = []
    for batch in sorted({r["batch"] for r in of_kind(rows, "train") if r["preset"] == preset
                         and r["stage"] == stage and r["device"].startswith("cuda")}, reverse=True):
        if train.batch_size % batch == 0:
            found.append(train_cost(rows, preset, rule, train.batch_size // batch))
    return [f for f in found if "missing" not in f]


def preset_costs(rows: list[dict], resources: dict, preset: str, masks: dict[str, np.ndarray] | None = None) -> dict:
    """Stages, totals and measured training layouts of one preset, at the GPU counts of `resources`."""
    nodes = {rule: resources[preset][rule]["nodes"] for rule in STAGE_JOBS}
    gpus = {rule: nodes[rule] * resources[preset][rule]["gpu"] for rule in STAGE_JOBS}  # of a job, all its nodes
    masks = masks if masks is not None else masked_patches(preset)
    stages = [{**train_cost(rows, preset, rule, gpus[rule]), "nodes": nodes[rule]} for rule in TRAIN_STAGE]
    stages.append(sample_cost(rows, preset, gpus["sample"], masks))
    return {"stages": stages, "totals": [totals(preset, stages)],
            "layouts": [layout for rule in TRAIN_STAGE for layout in layouts(rows, preset, rule)],
            "table_topk": table_topk(rows, preset, gpus["sample"], masks),
            "evaluation": [evaluation_cost(rows, preset, resources[preset]["evaluate"]["gpu"])]}


def cost_report(rows: list[dict], resources: dict, presets: list[str], resources_file: Path) -> dict:
    """cost.json: every preset's stages, totals and layouts, with what they were computed from."""
    found = {"stages": [], "totals": [], "layouts": [], "table_topk": [], "evaluation": []}
    for name in presets:
        for key, items in preset_costs(rows, resources, name).items():
            found[key] += items
    used = sorted({s["source"] for s in found["stages"] + found["layouts"] if "source" in s})
    return {"provenance": {"what": "computed by `put cost` (put/bench/cost.py) from measured rows, the "
                                   "presets' schedules and the GPU counts of " + resources_file.as_posix(),
                           "sources": used, "model": COST_MODEL},
            **found}

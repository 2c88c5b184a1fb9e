"""Stages `train-pvqvae` and `train-transformer`: split CSVs (+ a P-VQVAE) in, one checkpoint out."""

from __future__ import annotations

from pathlib import Path

from put.config import PVQVAE_OF_VARIANT, PVQVAE_VARIANTS, ModelConfig, Preset
from put.config.masks import TRAINING_MASK_KEYS
from put.config.params import Params
from put.config.paths import EVAL_CURVE, TRAIN_CURVE
from put.errors import InputError
from put.io.code import command_sources
from put.io.files import file_sha256, read_csv
from put.models.checkpoint import check_variant, load_checkpoint
from put.tracking.base import NullTracker, Tracker, tracked
from put.tracking.factory import stage_tracker
from put.tracking.source import code_version
from put.train.distributed import setup_distributed, teardown_distributed
from put.train.inputs import split_datasets, training_masks
from put.train.loop import LoopResult, run_training
from put.train.pvqvae import PVQVAETask
from put.train.transformer import TransformerTask


def main_tracker(params: Params, variant: str, stage: str, is_main: bool, tags: dict[str, str] | None,
                 stage_params: dict, split_dir: Path):
    """MLflow for the main process only (the others would log duplicates): the stage's parameters, system
    metrics while it trains, the split files as its datasets."""
    if not is_main:
        return NullTracker()
    tracker = stage_tracker(params.preset, variant, stage, params.dag_id(), tags,
                            labels=params.evaluated_labels(), system_metrics=True, seed=params.seed)
    log_start(tracker, params, stage_params, split_dir)
    return tracker


def log_start(tracker: Tracker, params: Params, stage_params: dict, split_dir: Path) -> None:
    tracker.log_params(stage_params)
    for part, context in (("train", "training"), ("test", "validation")):
        tracker.log_dataset(Path(split_dir) / f"{part}.csv", f"{params.preset} {part} split", context)


def pvqvae_params(config: ModelConfig, preset: Preset) -> dict:
    return {"model": config.model_dump(), "train": preset.pvqvae_train.model_dump()}


def transformer_params(config: ModelConfig, preset: Preset, pvqvae_sha256: str) -> dict:
    return {"model": config.model_dump(), "train": preset.transformer_train.model_dump(),
            "pvqvae_sha256": pvqvae_sha256}


def log_outputs(tracker: Tracker, params: Params, variant: str, kind: str, split_dir: Path, out: Path,
                curves: Path, pvqvae: Path | None = None) -> None:
    """A training's run from its files, for a training DVC skipped (`put track`; a training that runs logs as it
    goes): its parameters and datasets, the curves (train.csv as train/<loss>, eval.csv as eval/<metric>, at their
    steps) and the checkpoint as its model, with the last step's values."""
    preset, config = params.resolved_for(variant), params.variant_config(variant)  # tpami: its TPAMI preset
    stage_params = pvqvae_params(config, preset) if kind == "pvqvae" else \
        transformer_params(config, preset, file_sha256(pvqvae))
    log_start(tracker, params, stage_params, split_dir)
    final, last = {}, 0
    for name, prefix in ((TRAIN_CURVE, "train"), (EVAL_CURVE, "eval")):
        rows = read_csv(Path(curves) / name, f"the training curves `put train-{kind}` writes").to_dict("records")
        for row in rows:  # empty cells (a loss term not yet started) are NaN, which log_metrics leaves out
            step = int(row.pop("step"))
            values = {f"{prefix}/{key}": float(value) for key, value in row.items()}
            tracker.log_metrics(values, step)
            last = max(last, step)
        final |= values if rows else {}
    tracker.log_model(Path(out), kind, final, stage_params, last)


def training_identity(preset: Preset, config: ModelConfig, train: dict, split_dir: Path, **extra: str) -> dict:
    """What defines a training run (put/train/loop.py refuses to resume a state made with another). Not the
    data-loader's worker count: every sample is the same whatever it is."""
    train = {key: value for key, value in train.items() if key != "num_workers"}
    return {"model": config.model_dump(mode="json"), "train": train,
            "masks": preset.masks.model_dump(mode="json", include=set(TRAINING_MASK_KEYS)),
            "data": preset.data.model_dump(mode="json"),
            "train_split_sha256": file_sha256(Path(split_dir) / "train.csv"), **extra}


def training_code(command: str) -> str:
    """The version of the code `put <command>` runs (put/tracking/source.py): a finished training's state is
    reused only by the same code."""
    return code_version(command_sources(command))


def train_pvqvae(params: Params, variant: str, split_dir: Path, out: Path, device: str | None = None,
                 tags: dict[str, str] | None = None, curves: Path | None = None, restart: bool = False,
                 prepared: Path | None = None) -> LoopResult:
    if variant not in PVQVAE_VARIANTS:
        raise InputError(f"variant {variant!r} has no P-VQVAE of its own "
                         f"(it reuses {PVQVAE_OF_VARIANT.get(variant)!r}'s);"
                         f" P-VQVAE variants are {', '.join(PVQVAE_VARIANTS)}")
    preset, config = params.resolved_for(variant), params.variant_config(variant)
    dist = setup_distributed(device)
    try:
        train_images, test_images = split_datasets(split_dir, config.image_size, preset.data, prepared)
        labels = {"preset": params.preset, "variant": variant, "stage": "pvqvae"}
        task = PVQVAETask(config, preset.pvqvae_train, train_images, test_images,
                          training_masks(preset, config, "pvqvae"), dist, labels)
        stage_params = pvqvae_params(config, preset)
        with tracked(main_tracker(params, variant, "train_pvqvae", dist.is_main, tags, stage_params, split_dir)) as t:
            identity = training_identity(preset, config, preset.pvqvae_train.model_dump(mode="json"), split_dir)
            result = run_training(task, preset.pvqvae_train, Path(out), dist, t, labels, identity=identity,
                                  curves=curves, restart=restart, code=training_code("train-pvqvae"))
            t.log_model(Path(out), "pvqvae", result.metrics, stage_params, result.step)
    finally:
        teardown_distributed()
    return result


def train_transformer(params: Params, variant: str, pvqvae: Path, split_dir: Path, out: Path,
                      device: str | None = None, tags: dict[str, str] | None = None, curves: Path | None = None,
                      restart: bool = False, prepared: Path | None = None) -> LoopResult:
    preset, config = params.resolved_for(variant), params.variant_config(variant)
    check_variant(load_checkpoint(pvqvae, kind="pvqvae"), PVQVAE_OF_VARIANT[variant], f"--variant {variant}")
    dist = setup_distributed(device)
    try:
        train_images, test_images = split_datasets(split_dir, config.image_size, preset.data, prepared)
        labels = {"preset": params.preset, "variant": variant, "stage": "transformer"}
        task = TransformerTask(config, preset.transformer_train, Path(pvqvae), Path(out), train_images, test_images,
                               training_masks(preset, config, "transformer"), dist, labels)
        stage_params = transformer_params(config, preset, task.pvqvae_sha256)
        with tracked(main_tracker(params, variant, "train_transformer", dist.is_main, tags, stage_params,
                                  split_dir)) as t:
            identity = training_identity(preset, config, preset.transformer_train.model_dump(mode="json"), split_dir,
                                         pvqvae_sha256=task.pvqvae_sha256)
            result = run_training(task, preset.transformer_train, Path(out), dist, t, labels, identity=identity,
                                  curves=curves, restart=restart, code=training_code("train-transformer"))
            t.log_model(Path(out), "transformer", result.metrics, stage_params, result.step)
    finally:
        teardown_distributed()
    return result

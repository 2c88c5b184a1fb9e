"""Save trained models as checkpoints and build models back from them (with the configs they carry)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from put.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    relative_reference,
    resolve_pvqvae,
    save_checkpoint,
)
from put.config import GENERATION_NAMES, ModelConfig
from put.fileio import file_sha256
from put.models.put_model import PUTModel
from put.models.pvqvae import PVQVAE


def checkpoint_config(ckpt: Checkpoint) -> ModelConfig:
    try:
        return ModelConfig.model_validate(ckpt.config["model"])
    except Exception as err:
        raise CheckpointError(f"{ckpt.path}: its model config is invalid: {err}") from err


def check_variant(ckpt: Checkpoint, expected: str, asked: str) -> None:
    """Refuses a checkpoint that records another variant than `expected`, which `asked` (the option that chose it)
    needs: one variant's results must never carry another's name. A checkpoint recording none passes."""
    recorded = ckpt.config.get("variant")
    if recorded is not None and recorded != expected:
        raise CheckpointError(f"{ckpt.path}: is a checkpoint of variant {recorded!r}, but {asked} needs variant "
                              f"{expected!r}; pass that variant's checkpoint, or the variant this one was trained as")


def check_generation(config: ModelConfig, expected: str, path: str | os.PathLike, needed_by: str) -> None:
    """Refuses a checkpoint whose model is of the other release (a TPAMI model where a CVPR one is expected, or the
    reverse): one line naming both."""
    if config.generation != expected:
        raise CheckpointError(f"{path}: holds a {GENERATION_NAMES[config.generation]} model, but {needed_by} expects "
                              f"a {GENERATION_NAMES[expected]} one; pass a checkpoint of that release or choose a "
                              f"preset of this one")


def load_pvqvae(path: str | os.PathLike) -> tuple[PVQVAE, Checkpoint]:
    ckpt = load_checkpoint(path, kind="pvqvae")
    model = PVQVAE(checkpoint_config(ckpt).pvqvae)
    model.load_state_dict(ckpt.model)
    return model.eval(), ckpt


def load_put_model(transformer_path: str | os.PathLike, pvqvae_path: str | os.PathLike | None = None,
                   device: str | torch.device = "cpu", variant: str | None = None,
                   label: str | None = None, generation: str | None = None) -> PUTModel:
    """A transformer checkpoint plus the exact P-VQVAE it was trained on (verified by SHA-256); with `variant`,
    the checkpoint must record that variant (`label`: the --variant that asked for it), with `generation`, be a
    model of that release."""
    ckpt = load_checkpoint(transformer_path, kind="transformer")
    if variant is not None:
        check_variant(ckpt, variant, f"--variant {label or variant}")
    config = checkpoint_config(ckpt)
    if generation is not None:
        check_generation(config, generation, transformer_path, f"--variant {label or variant}")
    pvqvae_file = resolve_pvqvae(ckpt, pvqvae_path)
    pvqvae, pvqvae_ckpt = load_pvqvae(pvqvae_file)
    if pvqvae.config != config.pvqvae:
        raise CheckpointError(f"{pvqvae_file}: P-VQVAE config differs from the one {Path(transformer_path)} expects")
    model = PUTModel(config)
    model.pvqvae.load_state_dict(pvqvae.state_dict())
    model.transformer.load_state_dict(ckpt.model)
    return model.eval().to(device)


def save_pvqvae(path: str | os.PathLike, model: PVQVAE, config: ModelConfig, training: dict | None = None,
                **labels: str) -> None:
    """labels (preset, variant, ...) are stored beside the config for people and tables to read."""
    save_checkpoint(path, Checkpoint("pvqvae", {"model": config.model_dump(), **labels}, model.state_dict(),
                                     training or {}))


def save_transformer(path: str | os.PathLike, model: PUTModel, pvqvae_path: str | os.PathLike,
                     training: dict | None = None, **labels: str) -> None:
    """Records the P-VQVAE checkpoint (relative path + SHA-256) that the transformer was trained on."""
    save_checkpoint(path, Checkpoint(
        "transformer", {"model": model.config.model_dump(), **labels}, model.transformer.state_dict(),
        training or {}, pvqvae_path=relative_reference(pvqvae_path, path), pvqvae_sha256=file_sha256(pvqvae_path)))

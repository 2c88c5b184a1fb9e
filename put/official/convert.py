"""`put import-official`: the authors' released checkpoints -> our self-describing checkpoints.

The model config comes from a preset plus overrides (their files hold weights, not sizes); the variant is read
from the P-VQVAE's tensors, or given (`tok` and `qua0` look like `put`). A transformer file carries its P-VQVAE
(`content_codec.*`), so it alone yields both files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from put.config import GENERATION_NAMES, PRESETS, PVQVAE_OF_VARIANT, ModelConfig, apply_variant, preset
from put.config.params import deep_merge, describe
from put.errors import InputError
from put.io.files import file_sha256
from put.io.yamlfile import read_yaml_mapping
from put.models.checkpoint import save_pvqvae, save_transformer
from put.models.discriminator import PatchDiscriminator
from put.models.put_model import PUTModel
from put.models.pvqvae import PVQVAE
from put.official.keys import (
    KeyMappingError,
    Mapped,
    check_against,
    generation_of,
    infer_pvqvae_variant,
    pvqvae_state,
    split_transformer_checkpoint,
    transformer_state,
)
from put.official.load import official_state_dict

PVQVAE_FILE, TRANSFORMER_FILE = "pvqvae.pt", "transformer.pt"


@dataclass(frozen=True)
class ImportResult:
    pvqvae: Path
    transformer: Path | None
    variant: str
    config: ModelConfig


def read_overrides(path: str | os.PathLike) -> dict[str, Any]:
    """A YAML (or JSON) mapping of ModelConfig fields, e.g. {pvqvae: {base_channels: 64}}."""
    return read_yaml_mapping(path, "a mapping of ModelConfig fields (image_size, pvqvae, transformer)")


def official_model_config(preset_name: str, overrides: Mapping[str, Any] | None = None) -> ModelConfig:
    """The preset's model config with `overrides` merged in (before any variant's switches)."""
    try:
        return ModelConfig.model_validate(deep_merge(preset(preset_name).model.model_dump(), dict(overrides or {})))
    except ValidationError as err:
        raise InputError(describe(err, "model overrides", f"preset {preset_name}")) from None


def check_generation(state: Mapping[str, torch.Tensor], config: ModelConfig, preset_name: str, source: Path) -> None:
    """A TPAMI checkpoint given to a CVPR preset, or the reverse: one line naming the presets that fit."""
    found = generation_of(state)
    if found != config.generation:
        fitting = [name for name, p in PRESETS.items() if p.model.generation == found]
        raise KeyMappingError(f"{source}: holds a {GENERATION_NAMES[found]} model, but preset {preset_name!r} is "
                              f"{GENERATION_NAMES[config.generation]}; expected a {GENERATION_NAMES[found]} preset "
                              f"({', '.join(fitting)})")


def resolve_variant(given: str | None, inferred: str, source: Path) -> str:
    if given is not None and PVQVAE_OF_VARIANT.get(given) != inferred:
        raise KeyMappingError(f"{source}: its tensors are those of a {inferred!r} P-VQVAE, which variant "
                              f"{given!r} does not use")
    return given or inferred


def same_weights(a: Mapped, b: Mapped) -> str | None:
    """The first of b's keys whose tensor differs from a's (None: identical)."""
    for key, tensor in b.tensors.items():
        other = a.tensors.get(key)
        if other is None or other.shape != tensor.shape or not torch.equal(other, tensor):
            return b.sources[key]
    return None


def import_official(out: str | os.PathLike, preset_name: str, pvqvae: str | os.PathLike | None = None,
                    transformer: str | os.PathLike | None = None, variant: str | None = None,
                    model_overrides: Mapping[str, Any] | None = None) -> ImportResult:
    """Write out/pvqvae.pt (and out/transformer.pt when a transformer file is given), loadable by
    `put inpaint`, `put sample` and `put evaluate` as they are."""
    if pvqvae is None and transformer is None:
        raise InputError("give --pvqvae, --transformer or both")
    pvqvae, transformer = (Path(p) if p is not None else None for p in (pvqvae, transformer))
    codec, own = split_transformer_checkpoint(official_state_dict(transformer)) if transformer else ({}, {})
    if transformer and not codec and pvqvae is None:
        raise KeyMappingError(f"{transformer}: no content_codec.* tensors (its P-VQVAE): pass --pvqvae too")
    source = pvqvae or transformer
    state = official_state_dict(pvqvae) if pvqvae else codec

    base = official_model_config(preset_name, model_overrides)
    check_generation({**state, **own}, base, preset_name, source)
    variant = resolve_variant(variant, infer_pvqvae_variant(state, base.pvqvae.codebook_size,
                                                            base.pvqvae.masked_book_size), source)
    pvqvae_config = apply_variant(base, PVQVAE_OF_VARIANT[variant])
    mapped, disc = pvqvae_state(state)
    if pvqvae and codec and (key := same_weights(pvqvae_state(codec)[0], mapped)):
        raise KeyMappingError(f"{transformer} was trained on another P-VQVAE than {pvqvae}: their {key} differ "
                              f"(content_codec.{key} in the transformer file)")
    model = PVQVAE(pvqvae_config.pvqvae)
    # The released books are trained: no data-dependent init may overwrite them.
    mapped.add("codebook.initialized", torch.ones_like(model.codebook.initialized), "(trained codebook)")
    check_against(mapped, model.state_dict(), f"{source} (P-VQVAE)")
    model.load_state_dict(mapped.tensors)
    training = {}
    if disc.tensors:  # kept for fine-tuning; the released discriminator has 64 channels in its first conv
        check_against(disc, PatchDiscriminator().state_dict(), f"{source} (discriminator)")
        training["discriminator"] = disc.tensors

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    labels = {"preset": preset_name, "source": "official", "official_file": source.name,
              "official_sha256": file_sha256(source)}
    pvqvae_out = out / PVQVAE_FILE
    save_pvqvae(pvqvae_out, model, pvqvae_config, training, **{**labels, "variant": PVQVAE_OF_VARIANT[variant]})
    if not transformer:
        return ImportResult(pvqvae_out, None, variant, pvqvae_config)

    config = apply_variant(base, variant)
    put_model = PUTModel(config)
    put_model.pvqvae.load_state_dict(model.state_dict())
    mapped_transformer = transformer_state(own)
    check_against(mapped_transformer, put_model.transformer.state_dict(), f"{transformer} (transformer)")
    put_model.transformer.load_state_dict(mapped_transformer.tensors)
    transformer_out = out / TRANSFORMER_FILE
    save_transformer(transformer_out, put_model, pvqvae_out, **{**labels, "variant": variant,
                                                                "official_file": transformer.name,
                                                                "official_sha256": file_sha256(transformer)})
    return ImportResult(pvqvae_out, transformer_out, variant, config)

"""Configuration: model sizes and ablation switches, training settings, presets (each defined once)."""

from put.config.model import (
                              GENERATION_NAMES,
                              PALETTE,
                              PVQVAE_OF_VARIANT,
                              PVQVAE_VARIANTS,
                              TPAMI_VARIANT,
                              VARIANT_COLOURS,
                              VARIANTS,
                              Generation,
                              LossConfig,
                              ModelConfig,
                              PVQVAEConfig,
                              StrictModel,
                              TransformerConfig,
                              Variant,
                              apply_variant,
)
from put.config.presets import PRESETS, DataConfig, MaskConfig, Preset, model_config, preset
from put.config.training import PVQVAETrainConfig, TrainConfig, TransformerTrainConfig

__all__ = [
    "GENERATION_NAMES", "Generation", "PALETTE", "PVQVAE_OF_VARIANT", "PVQVAE_VARIANTS", "TPAMI_VARIANT",
    "VARIANT_COLOURS", "VARIANTS", "LossConfig", "ModelConfig", "PVQVAEConfig", "StrictModel",
    "TransformerConfig", "Variant", "apply_variant", "PRESETS", "DataConfig", "MaskConfig", "Preset",
    "model_config", "preset", "PVQVAETrainConfig", "TrainConfig", "TransformerTrainConfig",
]

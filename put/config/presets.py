"""Presets: the paper's three settings and the embedded `demo`, each a complete description of what
to train on and how. `params.yaml` picks one and may override any field."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from put.config.evaluation import MetricProtocol, SampleConfig
from put.config.model import LossConfig, ModelConfig, PVQVAEConfig, StrictModel, TransformerConfig, apply_variant
from put.config.training import PVQVAETrainConfig, TransformerTrainConfig

Dataset = Literal["demo", "ffhq", "places2", "places2_nature", "imagenet"]


class DataConfig(StrictModel):
    dataset: Dataset = "demo"
    root: str | None = Field(None, description="raw images; None for the demo set, which `put split` builds "
                             "into <split folder>/images")
    eval_count: int | None = Field(None, ge=1, description="seeded subsample of the test split (ImageNet: 1000)")
    seed: int = 0


class MaskConfig(StrictModel):
    pconv_root: str | None = Field(None, description="NVIDIA's PConv irregular mask set; None: generated masks")
    pconv_polarity: Literal["hole-white", "keep-white"] = "hole-white"
    seed: int = 0


class Preset(StrictModel):
    model: ModelConfig
    data: DataConfig
    masks: MaskConfig = MaskConfig()
    pvqvae_train: PVQVAETrainConfig
    transformer_train: TransformerTrainConfig
    sample: SampleConfig = SampleConfig()
    evaluate: MetricProtocol = MetricProtocol()


def _paper(dataset: str, transformer: TransformerConfig, delayed_start: int, pvqvae_iterations: int,
           transformer_batch: int, transformer_iterations: int, transformer_warmup: int = 2000,
           eval_count: int | None = None) -> Preset:
    """The paper's settings; iteration counts approximate its 'trained to convergence' (FFHQ: ~150
    epochs of P-VQVAE at batch 128 and ~250 epochs of transformer at batch 48, as the released configs)."""
    return Preset(
        model=ModelConfig(transformer=transformer),
        data=DataConfig(dataset=dataset, root=f"data/raw/{dataset}", eval_count=eval_count),
        masks=MaskConfig(pconv_root="data/raw/pconv_masks"),
        pvqvae_train=PVQVAETrainConfig(iterations=pvqvae_iterations, batch_size=128,
                                       loss=LossConfig(delayed_start=delayed_start), checkpoint_every=2000),
        transformer_train=TransformerTrainConfig(iterations=transformer_iterations, batch_size=transformer_batch,
                                                 warmup=transformer_warmup, checkpoint_every=2000),
    )


PRESETS: dict[str, Preset] = {
    # Sized to train one P-VQVAE and one transformer on 2 CPU cores in about two minutes.
    "demo": Preset(
        model=ModelConfig(
            image_size=64,
            pvqvae=PVQVAEConfig(embed_dim=64, width=32, base_channels=8, num_res_blocks=2, codebook_size=128),
            transformer=TransformerConfig(n_layer=4, n_head=4, n_embd=128),
        ),
        data=DataConfig(dataset="demo", eval_count=16),
        pvqvae_train=PVQVAETrainConfig(
            iterations=250, batch_size=16, warmup=25, lr_generator=5e-4, lr_discriminator=5e-5,
            loss=LossConfig(perceptual=0, style=0, delayed_start=125), discriminator_width=16, checkpoint_every=100,
            log_every=10, eval_every=50, eval_images=16, num_workers=0),
        transformer_train=TransformerTrainConfig(
            iterations=150, batch_size=16, warmup=15, lr=1e-3, checkpoint_every=50, log_every=10,
            eval_every=50, eval_images=16, num_workers=0),
        sample=SampleConfig(diversity_images=3, batch_size=128),
    ),
    "ffhq": _paper("ffhq", TransformerConfig(n_layer=30, n_head=8, n_embd=512), 5_000, 80_000, 48, 360_000),
    "places2": _paper("places2_nature", TransformerConfig(n_layer=35, n_head=8, n_embd=512), 15_000, 150_000,
                      96, 500_000),
    "imagenet": _paper("imagenet", TransformerConfig(n_layer=35, n_head=8, n_embd=1024), 30_000, 300_000,
                       96, 800_000, transformer_warmup=5000, eval_count=1000),
}


def preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}")
    return PRESETS[name]


def model_config(preset_name: str, variant: str = "put") -> ModelConfig:
    return apply_variant(preset(preset_name).model, variant)

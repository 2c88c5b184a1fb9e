"""Presets: the paper's three settings and the embedded `demo`, each a complete description of what
to train on and how. `params.yaml` picks one and may override any field."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from put.config.evaluation import MetricProtocol, SampleConfig
from put.config.masks import PConvSelect, StrokeConfig, TrainingMaskConfig
from put.config.model import LossConfig, ModelConfig, PVQVAEConfig, StrictModel, TransformerConfig, apply_variant
from put.config.training import PVQVAETrainConfig, TransformerTrainConfig

Dataset = Literal["demo", "ffhq", "places2", "places2_nature", "imagenet"]
PlacesTrainSet = Literal["challenge", "standard"]
PlacesImages = Literal["large", "256"]
ResizeFilter = Literal["bilinear", "bicubic-antialias"]


class DataConfig(StrictModel):
    dataset: Dataset = "demo"
    root: str | None = Field(None, description="raw images; None for the demo set, which `put split` builds "
                             "into <split folder>/images")
    eval_count: int | None = Field(None, ge=1, description="seeded subsample of the test split (ImageNet: 1000)")
    seed: int = 0
    places_train: PlacesTrainSet = Field("challenge", description="Places2 training set: Places365-challenge "
                                         "(released) or -standard")
    places_images: PlacesImages = Field("large", description="Places2 image folders: data_large + val_large "
                                        "(released; shortest side 512) or data_256 + val_256")
    train_resize: int | None = Field(None, ge=1, description="shortest side before the random training crop "
                                     "(None: the image size); test images: image size, centre crop")
    resize_filter: ResizeFilter = Field("bilinear", description="bilinear: OpenCV INTER_LINEAR as released (no "
                                        "antialiasing); bicubic-antialias: PIL bicubic")


class MaskConfig(StrictModel):
    pconv_root: str | None = Field(None, description="NVIDIA's PConv irregular mask set; None: generated masks")
    pconv_polarity: Literal["hole-white", "keep-white"] = "hole-white"
    pconv_select: PConvSelect = Field("ratio", description="how a training stage picks the PConv masks of its "
                                      "hole-ratio window: by measured ratio, or by the released list slicing")
    seed: int = 0


class Preset(StrictModel):
    model: ModelConfig
    data: DataConfig
    masks: MaskConfig = MaskConfig()
    pvqvae_train: PVQVAETrainConfig
    transformer_train: TransformerTrainConfig
    sample: SampleConfig = SampleConfig()
    evaluate: MetricProtocol = MetricProtocol()

    @model_validator(mode="after")
    def _resize_covers_crop(self) -> "Preset":
        if self.data.train_resize is not None and self.data.train_resize < self.model.image_size:
            raise ValueError(f"data.train_resize ({self.data.train_resize}) must be at least model.image_size "
                             f"({self.model.image_size}): training crops are image_size pixels wide")
        return self


def _masks(irregular: float, window: tuple[float, float], keep: tuple[float, float], all_hole: float = 0.0,
           blocky: float = 0.0) -> TrainingMaskConfig:
    """A stage's released mask settings: use_provided_mask, use_provided_mask_ratio, stroke keep_ratio,
    zero_mask, mask_low_to_high (the other stroke parameters are the same in every released config)."""
    return TrainingMaskConfig(irregular_prob=irregular, pconv_hole_ratio=window, stroke=StrokeConfig(keep_ratio=keep),
                              all_hole_prob=all_hole, blocky_prob=blocky)


def _paper(dataset: str, transformer: TransformerConfig, *, train_resize: int, delayed_start: int,
           pvqvae_iterations: int, pvqvae_masks: TrainingMaskConfig, transformer_batch: int,
           transformer_iterations: int, transformer_masks: TrainingMaskConfig, transformer_warmup: int = 2000,
           eval_count: int | None = None) -> Preset:
    """The paper's settings as in the released configs (configs/put_cvpr2022/); iteration counts are the
    released max_epochs at the released batch and GPU count (docs/fidelity.md has the arithmetic)."""
    return Preset(
        model=ModelConfig(transformer=transformer),
        data=DataConfig(dataset=dataset, root=f"data/raw/{dataset}", eval_count=eval_count,
                        train_resize=train_resize),
        masks=MaskConfig(pconv_root="data/raw/pconv_masks"),
        pvqvae_train=PVQVAETrainConfig(iterations=pvqvae_iterations, batch_size=128,
                                       loss=LossConfig(delayed_start=delayed_start), checkpoint_every=2000,
                                       masks=pvqvae_masks),
        transformer_train=TransformerTrainConfig(iterations=transformer_iterations, batch_size=transformer_batch,
                                                 warmup=transformer_warmup, checkpoint_every=2000,
                                                 masks=transformer_masks),
    )


PRESETS: dict[str, Preset] = {
    # Sized to train one P-VQVAE and one transformer on 2 CPU cores in about two minutes.
    "demo": Preset(
        model=ModelConfig(
            image_size=64,
            pvqvae=PVQVAEConfig(embed_dim=64, width=32, num_res_blocks=2, codebook_size=128),
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
    "ffhq": _paper(
        "ffhq", TransformerConfig(n_layer=30, n_head=8, n_embd=512), train_resize=256, delayed_start=5_000,
        pvqvae_iterations=80_850, pvqvae_masks=_masks(0.7, (0.4, 0.6), keep=(0.0, 0.5), all_hole=0.3),
        transformer_batch=48, transformer_iterations=359_250,
        transformer_masks=_masks(0.8, (1 / 3, 0.6), keep=(0.3, 0.6), blocky=0.1)),
    "places2": _paper(
        "places2_nature", TransformerConfig(n_layer=35, n_head=8, n_embd=512), train_resize=288,
        delayed_start=15_000, pvqvae_iterations=185_700,
        pvqvae_masks=_masks(0.7, (0.2, 0.6), keep=(0.0, 0.5), all_hole=0.3),
        transformer_batch=96, transformer_iterations=495_400,
        transformer_masks=_masks(0.8, (0.2, 0.6), keep=(0.0, 0.5), blocky=0.05)),
    "imagenet": _paper(
        "imagenet", TransformerConfig(n_layer=35, n_head=8, n_embd=1024), train_resize=264, delayed_start=30_000,
        pvqvae_iterations=1_000_900, pvqvae_masks=_masks(0.7, (0.2, 0.6), keep=(0.0, 0.5), all_hole=0.3),
        transformer_batch=96, transformer_iterations=2_001_750, transformer_warmup=5000,
        transformer_masks=_masks(0.8, (0.2, 0.6), keep=(0.3, 0.6), blocky=0.1), eval_count=1000),
}


def preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}")
    return PRESETS[name]


def model_config(preset_name: str, variant: str = "put") -> ModelConfig:
    return apply_variant(preset(preset_name).model, variant)

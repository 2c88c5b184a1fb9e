"""Training configuration of both stages (paper Sec. 4.1; docs/fidelity.md, "Schedules")."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from put.config.masks import StrokeConfig, TrainingMaskConfig
from put.config.model import LossConfig, StrictModel


class TrainConfig(StrictModel):
    """What both stages share: length, global batch, warm-up + cosine schedule, bookkeeping."""

    iterations: int = Field(ge=1)
    batch_size: int = Field(ge=1, description="global batch: split evenly over the processes of a DDP run")
    warmup: int = Field(ge=0, description="linear warm-up iterations from 0 to the peak learning rate")
    min_lr: float = Field(ge=0, description="cosine decay ends here at the last iteration")
    betas: tuple[float, float]
    checkpoint_every: int = Field(1000, ge=1)
    log_every: int = Field(50, ge=1)
    eval_every: int = Field(1000, ge=1, description="held-out evaluation (PSNR / masked-token loss)")
    eval_images: int = Field(64, ge=1)
    num_workers: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        "auto", description="data-loader processes per training process; auto: the job's CPUs (Slurm's "
        "SLURM_CPUS_PER_TASK, else the CPUs this process may use) shared by its processes, one kept for each")
    seed: int = 0

    @model_validator(mode="after")
    def _warmup_fits(self) -> TrainConfig:
        if self.warmup >= self.iterations:
            raise ValueError(f"warmup ({self.warmup}) must be shorter than iterations ({self.iterations})")
        return self


class GumbelConfig(StrictModel):
    """Gumbel sampling of codes while the P-VQVAE trains (TPAMI): a patch takes the code maximising
    -log(distance) + scale * Gumbel noise instead of the nearest one, until `until`. The released temperature
    schedule is not a setting: their hard (straight-through) draw is an argmax, which no temperature changes."""

    scale: tuple[float, float] = Field((1.0, 0.1), description="noise scale before and after the ramp "
                                       "(gumbel_scale_init, gumbel_scale_dest)")
    ramp: tuple[int, int] = Field((3000, 3001), description="steps over which the scale moves linearly "
                                  "(gumbel_scale_step_range)")
    until: int | None = Field(None, ge=0, description="last step that samples (gumbel_sample_stop_step; None: "
                              "to the end)")

    def noise_scale(self, step: int) -> float | None:
        """The noise scale at `step`, or None once sampling has stopped (nearest codes from then on)."""
        if self.until is not None and step > self.until:
            return None
        (first, last), (start, end) = self.scale, self.ramp
        progress = min(1.0, max(0.0, (step - start) / max(1, end - start)))
        return last + (first - last) * (1 - progress)  # the released value_scheduler's arithmetic


class PVQVAETrainConfig(TrainConfig):
    lr_generator: float = Field(2e-4, gt=0)
    lr_discriminator: float = Field(2e-5, gt=0)
    warmup: int = 5000
    min_lr: float = 1e-6
    betas: tuple[float, float] = (0.0, 0.9)
    loss: LossConfig = LossConfig()
    discriminator_width: int = Field(64, ge=1, description="channels of the PatchGAN's first conv (EdgeConnect: 64)")
    erase_prob: float = Field(0.2, ge=0, le=1, description="p of erasing part of the training image itself "
                              "(erase_image_with_mask)")
    gumbel: GumbelConfig | None = Field(None, description="Gumbel sampling of codes in training (TPAMI); None: "
                                        "nearest codes (CVPR)")
    # The reference mask m' (and, without its all-hole and blocky steps, the erase mask); released
    # Places2/ImageNet values, FFHQ narrows the PConv window (see presets).
    masks: TrainingMaskConfig = TrainingMaskConfig(irregular_prob=0.7, pconv_hole_ratio=(0.2, 0.6),
                                                   stroke=StrokeConfig(keep_ratio=(0.0, 0.5)), all_hole_prob=0.3)


class TransformerTrainConfig(TrainConfig):
    lr: float = Field(3e-4, gt=0)
    warmup: int = 2000
    min_lr: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = Field(0.01, ge=0, description="on Linear weights only")
    poly_epsilon: float = Field(0.0, ge=0, description="PolyLoss: cross-entropy + epsilon * (1 - p(target)) per "
                                "masked patch (TPAMI: 1; 0: plain cross-entropy, CVPR)")
    # Released ImageNet values; FFHQ and Places2 differ (see presets).
    masks: TrainingMaskConfig = TrainingMaskConfig(irregular_prob=0.8, pconv_hole_ratio=(0.2, 0.6),
                                                   stroke=StrokeConfig(keep_ratio=(0.3, 0.6)), blocky_prob=0.1)

"""Model configuration: the variant list, both models' sizes, the loss weights, and the ablation
switches. A *variant* is one of the paper's ablations (Table 3) applied on top of a preset."""

from __future__ import annotations

import math
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from put.errors import InputError

Variant = Literal["put", "conv", "one", "no_ref", "tok", "qua0", "tpami"]
# The authors' two releases: the CVPR 2022 paper (branch cvpr2022) and its TPAMI 2024 extension (branch main).
Generation = Literal["cvpr2022", "tpami2024"]
GENERATION_NAMES: dict[str, str] = {"cvpr2022": "CVPR 2022", "tpami2024": "TPAMI 2024"}
VARIANTS: tuple[str, ...] = get_args(Variant)
# The ablation switches of the paper's Table 3, each set on top of a preset's P-VQVAE or transformer (a variant in
# neither changes nothing). A variant that changes only the transformer reuses the full model's P-VQVAE.
PVQVAE_SWITCHES: dict[str, dict[str, Any]] = {"conv": {"encoder": "conv"}, "one": {"dual_codebook": False},
                                              "no_ref": {"reference_branch": False}}
TRANSFORMER_SWITCHES: dict[str, dict[str, Any]] = {"tok": {"input": "quantized"}, "qua0": {"random_quant_prob": 0.0}}
PVQVAE_OF_VARIANT: dict[str, str] = {v: "put" if v in TRANSFORMER_SWITCHES else v for v in VARIANTS}
# Not an ablation: the TPAMI 2024 model trained beside the CVPR variants on the same data (a preset's `tpami`
# names the preset whose model and training settings it takes; put/config/params.py).
TPAMI_VARIANT = "tpami"
ABLATIONS: tuple[str, ...] = tuple(v for v in get_args(Variant) if v not in ("put", TPAMI_VARIANT))
PVQVAE_VARIANTS: tuple[str, ...] = tuple(dict.fromkeys(PVQVAE_OF_VARIANT.values()))
# One colour per variant everywhere (dvc plots, report, serve page): category10 in the variants' order; other
# series take the colours after them.
PALETTE: tuple[str, ...] = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                            "#bcbd22", "#17becf")
VARIANT_COLOURS: dict[str, str] = dict(zip(VARIANTS, PALETTE))


def _members(annotation: Any) -> tuple:
    return get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)


def _bool_for_number(value: Any, annotation: Any) -> bool:
    """`value` is a boolean (or holds one) where `annotation` wants a number: pydantic would take true as 1."""
    members = _members(annotation)
    if isinstance(value, bool):
        return bool({int, float} & set(members)) and bool not in members
    if isinstance(value, (list, tuple)):
        items = [arg for m in members if get_origin(m) in (list, tuple) for arg in get_args(m) if arg is not ...]
        return any(_bool_for_number(v, item) for v in value for item in items)
    return False


class StrictModel(BaseModel):
    """Unknown keys are errors (a typo in a config must not be silently ignored), and so is a boolean where a
    number is expected (`iterations: true` is not 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_number(cls, value: Any, info: ValidationInfo) -> Any:
        if _bool_for_number(value, cls.model_fields[info.field_name].annotation):
            raise ValueError("expected a number, got a boolean (true/false)")
        return value


class PVQVAEConfig(StrictModel):
    patch_size: int = Field(8, ge=2, description="r: side of the non-overlapping patches (a power of 2)")
    embed_dim: int = Field(256, ge=1, description="C: feature / codebook vector size")
    width: int = Field(256, ge=2, description="channels of the encoder and of the decoder at token resolution "
                       "(the released code's res_ch)")
    base_channels: int = Field(64, ge=1, description="channels at full resolution, doubling per level below the "
                               "token level (decoder, its reference branch, conv encoder); the released code "
                               "hard-codes 64")
    num_res_blocks: int = Field(8, ge=0, description="res blocks of the encoder (and of the decoder at token "
                                "resolution unless decoder_res_blocks is set)")
    decoder_res_blocks: int | None = Field(None, ge=0, description="res blocks of the decoder at token resolution "
                                           "(None: num_res_blocks; TPAMI: 2)")
    decoder_level_res_blocks: int = Field(0, ge=0, description="res blocks after each upsampling, mirrored in the "
                                          "reference branch (TPAMI: 2; their num_res_block_after_resolution_change)")
    upsample: Literal["deconv", "nearest"] = Field(
        "deconv", description="decoder upsampling: 4x4 transposed conv (CVPR), or nearest x2 then a 3x3 conv (TPAMI)")
    codebook_size: int = Field(512, ge=2, description="K: vectors of book e (known patches; the transformer's "
                               "vocabulary)")
    masked_codebook_size: int | None = Field(None, ge=1, description="K': vectors of book e' (patches with a hole); "
                                             "None: K (CVPR); TPAMI: 1024 beside K = 8192")
    pixel_norm: Literal["signed", "imagenet"] = Field(
        "signed", description="what the networks see: pixels in [-1, 1], or (x - mean) / std with ImageNet's RGB "
        "statistics (the TPAMI ImageNet configs' im_process_info); a hole is black in either")
    encoder: Literal["patch", "conv"] = "patch"
    dual_codebook: bool = True
    reference_branch: bool = True
    codebook_init: Literal["data", "randn"] = Field(
        "data", description="data: each book starts from encoder features of the first batch that reaches it; "
        "randn: the released code's N(0, 1) init, whose codes unused in the first step are never used again")
    ema_decay: float = Field(0.99, gt=0, lt=1)
    ema_eps: float = Field(1e-5, gt=0)
    ema_update: Literal["per_book", "released"] = Field(
        "per_book", description="per_book: Laplace smoothing within each book and a book that got no feature "
        "in a step is left as it is; released: one smoothing over the whole table, every code decayed each step")
    decoder_keep: Literal["reference", "product"] = Field(
        "reference", description="training pass: the decoder's keep-mask is the reference mask m' alone, erased "
        "pixels shown to it as -1 (released code), or m x m' as the paper writes it")

    @model_validator(mode="after")
    def _patch_is_power_of_two(self) -> PVQVAEConfig:
        if self.patch_size & (self.patch_size - 1):
            raise ValueError(f"patch_size must be a power of 2, got {self.patch_size}")
        return self

    @property
    def decoder_blocks(self) -> int:
        return self.num_res_blocks if self.decoder_res_blocks is None else self.decoder_res_blocks

    @property
    def masked_book_size(self) -> int:
        return self.codebook_size if self.masked_codebook_size is None else self.masked_codebook_size

    @property
    def num_upsamplings(self) -> int:
        return int(math.log2(self.patch_size))

    def level_channels(self) -> list[int]:
        """Channels at each resolution level, full resolution (0) up to the token grid (log2 r):
        base * 2^level below the token level, `width` at it. r=8, base 64, width 256 -> [64, 128, 256, 256]."""
        n = self.num_upsamplings
        return [self.base_channels * 2 ** level for level in range(n)] + [self.width]


class TransformerConfig(StrictModel):
    n_layer: int = Field(30, ge=1)
    n_head: int = Field(8, ge=1)
    n_embd: int = Field(512, ge=1)
    dropout: float = Field(0.0, ge=0, lt=1)
    input: Literal["unquantized", "quantized"] = Field(
        "unquantized", description="UQ-Transformer input (PUT) or quantized vectors (ablation `tok`)")
    random_quant_prob: float = Field(
        0.3, ge=0, le=1, description="training: p of replacing a known patch's feature by its code (`qua0`: 0)")
    attention_bias: Literal["qkv", "qv"] = Field(
        "qkv", description="biases of the attention's input projection: query, key and value (CVPR), or query and "
        "value only (TPAMI, BEiT's: a key bias cannot change the softmax)")
    drop_path: float = Field(0.0, ge=0, lt=1, description="stochastic depth of the last block, rising linearly from "
                             "0 at the first (TPAMI: 0.1)")
    mask_embedding: bool = Field(False, description="a learned vector mixed into each patch's input by its hole "
                                 "fraction: x = proj(f) * known + m * (1 - known) (TPAMI's learn_mask_emb)")
    init: Literal["gpt", "beit"] = Field("gpt", description="weight init: N(0, 0.02) (CVPR); beit: the same, then "
                                         "each block's output projections divided by sqrt(2 * depth) (TPAMI)")

    @model_validator(mode="after")
    def _heads_divide_width(self) -> TransformerConfig:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        return self


class ModelConfig(StrictModel):
    """Everything needed to build both models of one preset x variant."""

    generation: Generation = Field("cvpr2022", description="whose architecture this is: the CVPR 2022 release or "
                                   "its TPAMI 2024 extension (a label: the sizes and switches below say how)")
    image_size: int = Field(256, ge=8, description="training / evaluation resolution (square)")
    pvqvae: PVQVAEConfig = PVQVAEConfig()
    transformer: TransformerConfig = TransformerConfig()

    @model_validator(mode="after")
    def _size_is_multiple_of_patch(self) -> ModelConfig:
        if self.image_size % self.pvqvae.patch_size:
            raise ValueError(f"image_size {self.image_size} is not a multiple of patch_size {self.pvqvae.patch_size}")
        return self

    @property
    def token_grid(self) -> tuple[int, int]:
        side = self.image_size // self.pvqvae.patch_size
        return side, side


def apply_variant(config: ModelConfig, variant: str) -> ModelConfig:
    """The ablation switches of the paper's Table 3 on top of a preset (`put` and `tpami`: none; the tpami
    variant's preset is chosen by the caller, see presets.variant_preset)."""
    if variant not in VARIANTS:
        raise InputError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    return config.model_copy(update={
        "pvqvae": config.pvqvae.model_copy(update=PVQVAE_SWITCHES.get(variant, {})),
        "transformer": config.transformer.model_copy(update=TRANSFORMER_SWITCHES.get(variant, {})),
    })


class LossConfig(StrictModel):
    """P-VQVAE generator loss weights (supplementary Sec. B) and the start of the delayed terms."""

    pixel: float = Field(1.0, ge=0)
    gradient: float = Field(5.0, ge=0)
    adversarial: float = Field(0.1, ge=0)
    perceptual: float = Field(0.1, ge=0)
    style: float = Field(250.0, ge=0)
    commitment: float = Field(1.0, ge=0)
    delayed_start: int = Field(5000, ge=0, description="iteration at which gradient, adversarial, "
                               "perceptual and style terms (and the discriminator) switch on")
    adversarial_start: int | None = Field(None, ge=0, description="iteration at which the adversarial term and "
                                          "the discriminator switch on, when later (TPAMI ImageNet: disc_start); "
                                          "None: delayed_start")
    discriminator_inputs: Literal["unit", "released"] = Field(
        "unit", description="unit: the discriminator sees [0, 1] images in both steps; released: [0, 1] in the "
        "generator step but the unclamped [-1, 1] images in its own step (the released code's mix)")
    image_range: Literal["unit", "model"] = Field(
        "unit", description="what every image term sees: clamped [0, 1] images (CVPR: norm_to_0_1), or the "
        "network's own unclamped pixel values (TPAMI: norm_to_0_1 false), the discriminator too")

    @model_validator(mode="after")
    def _adversarial_after_the_rest(self) -> LossConfig:
        if self.adversarial_start is not None and self.adversarial_start < self.delayed_start:
            raise ValueError(f"adversarial_start ({self.adversarial_start}) must be at least delayed_start "
                             f"({self.delayed_start})")
        return self

    @property
    def adversarial_from(self) -> int:
        return self.delayed_start if self.adversarial_start is None else self.adversarial_start

    @property
    def needs_vgg(self) -> bool:
        return self.perceptual > 0 or self.style > 0

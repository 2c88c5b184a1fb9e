"""Presets: the paper's three settings and the embedded `demo`, each a complete description of what
to train on and how, defined in presets.yaml beside this file. `params.yaml` picks one and may override
any field."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from put.config.evaluation import FrontierConfig, MetricProtocol, SampleConfig
from put.config.masks import MaskPolarity, PConvSelect
from put.config.model import TPAMI_VARIANT, ModelConfig, StrictModel, apply_variant
from put.config.training import PVQVAETrainConfig, TransformerTrainConfig
from put.errors import InputError
from put.io.yamlfile import read_yaml_mapping

Dataset = Literal["demo", "ffhq", "places2", "places2_nature", "imagenet", "folder"]
FolderSources = Literal["folder", "image"]
PlacesTrainSet = Literal["challenge", "standard"]
PlacesImages = Literal["large", "256"]
ResizeFilter = Literal["bilinear", "bicubic-antialias"]
PreparedStorage = Literal["float16", "uint8", "originals"]


class DataConfig(StrictModel):
    dataset: Dataset = "demo"
    root: str | None = Field(None, description="raw images; None for the demo set, which `put split` builds "
                             "into <split folder>/images")
    name: str | None = Field(None, description="the folder dataset's name in the report's tables (None: the name "
                             "of data.root's folder)")
    files: str | None = Field(None, description="folder dataset: a text file listing its images (one path per line, "
                              "as under root); None: every image under root, recursively")
    train_list: str | None = Field(None, description="folder dataset: the user's own training list (a text file, "
                                   "paths as under root), with test_list; None: a seeded split by source")
    test_list: str | None = Field(None, description="folder dataset: the user's own test list, with train_list")
    test_fraction: float = Field(0.1, gt=0, lt=1, description="folder dataset without lists: the share of its "
                                 "images drawn (by whole sources, seeded) into the test split")
    folder_sources: FolderSources = Field("folder", description="folder dataset: what a source is, the unit the "
                                          "split keeps on one side: an image's sub-folder (images directly under "
                                          "root: each its own), or every image its own")
    eval_count: int | None = Field(None, ge=1, description="seeded subsample of the test split (ImageNet: 1000)")
    sources: str | None = Field(None, description="CSV file (columns path, source; paths as under root) naming the "
                                "source of images that share one (crops or frames of one photo or video): the "
                                "evaluation resamples sources. The demo's crops name their photo; None: each "
                                "other image is its own source (put/data/groups.py)")
    seed: int = 0
    places_train: PlacesTrainSet = Field("challenge", description="Places2 training set: Places365-challenge "
                                         "(released) or -standard")
    places_images: PlacesImages = Field("large", description="Places2 image folders: data_large + val_large "
                                        "(released; shortest side 512) or data_256 + val_256")
    train_resize: int | None = Field(None, ge=1, description="shortest side before the random training crop "
                                     "(None: the image size); test images: image size, centre crop")
    resize_filter: ResizeFilter = Field("bilinear", description="bilinear: OpenCV INTER_LINEAR as released (no "
                                        "antialiasing); bicubic-antialias: PIL bicubic")
    prepared: PreparedStorage = Field("float16", description="what training reads: the `prepare` stage's cache of "
                                      "resized pixels as float16 (exact on FFHQ) or uint8 (rounded), or the "
                                      "original files, decoded and resized per sample (as released)")


class MaskConfig(StrictModel):
    pconv_root: str | None = Field(None, description="NVIDIA's PConv irregular mask set; None: generated masks")
    pconv_polarity: MaskPolarity = "hole-white"
    pconv_select: PConvSelect = Field("ratio", description="how a training stage picks the PConv masks of its "
                                      "hole-ratio window: by measured ratio, or by the released list slicing")
    eval_root: str | None = Field(None, description="the user's own evaluation masks (PNG, any depth, the working "
                                  "size's aspect); None: drawn from pconv_root, else generated")
    eval_polarity: MaskPolarity = Field("hole-white", description="what white is in eval_root's masks")
    seed: int = 0


class Preset(StrictModel):
    tpami_preset: str | None = Field(None, description="the TPAMI 2024 preset (same image size) whose model and "
                              "training settings the `tpami` variant trains on this preset's data; None in the "
                              "TPAMI presets themselves, where `tpami` is their own model")
    model: ModelConfig
    data: DataConfig
    masks: MaskConfig = MaskConfig()
    pvqvae_train: PVQVAETrainConfig
    transformer_train: TransformerTrainConfig
    sample: SampleConfig = SampleConfig()
    evaluate: MetricProtocol = MetricProtocol()
    frontier: FrontierConfig = FrontierConfig()

    @model_validator(mode="after")
    def _resize_covers_crop(self) -> Preset:
        if self.data.train_resize is not None and self.data.train_resize < self.model.image_size:
            raise ValueError(f"data.train_resize ({self.data.train_resize}) must be at least model.image_size "
                             f"({self.model.image_size}): training crops are image_size pixels wide")
        return self


PRESET_FILE = Path(__file__).with_name("presets.yaml")


def load_presets(path: Path = PRESET_FILE) -> dict[str, Preset]:
    """Every preset of the file, validated: an unknown key or a bad value is an error naming both."""
    data = read_yaml_mapping(path, "a mapping of preset names to settings")
    presets = {}
    for name, settings in data.items():
        try:
            presets[name] = Preset.model_validate(settings or {})
        except ValidationError as err:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
            raise InputError(f"{path}: preset {name!r}: {problems}") from None
    for name, settings in presets.items():
        linked = presets.get(settings.tpami_preset) if settings.tpami_preset is not None else settings
        if linked is None or linked.model.generation != "tpami2024" or linked.tpami_preset is not None \
                or linked.model.image_size != settings.model.image_size:
            raise InputError(f"{path}: preset {name!r}: tpami_preset: expected a TPAMI 2024 preset of "
                             f"{settings.model.image_size} px, got {settings.tpami_preset!r}")
    return presets


PRESETS: dict[str, Preset] = load_presets()


def preset(name: str) -> Preset:
    if name not in PRESETS:
        raise InputError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}")
    return PRESETS[name]


def variant_preset(preset_name: str, variant: str) -> str:
    """The preset whose model and training settings a variant of `preset_name` uses: its `tpami_preset` for the
    tpami variant, else the preset itself."""
    return (preset(preset_name).tpami_preset or preset_name) if variant == TPAMI_VARIANT else preset_name


def model_config(preset_name: str, variant: str = "put") -> ModelConfig:
    return apply_variant(preset(variant_preset(preset_name, variant)).model, variant)

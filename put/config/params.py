"""`params.yaml`: the pipeline's single source of knobs (preset, overrides, per-variant overrides, official,
seeds), validated on load. The ablation switches themselves are defined once, in
put.config.model.apply_variant (docs/pipeline.md, "Parameters")."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, field_validator

from put.config.external import EXTERNAL_PREFIX, ExternalMethod
from put.config.model import TPAMI_VARIANT, VARIANTS, ModelConfig, StrictModel, Variant, apply_variant
from put.config.presets import PRESETS, Preset
from put.errors import InputError
from put.io.yamlfile import YamlFileError, read_yaml_mapping


class ParamsError(InputError):
    pass


# The preset sections whose `seed` a seed replicate shifts: training and sampling randomness. The data split and
# the evaluation masks keep theirs, so that every replicate is measured on the same test images and masks.
REPLICATED_SEEDS = ("pvqvae_train", "transformer_train", "sample")
# What `tpami` takes from its TPAMI preset (model and training); data, masks, sampling and evaluation stay the
# preset's, so both generations are measured alike. Resolved under `tpami.` (`settings_prefix`).
TPAMI_SECTIONS = ("pvqvae_train", "transformer_train")


def settings_prefix(variant: str) -> str:
    """Where a variant's training sections lie in the resolved parameters: at the top, or under `tpami.`."""
    return f"{TPAMI_VARIANT}." if variant == TPAMI_VARIANT else ""


def deep_merge(base: dict, changes: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _nullable(annotation: Any) -> bool:
    union = get_origin(annotation) in (Union, UnionType)
    return annotation is type(None) or (union and type(None) in get_args(annotation))


def _model_of(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def without_unset(changes: dict, model: type[BaseModel]) -> dict:
    """Overrides minus the nulls that mean "the preset's value": a null on a field that cannot be None. params.yaml
    lists every such field with null, so that `dvc exp run -S overrides.<section>.<key>=<value>` finds its key; on a
    field that can be None (data.root, say) a null sets it to None."""
    kept = {}
    for key, value in changes.items():
        field = model.model_fields.get(key)  # unknown keys stay, for validation to name them
        sub = _model_of(field.annotation) if field is not None else None
        if isinstance(value, dict) and sub is not None:
            kept[key] = without_unset(value, sub)
        elif not (value is None and field is not None and not _nullable(field.annotation)):
            kept[key] = value
    return kept


def unset_overrides(model: type[BaseModel]) -> dict:
    """Every field of `model` that cannot be None, nested, with null: what params.yaml's overrides list."""
    skeleton = {}
    for key, field in model.model_fields.items():
        sub = _model_of(field.annotation)
        if sub is not None:
            skeleton[key] = unset_overrides(sub)
        elif not _nullable(field.annotation):
            skeleton[key] = None
    return skeleton


def describe(err: ValidationError, prefix: str, source: str) -> str:
    """One line per invalid key under a header; a single invalid key on the header's line."""
    lines = []
    for e in err.errors():
        where = ".".join(str(p) for p in (prefix, *e["loc"]) if p != "")
        message = e["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {message}" + ("" if e["type"] == "missing" else f" (got {e.get('input')!r})"))
    if len(lines) == 1:
        return f"{source}: invalid parameters: {lines[0]}"
    return "\n  ".join([f"{source}: invalid parameters:", *lines])


OFFICIAL_PREFIX = "official_"  # an official entry NAME is evaluated under the label official_NAME
SEED_INFIX = "_seed"  # seed replicate S of a variant lies under the label <variant>_seed<S>


def replicate_label(variant: str, seed: int | str) -> str:
    """The label of a variant's seed replicate (its files and runs); seed 0 is the base run, the plain name."""
    return f"{variant}{SEED_INFIX}{seed}" if str(seed) != "0" else variant


class OfficialCheckpoint(StrictModel):
    """One released transformer checkpoint of the authors (it holds its P-VQVAE), imported and evaluated under
    our protocol as a row of Table 1 ("official weights, our protocol")."""

    transformer: str = Field(description="path to their transformer .pth")
    variant: Variant = Field("put", description="the ablation it was trained as (tok and qua0 look like put)")
    preset: str | None = Field(None, description="the preset whose model it is, e.g. ffhq_tpami256 for their TPAMI "
                               "2024 weights (None: this run's preset); sampled and evaluated as this run's")
    model: dict[str, Any] = Field(default_factory=dict, description="ModelConfig fields over the preset's, for "
                                  "checkpoints whose sizes differ from the preset's")


class Params(StrictModel):
    preset: str = "demo"
    overrides: dict[str, Any] = Field(default_factory=dict)
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)
    official: dict[str, OfficialCheckpoint] = Field(default_factory=dict)
    external: dict[str, ExternalMethod] = Field(default_factory=dict)  # other methods on our masks (external.py)
    # Seed replicates beyond the base run (seed 0): each trains, samples and evaluates every variant once more
    # with every training and sampling seed of the preset plus S, on the same test images and masks.
    seeds: list[int] = Field(default_factory=list)
    seed: int = Field(0, ge=0, exclude=True)  # the replicate this process runs (a stage's --seed)
    source: str = Field("built-in defaults", exclude=True)
    # The merged and validated preset, with what it was made from: computed once per load, shared by replicates.
    _merged: tuple[str, Preset] | None = PrivateAttr(None)

    @field_validator("seeds")
    @classmethod
    def _replicates(cls, value: list[int]) -> list[int]:
        if 0 in value or any(s < 0 for s in value) or len(set(value)) != len(value):
            raise ValueError("expected distinct positive seeds: seed 0 is the base run, which always runs under the "
                             "stages' plain names; list the extra replicates, e.g. [1, 2]")
        return value

    @field_validator("official", "external")
    @classmethod
    def _names(cls, value: dict[str, Any]) -> dict[str, Any]:
        bad = [name for name in value if not re.fullmatch(r"[A-Za-z0-9_]+", name)]
        if bad:
            raise ValueError(f"entry names must be letters, digits and _ (they name files), got {bad}")
        return value

    def evaluated_labels(self) -> list[str]:
        """Every label an evaluation is written under: the variants, their seed replicates, official_<name> per
        official entry, then external_<name> per external entry."""
        return [*VARIANTS, *(replicate_label(v, s) for s in self.seeds for v in VARIANTS),
                *(OFFICIAL_PREFIX + name for name in self.official),
                *(EXTERNAL_PREFIX + name for name in self.external)]

    def replicate(self, seed: int) -> Params:
        """These parameters for seed replicate `seed` (0: the base run)."""
        return self.model_copy(update={"seed": int(seed)})

    def checkpoint_variant(self, label: str) -> str | None:
        """The variant a checkpoint evaluated under `label` must record: the variant itself, or an official
        entry's `variant`; None for official_NAME without an entry here (nothing to check against)."""
        if label in VARIANTS:
            return label
        entry = self.official.get(label.removeprefix(OFFICIAL_PREFIX))
        return entry.variant if entry is not None and label.startswith(OFFICIAL_PREFIX) else None

    def label_generation(self, label: str) -> str | None:
        """The architecture (cvpr2022 / tpami2024) a checkpoint evaluated under `label` must have; None for an
        official_NAME without an entry here."""
        if label in VARIANTS:
            return self.variant_config(label).generation
        name = label.removeprefix(OFFICIAL_PREFIX)
        return self.official_config(name).generation if label != name and name in self.official else None

    def official_config(self, name: str) -> ModelConfig:
        """The model an official entry is imported into: the preset's, the entry's overrides, its variant."""
        entry = self.official[name]
        if entry.preset is not None and entry.preset not in PRESETS:
            raise ParamsError(f"{self.source}: official.{name}.preset: unknown preset {entry.preset!r}; expected one "
                              f"of {', '.join(PRESETS)}")
        model = PRESETS[entry.preset].model if entry.preset is not None else self.resolved().model
        try:
            base = ModelConfig.model_validate(deep_merge(model.model_dump(), entry.model))
        except ValidationError as err:
            raise ParamsError(describe(err, f"official.{name}.model", self.source)) from None
        return apply_variant(base, entry.variant)

    def tpami_source(self) -> Preset:
        """The preset the tpami variant takes its model and training from: the base preset's `tpami_preset`, or
        the base preset itself when it is a TPAMI preset."""
        base = self.resolved()
        if base.tpami_preset is None:
            if base.model.generation != "tpami2024":
                raise ParamsError(f"{self.source}: preset {self.preset!r} names no TPAMI preset (tpami_preset), "
                                  f"which its `{TPAMI_VARIANT}` variant needs; expected one of "
                                  f"{', '.join(n for n, p in PRESETS.items() if p.model.generation == 'tpami2024')}")
            return base
        if base.tpami_preset not in PRESETS:
            raise ParamsError(f"{self.source}: tpami_preset: unknown preset {base.tpami_preset!r}; expected one of "
                              f"{', '.join(PRESETS)}")
        return self._replicated(PRESETS[base.tpami_preset])

    def resolved_for(self, variant: str) -> Preset:
        """The preset a variant's stages read: the resolved preset, with the tpami variant's model and training
        sections from its TPAMI preset (`TPAMI_SECTIONS`)."""
        preset = self.resolved()
        if variant != TPAMI_VARIANT or preset.tpami_preset is None:
            return preset
        linked = self.tpami_source()
        return preset.model_copy(update={"model": linked.model,
                                         **{name: getattr(linked, name) for name in TPAMI_SECTIONS}})

    def _replicated(self, preset: Preset) -> Preset:
        """The preset with this replicate's shift of the training and sampling seeds."""
        if not self.seed:
            return preset
        shifted = {name: getattr(preset, name).model_copy(update={"seed": getattr(preset, name).seed + self.seed})
                   for name in REPLICATED_SEEDS}
        return preset.model_copy(update=shifted)

    def resolved(self) -> Preset:
        return self._replicated(self._merged_preset())

    def _merged_preset(self) -> Preset:
        """The preset with the overrides merged and validated (any replicate's), made once per preset and
        overrides."""
        key = json.dumps([self.preset, self.overrides], sort_keys=True, default=str)
        if self._merged is not None and self._merged[0] == key:
            return self._merged[1]
        if self.preset not in PRESETS:
            raise ParamsError(f"{self.source}: preset: unknown preset {self.preset!r}; "
                              f"expected one of {', '.join(PRESETS)}")
        try:
            preset = Preset.model_validate(deep_merge(PRESETS[self.preset].model_dump(),
                                                      without_unset(self.overrides, Preset)))
        except ValidationError as err:
            raise ParamsError(describe(err, "overrides", self.source)) from None
        self._merged = (key, preset)
        return preset

    def variant_config(self, variant: str) -> ModelConfig:
        if variant not in VARIANTS:
            raise ParamsError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
        if variant == TPAMI_VARIANT:
            self.tpami_source()  # a CVPR preset without a TPAMI link: the error names the presets that fit
        base = apply_variant(self.resolved_for(variant).model, variant)
        try:
            return ModelConfig.model_validate(deep_merge(base.model_dump(),
                                                         without_unset(self.variants.get(variant, {}), ModelConfig)))
        except ValidationError as err:
            raise ParamsError(describe(err, f"variants.{variant}", self.source)) from None

    def resolved_document(self) -> dict[str, Any]:
        """Every value the stages use, resolved: the preset's sections with the overrides applied, and each
        variant's complete model config under `variants`. The `config` stage writes it as the file whose
        sections DVC tracks per stage; the Snakefile takes its rules' params from it."""
        tpami = self.resolved_for(TPAMI_VARIANT)
        return {"preset": self.preset, "seeds": list(self.seeds), **self.resolved().model_dump(mode="json"),
                "variants": {v: self.variant_config(v).model_dump(mode="json") for v in VARIANTS},
                TPAMI_VARIANT: {name: getattr(tpami, name).model_dump(mode="json") for name in TPAMI_SECTIONS},
                "official": {name: {"transformer": entry.transformer, "variant": entry.variant,
                                    "preset": entry.preset,
                                    "model": self.official_config(name).model_dump(mode="json")}
                             for name, entry in self.official.items()},
                "external": {name: entry.model_dump(mode="json") for name, entry in self.external.items()}}

    def dag_id(self) -> str:
        """Hash of everything that defines a DAG configuration (the resolved document of the base run): the
        same for all its seed replicates, which MLflow groups under it."""
        document = self.replicate(0).resolved_document()
        del document["seeds"]
        return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:12]

    def check(self) -> Params:
        """Validate everything now, so a typo fails before any work starts."""
        unknown = set(self.variants) - set(VARIANTS)
        if unknown:
            raise ParamsError(f"{self.source}: variants: unknown variant(s) {sorted(unknown)}; "
                              f"expected some of {', '.join(VARIANTS)}")
        self.resolved()
        for variant in VARIANTS:
            self.variant_config(variant)
        for name in self.official:
            self.official_config(name)
        return self


def load_params(path: str | os.PathLike | None = None, preset: str | None = None) -> Params:
    """Params from a YAML file (or the defaults when path is None), optionally with another preset."""
    data: dict[str, Any] = {}
    source = "built-in defaults"
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ParamsError(f"{path}: parameter file not found")
        try:  # an empty file is an error: without a file at all, the defaults apply
            data = read_yaml_mapping(path, "parameters such as `preset: demo`; without a parameter file "
                                           "the defaults apply")
        except YamlFileError as err:
            raise ParamsError(str(err)) from None
        source = str(path)
    if preset is not None:
        data["preset"] = preset
    return params_from_mapping(data, source)


def params_from_mapping(data: dict[str, Any], source: str) -> Params:
    """Params from an already-parsed mapping (Snakemake's config, say), validated; `source` names it in errors."""
    sections = ("overrides", "variants", "official", "external", "seeds")
    data = {k: v for k, v in data.items() if not (k in sections and v is None)}
    try:
        params = Params.model_validate({**data, "source": source})
    except ValidationError as err:
        raise ParamsError(describe(err, "", source)) from None
    return params.check()

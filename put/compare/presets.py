"""The preset each result of `put compare` is read under: its own params.yaml's, else `--preset`, else the stages'
default; a metrics folder's is its evaluation record's. Results of different presets are refused
(docs/statistics.md, "Did a change help?")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from put.config.params import Params
from put.config.presets import PRESETS
from put.errors import FileMismatchError, InputError
from put.io.yamlfile import parse_yaml_mapping

DEFAULT_PRESET: str = Params.model_fields["preset"].default
OWN = "its params.yaml"  # the source of a preset read from the result's own parameter file
RECORD = "its evaluation record"
PARAMS_EXPECTED = "parameters such as `preset: demo`"  # the source of a folder of metrics files' preset


@dataclass(frozen=True)
class OwnPreset:
    """A result's preset and where it came from (its params.yaml, --preset, the default, its record)."""

    preset: str
    source: str

    def __str__(self) -> str:
        return f"{self.preset} ({self.source})"


def preset_of(params: bytes | None, shown: str, asked: str | None, source: str = OWN) -> OwnPreset:
    """The preset a parameter file's bytes name (`shown`: the file, as errors name it; `source`: as the result's
    preset is shown), or for none (None) the one asked for, else the default; a file that is not YAML, not a
    mapping, or names an unknown preset, is an error naming it (an empty one too, as for the stages)."""
    if params is None:
        return OwnPreset(asked, "--preset: no params.yaml") if asked else \
            OwnPreset(DEFAULT_PRESET, "the default: no params.yaml")
    data = parse_yaml_mapping(params, shown, PARAMS_EXPECTED)
    preset = data.get("preset", DEFAULT_PRESET)
    if not isinstance(preset, str) or preset not in PRESETS:
        raise FileMismatchError(f"{shown}: preset {preset!r} is not a known preset (one of {', '.join(PRESETS)})")
    return OwnPreset(preset, source)


def check_presets(names: Sequence[str], presets: Sequence[OwnPreset | None], asked: str | None) -> None:
    """Every result of one preset: `--preset`, when given, and that of the first with one (the baseline, unless
    it is not known yet: None, a folder of metrics files before its record is read); else an error naming the
    result that differs."""
    known = [(name, own) for name, own in zip(names, presets) if own is not None]
    if not known:
        return
    first, base = known[0]
    for name, own in known:
        if asked is not None and own.preset != asked:
            raise InputError(f"{name}: preset {own} vs --preset {asked}: a result is read under its own "
                             "params.yaml's preset; compare results of one preset")
        if own.preset != base.preset:
            raise FileMismatchError(f"cannot pair {first} and {name}: {name}: preset {own} vs {first}: "
                                    f"{base}; compare results of one preset")

"""Sampling and evaluation settings of the pipeline (docs/fidelity.md, "Metric protocol")."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from put.config.bins import EVAL_GROUPS
from put.config.model import StrictModel
from put.errors import FileMismatchError, InputError

ALL_AT_ONCE = 2 ** 31  # tokens per step that fixes every masked position in one forward
RELEASED_SCHEDULES = ("cosine", "linear", "average", "cosine-1", "linear-1")  # the TPAMI release's names
SCHEDULE_FORMS = ("an integer N (N tokens per forward; N <= 0: all in one forward) or NAME_S with NAME one of "
                  f"{', '.join(RELEASED_SCHEDULES)} (S forwards)")


def parse_schedule(text: str) -> tuple[str, int]:
    """A schedule string of the TPAMI release's `num_token_per_iter` -> ("tokens", N) or (NAME, S)."""
    text = str(text).strip()
    if re.fullmatch(r"-?\d+", text):
        n = int(text)
        return "tokens", n if n > 0 else ALL_AT_ONCE
    found = re.fullmatch(r"([a-z]+(?:-1)?)_(\d+)", text)
    if found is None or found[1] not in RELEASED_SCHEDULES or int(found[2]) < 1:
        raise InputError(f"unknown sampling schedule {text!r}: expected {SCHEDULE_FORMS}")
    return found[1], int(found[2])


MIN_TAIL = 25  # resamples beyond each bound at the least: fewer cannot place a percentile bound at all


def resamples_needed(level: float) -> int:
    """The fewest resamples that place percentile bounds at `level` (MIN_TAIL beyond each)."""
    return math.ceil(2 * MIN_TAIL / (1 - level))


def check_resamples(resamples: int, level: float) -> None:
    """A level in (0, 1) and enough resamples to place its percentile bounds (MIN_TAIL beyond each). A necessary
    check only: the expanded interval uses a wider level, checked where it is known (put/stats/bootstrap.py)."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if resamples < (needed := resamples_needed(level)):
        raise ValueError(f"{resamples} resamples cannot place {level:.0%} percentile bounds; at least "
                         f"{needed} are needed ({MIN_TAIL} beyond each bound)")


class SampleConfig(StrictModel):
    top_k: int = Field(50, ge=1, description="K of the pluralistic mode (Table 1: PUT_50)")
    temperature: float = Field(1.0, gt=0, description="multiplies the logits (released code)")
    tokens_per_step: int = Field(1, ge=1, description="1: Algorithm 1; N: N tokens per forward")
    schedule: str | None = Field(None, description="the TPAMI release's schedule (cosine_S, linear_S, average_S: "
                                 "S forwards; an integer: tokens per forward); replaces tokens_per_step")
    schedule_scope: Literal["image", "batch"] = Field(
        "image", description="a schedule's counts from each image's masked patches, or from the batch's most "
                             "masked image as released (an image's result then depends on its batch)")
    position_rule: Literal["logit", "prob"] = "logit"
    diversity_samples: int = Field(10, ge=2, description="samples per input on the fine bins (paper: 10)")
    diversity_images: int | None = Field(None, ge=1, description="test images used for the fine-bin curves "
                                         "(None: all)")
    composite: bool = Field(False, description="paste known pixels back (the paper's evaluation does not)")
    batch_size: int = Field(64, ge=1)
    seed: int = 0

    @field_validator("schedule")
    @classmethod
    def _known_schedule(cls, v: str | None) -> str | None:
        if v is not None:
            parse_schedule(v)
        return v


# The compositing rule: "raw" scores results as returned (the paper's protocol); "pasted" pastes the input's known
# pixels over every result first. Ranked or paired rows share one rule (docs/external.md, "One rule per block").
KnownPixels = Literal["raw", "pasted"]
RANKED_RULE: KnownPixels = "pasted"  # Table 1's ranked comparison of methods
RULE_CLAUSES: dict[str, str] = {
    "raw": "every row scored on the results as returned, known region included (PUT: the decoder's raw output, "
           "as in the paper's evaluation)",
    "pasted": "every row scored with the input's known pixels pasted back over its results at evaluation time",
}


class MixedRulesError(FileMismatchError):
    """Rows scored under different compositing rules were about to be ranked or paired."""


def one_rule(rules: Mapping[str, str], what: str) -> str:
    """The one compositing rule of `rules` (a row's label -> its rule), or MixedRulesError naming the rows of
    each rule: ranking or pairing them would compare protocols, not methods."""
    found: dict[str, list[str]] = {}
    for label, rule in rules.items():
        found.setdefault(str(rule), []).append(str(label))
    if len(found) > 1:
        listed = "; ".join(f"{rule}: {', '.join(dict.fromkeys(labels))}" for rule, labels in found.items())
        raise MixedRulesError(f"{what}: rows scored under different compositing rules (evaluate.known_pixels; "
                              f"{listed}) cannot be ranked or paired -- score them under one rule")
    return next(iter(found), "")  # no rows: no rule


class MetricProtocol(StrictModel):
    """Every evaluation choice, defaulting to the released scripts'. Stored beside every result, so that numbers of
    different protocols are never mixed."""

    # The released cal_psnr.py converts with cv2.cvtColor(RGB2GRAY) (uint8 fixed point) before the metrics. "pil":
    # PIL's convert('L') (differs by 1 on about 0.13% of colours); "none": the RGB channels.
    grayscale: Literal["opencv", "pil", "none"] = "opencv"
    # Uniform 51x51 window as in the released scripts. With ssim_gaussian=True scikit-image uses an
    # 11-tap sigma=1.5 Gaussian and win_size only sets the border it crops.
    ssim_window: int = Field(51, ge=3)
    ssim_gaussian: bool = False
    data_range: int = Field(255, gt=0)  # images are uint8
    mae: Literal["relative"] = "relative"  # sum|a-b| / sum(a+b) per image on [0,1]
    lpips_net: Literal["vgg", "alex"] = "vgg"
    lpips_pairs: int = Field(5, ge=1)  # random distinct sample pairs per input
    lpips_spatial: bool = True  # released scripts: LPIPS(spatial=True), then the map's mean
    fid_backend: Literal["torch-fidelity"] = "torch-fidelity"
    # The compositing rule (RULE_CLAUSES) of an evaluation's main files; every evaluation also writes its Table 1
    # groups under RANKED_RULE beside them (put/stages/evaluate.py), the files Table 1 ranks methods on.
    known_pixels: KnownPixels = Field("raw", description="raw: results scored as returned (the paper's protocol); "
                                      "pasted: the input's known pixels pasted back before scoring")
    # Cluster bootstrap over sources (docs/coverage.md). 20000 resamples keep two printed digits stable across
    # seeds; FID (an eigendecomposition per resample) draws 1200, enough for the expanded 95% interval at 50
    # sources (1181), and prints no digit finer than its Monte-Carlo error.
    interval_level: float = Field(0.95, gt=0, lt=1)
    bootstrap_resamples: int = Field(20000, ge=1)
    fid_bootstrap_resamples: int = Field(1200, ge=1)
    bootstrap_seed: int = 0
    # No interval below this many sources per cell: the smallest n whose measured coverage stays within 2 points
    # of 95% (docs/coverage.md).
    min_units: int = Field(50, ge=2, description="fewest independent test units (sources) an interval is "
                           "drawn from; below it the cell says why")
    multiplicity: Literal["holm", "bonferroni", "bh", "none"] = Field(
        "holm", description="error control over a table's family of paired differences (put/stats/multiplicity.py)")

    @field_validator("bootstrap_resamples", "fid_bootstrap_resamples")
    @classmethod
    def _enough_resamples(cls, v: int, info: ValidationInfo) -> int:
        if "interval_level" in info.data:  # else the level's own error is reported
            check_resamples(v, info.data["interval_level"])
        return v

    @field_validator("ssim_window")
    @classmethod
    def _odd(cls, v: int) -> int:
        if v % 2 == 0:
            raise ValueError(f"ssim_window must be odd, got {v}")
        return v


class FrontierConfig(StrictModel):
    """The speed/quality frontier of the full model (`put frontier`): sampling settings, each at every top-K, and
    their inputs. Cost: the settings' forward passes at `batch_size`, `timing_repeats` times."""

    tokens_per_step: list[int] = Field([1, 2, 4, 8, 16, 32], description="N tokens per forward (1: Algorithm 1)")
    schedule_steps: list[int] = Field([4, 8, 16], description="cosine confidence schedule over exactly S steps")
    schedules: list[str] = Field([], description="the TPAMI release's schedules (cosine_S, linear_S, average_S), "
                                 "each image's counts from its own masked patches")
    top_k: list[int] = Field([50, 200], description="K of every setting above (the authors' later release: 200)")
    argmax: bool = Field(True, description="also every position at once by argmax (PUT_all, one forward)")
    groups: list[str] = Field(["40-60"], description="mask groups of the evaluation masks (put.config.bins)")
    images: int | None = Field(100, ge=1, description="the first N test images by name (None: all)")
    samples: int = Field(4, ge=1, description="samples per image (argmax: one); 4 give the 5 distinct pairs "
                         "LPIPS diversity draws by default (evaluate.lpips_pairs)")
    batch_size: int = Field(64, ge=1)
    timing_repeats: int = Field(2, ge=1, description="time per image: the best of this many runs of the first "
                                "batch (a shared machine's noise only ever adds time)")
    seed: int = 0

    @field_validator("tokens_per_step", "schedule_steps", "top_k")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(n < 1 for n in v):
            raise ValueError(f"every value must be >= 1, got {v}")
        return v

    @field_validator("schedules")
    @classmethod
    def _released_schedules(cls, v: list[str]) -> list[str]:
        for text in v:
            if parse_schedule(text)[0] == "tokens":
                raise ValueError(f"{text!r}: list tokens per step under tokens_per_step; schedules takes NAME_S")
        return v

    @field_validator("groups")
    @classmethod
    def _known_groups(cls, v: list[str]) -> list[str]:
        if not v or any(g not in EVAL_GROUPS for g in v):
            raise ValueError(f"expected one or more of {', '.join(EVAL_GROUPS)}, got {v}")
        return v

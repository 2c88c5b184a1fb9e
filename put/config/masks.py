"""Training-mask settings of one stage: the mask knobs of the released ImageListDataset (configs under
configs/put_cvpr2022/ of the authors' code; released names in the comments)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from put.config.model import StrictModel

# How a stage picks the PConv masks of its hole-ratio window (put.masks.training.pconv_candidates).
PConvSelect = Literal["ratio", "list"]
# The mask settings (of MaskConfig) training reads; the evaluation masks' own (eval_root, eval_polarity, seed)
# retrain nothing.
TRAINING_MASK_KEYS = ("pconv_root", "pconv_polarity", "pconv_select")
# What white is in a folder of mask files (ours are written hole-white, as NVIDIA's PConv set).
MaskPolarity = Literal["hole-white", "keep-white"]

def _check_range(name: str, bounds: tuple[float, float], top: float) -> None:
    lo, hi = bounds
    if not 0 <= lo < hi <= top:
        raise ValueError(f"{name} must be (lo, hi) with 0 <= lo < hi <= {top}, got {bounds!r}")


class StrokeConfig(StrictModel):
    """Strokes drawn as known pixels until a keep ratio is reached (`stroken_mask_params`); sizes in pixels
    at 256x256, scaled with the image size."""

    keep_ratio: tuple[float, float] = Field(description="known fraction drawn uniformly from this range (keep_ratio)")
    min_vertices: int = Field(5, ge=1, description="minVertex")
    max_vertices: int = Field(10, ge=1, description="maxVertex")
    max_length: int = Field(100, ge=0, description="maxLength")
    min_brush: int = Field(10, ge=1, description="minBrushWidth")
    max_brush: int = Field(30, ge=1, description="maxBrushWidth")
    max_angle: int = Field(360, ge=0, description="maxAngle (degrees)")
    min_area: int = Field(64, ge=0, description="enclosed holes of a smaller contour area are filled (min_area)")
    rectangles: tuple[int, int] = Field((0, 0), description="rectangles cleared from each stroke, a number drawn "
                                        "from this range (minRectangle, maxRectangle; TPAMI transformers: 0-3)")
    rectangle_ratio: tuple[float, float] = Field((0.1, 0.8), description="side of such a rectangle as a fraction "
                                                 "of the image's (minRectangleRatio, maxRectangleRatio)")

    @model_validator(mode="after")
    def _ranges(self) -> StrokeConfig:
        _check_range("keep_ratio", self.keep_ratio, 1.0)
        _check_range("rectangle_ratio", self.rectangle_ratio, 1.0)
        if not 0 <= self.rectangles[0] <= self.rectangles[1]:
            raise ValueError(f"rectangles must be (lo, hi) with 0 <= lo <= hi, got {self.rectangles!r}")
        if self.min_vertices > self.max_vertices or self.min_brush > self.max_brush:
            raise ValueError(f"need min_vertices <= max_vertices and min_brush <= max_brush, got vertices "
                             f"{self.min_vertices}..{self.max_vertices}, brush {self.min_brush}..{self.max_brush}")
        return self


class TrainingMaskConfig(StrictModel):
    """How one stage draws its mask m: a PConv mask (or, with no PConv set configured, a generated irregular
    mask) with irregular_prob, else strokes; then all-hole with all_hole_prob, else blocky with blocky_prob."""

    irregular_prob: float = Field(ge=0, le=1, description="p of a PConv / irregular mask, else strokes "
                                  "(use_provided_mask)")
    pconv_hole_ratio: tuple[float, float] = Field(
        description="PConv masks used: hole ratio at the working size in [lo, hi] (use_provided_mask_ratio)")
    stroke: StrokeConfig
    all_hole_prob: float = Field(0.0, ge=0, le=1, description="p of a mask that hides everything (zero_mask)")
    blocky_prob: float = Field(0.0, ge=0, le=1, description="p of a mask resampled at token resolution "
                               "(mask_low_to_high)")

    @model_validator(mode="after")
    def _window(self) -> TrainingMaskConfig:
        _check_range("pconv_hole_ratio", self.pconv_hole_ratio, 1.0)
        return self

"""Evaluation metrics of the paper's Table 1, its diversity score, and their uncertainty.

- `put.metrics.image`: MetricProtocol (every protocol choice, with the paper's defaults) and
  per-image PSNR / SSIM / MAE.
- `put.metrics.fid`: Inception features of result and target files (torch-fidelity) and their FID.
- `put.metrics.diversity`: mean pairwise LPIPS between samples of the same input.
- `put.metrics.summary`: a cell's numbers: each metric's value with its interval, or why there is none (the
  stages read files, call these, write what they return).
- `put.metrics.bootstrap`: confidence intervals (a seeded cluster bootstrap over the sources of the test images;
  paired differences with p-values, over seed replicates too; intervals over seeds; no interval below
  `min_units`); `put.metrics.fid_bootstrap`: FID's, exact on weighted resamples.
- `put.metrics.multiplicity`: Holm / Bonferroni / Benjamini-Hochberg over a family of differences.
- `put.metrics.coverage`: how often the intervals hold the truth, by simulation (`put coverage`).

FID and LPIPS need pretrained networks that may be missing on an offline machine; they then return a
MetricValue that says so instead of a number. fid/diversity are not imported here so that per-image
metrics do not pull in torch-fidelity and lpips.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricValue:
    """A metric's value, or why it could not be computed (exactly one of the two is set)."""

    value: float | None
    unavailable: str | None = None

    def __post_init__(self) -> None:
        if (self.value is None) == (self.unavailable is None):
            raise ValueError("MetricValue needs exactly one of value / unavailable")

    @classmethod
    def missing(cls, reason: str) -> "MetricValue":
        return cls(None, reason)

    @property
    def available(self) -> bool:
        return self.value is not None


from put.metrics.image import MetricProtocol, image_metrics, metrics_table  # noqa: E402

__all__ = ["MetricValue", "MetricProtocol", "image_metrics", "metrics_table"]

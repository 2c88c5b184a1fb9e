"""Evaluation metrics of the paper's Table 1 and its diversity score: per-image PSNR / SSIM / MAE (image.py),
FID (fid.py), LPIPS diversity (diversity.py), a cell's numbers with their intervals (summary.py; the intervals
themselves: put/stats/).

FID and LPIPS return a MetricValue saying so when their networks are missing offline. fid/diversity are not
imported here, so that per-image metrics do not pull in torch-fidelity and lpips.
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
    def missing(cls, reason: str) -> MetricValue:
        return cls(None, reason)

    @property
    def available(self) -> bool:
        return self.value is not None


_IMAGE = ("MetricProtocol", "image_metrics", "metrics_table")


def __getattr__(name: str):
    """The per-image metrics, loaded on first use: they need torch, which readers of the evaluation's files
    (`put compare`) do not."""
    if name in _IMAGE:
        from put.metrics import image

        return getattr(image, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MetricValue", "MetricProtocol", "image_metrics", "metrics_table"]

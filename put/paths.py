"""Where every pipeline artefact lives, relative to the repository root (one place for the patterns;
the Snakefile imports these, dvc.yaml spells them out and a test checks that the two agree)."""

from __future__ import annotations

from pathlib import Path

from put.config import PVQVAE_OF_VARIANT


def split_dir(preset: str) -> Path:
    return Path("data") / preset / "splits"


def masks_dir(preset: str) -> Path:
    """Frozen evaluation masks (manifest.csv) and the ground truth at the working resolution (gt/)."""
    return Path("data") / preset / "masks"


def pvqvae_checkpoint(preset: str, variant: str) -> Path:
    """`tok` and `qua0` resolve to the full model's P-VQVAE (a wildcard such as "{variant}" stays as it is)."""
    return Path("runs") / preset / PVQVAE_OF_VARIANT.get(variant, variant) / "pvqvae.pt"


def transformer_checkpoint(preset: str, variant: str) -> Path:
    return Path("runs") / preset / variant / "transformer.pt"


def samples_dir(preset: str, variant: str) -> Path:
    return Path("results") / preset / "samples" / variant


def metrics_file(preset: str, variant: str) -> Path:
    return Path("results") / preset / "metrics" / f"{variant}.json"


def metrics_info_file(metrics: Path) -> Path:
    """Beside a metrics file: what DVC's flat numbers leave out (protocol, sampling, why a value is missing)."""
    return Path(metrics).with_name(f"{Path(metrics).stem}_info.json")


def metrics_bins_file(metrics: Path) -> Path:
    """Beside a metrics file: the fine-bin values against the hole ratio, a CSV `dvc plots` can draw."""
    return Path(metrics).with_name(f"{Path(metrics).stem}_bins.csv")


def frontier_dir(preset: str) -> Path:
    """The speed/quality frontier of the full model: metrics.json, frontier.csv/.tex/.png, samples/."""
    return Path("results") / preset / "frontier"


def report_dir(preset: str) -> Path:
    return Path("reports") / preset


def benchmark_dir() -> Path:
    return Path("reports") / "benchmarks"

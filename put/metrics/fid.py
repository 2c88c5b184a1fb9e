"""FID between a folder of results and a folder of targets, with torch-fidelity, offline only."""

from __future__ import annotations

from pathlib import Path

import torch

from put.metrics import MetricValue
from put.metrics.image import MetricProtocol
from put.pretrained import INCEPTION_FID


def _pngs(folder: Path) -> int:
    # torch-fidelity globs the folder itself (not recursively, samples_find_ext below); count the same set.
    return sum(1 for p in folder.glob("*.png") if p.is_file()) if folder.is_dir() else 0


def fid(result_dir: Path, target_dir: Path, protocol: MetricProtocol) -> MetricValue:
    """FID of the PNGs in result_dir against those in target_dir, or why it cannot be computed."""
    if protocol.fid_backend != "torch-fidelity":  # the Literal allows only this today
        raise ValueError(f"unsupported fid_backend {protocol.fid_backend!r}")
    if reason := INCEPTION_FID.missing():
        return MetricValue.missing(reason)
    for side, folder in (("result", result_dir), ("target", target_dir)):
        if (n := _pngs(Path(folder))) < 2:
            return MetricValue.missing(f"FID needs at least 2 PNG images per side; {side} folder {folder} has {n}")

    import torch_fidelity  # heavy; only needed here

    out = torch_fidelity.calculate_metrics(
        input1=str(result_dir), input2=str(target_dir), fid=True,
        # An explicit path makes torch-fidelity torch.load this file; with None it would call
        # load_state_dict_from_url, which downloads when the cache misses.
        feature_extractor_weights_path=str(INCEPTION_FID.path),
        samples_find_ext="png", samples_find_deep=False,
        cache=False,  # its feature cache is keyed by name, not content: stale results for reused folders
        cuda=torch.cuda.is_available(), verbose=False,
    )
    return MetricValue(float(out["frechet_inception_distance"]))

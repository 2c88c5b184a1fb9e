"""FID of result files against their targets, with torch-fidelity, offline only: the Inception features of both
lists (extracted once), then the value (torch-fidelity's statistics) and, from the same features, its bootstrap
interval or a paired difference (put/stats/fid_interval.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch

from put.io.pretrained import INCEPTION_FID
from put.metrics import MetricValue
from put.metrics.image import MetricProtocol

Features = tuple[np.ndarray, np.ndarray]  # results, targets: N x 2048 each, row i of both the same test image


def linked_folder(files: list[Path], root: Path) -> Path:
    """A folder holding exactly `files` (as symlinks, named in their order): torch-fidelity reads whole folders."""
    root.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(files):
        (root / f"{i:05d}.png").symlink_to(Path(f).resolve())
    return root


def inception_features(result_dir: Path, target_dir: Path, protocol: MetricProtocol) -> Features | MetricValue:
    """torch-fidelity's FID features (N x 2048, file names in sorted order) of the PNGs of both folders, or why
    they cannot be computed."""
    if protocol.fid_backend != "torch-fidelity":  # the Literal allows only this today
        raise ValueError(f"unsupported fid_backend {protocol.fid_backend!r}")
    if reason := INCEPTION_FID.missing():
        return MetricValue.missing(reason)
    for side, folder in (("result", result_dir), ("target", target_dir)):
        # torch-fidelity globs the folder itself (not recursively, samples_find_ext below); count the same set.
        n = sum(1 for p in Path(folder).glob("*.png") if p.is_file()) if Path(folder).is_dir() else 0
        if n < 2:
            return MetricValue.missing(f"FID needs at least 2 PNG images per side; {side} folder {folder} has {n}")

    from torch_fidelity.utils import (  # heavy
        create_feature_extractor,
        extract_featuresdict_from_input_id,
        resolve_feature_extractor,
        resolve_feature_layer_for_metric,
    )

    options = dict(
        input1=str(result_dir), input2=str(target_dir), fid=True,
        # An explicit path makes torch-fidelity torch.load this file; with None it would call
        # load_state_dict_from_url, which downloads when the cache misses.
        feature_extractor_weights_path=str(INCEPTION_FID.path),
        samples_find_ext="png", samples_find_deep=False, cuda=torch.cuda.is_available(), verbose=False)
    layer = resolve_feature_layer_for_metric("fid", **options)
    extractor = create_feature_extractor(resolve_feature_extractor(**options), [layer], **options)
    return tuple(extract_featuresdict_from_input_id(side, extractor, **options)[layer].numpy() for side in (1, 2))


def fid_features(results: list[Path], targets: list[Path], protocol: MetricProtocol) -> Features | MetricValue:
    """The Inception features of result files and their targets (paired by position), or why there are none."""
    with tempfile.TemporaryDirectory() as tmp:
        return inception_features(linked_folder(results, Path(tmp) / "result"),
                                  linked_folder(targets, Path(tmp) / "target"), protocol)


def fid_of_features(features: Features | MetricValue) -> MetricValue:
    """torch-fidelity's FID of two feature sets (its statistics, its matrix square root), or why there is none."""
    if isinstance(features, MetricValue):
        return features
    from torch_fidelity.metric_fid import KEY_METRIC_FID, fid_features_to_statistics, fid_statistics_to_metric

    stats = [fid_features_to_statistics(torch.from_numpy(np.asarray(f))) for f in features]
    return MetricValue(float(fid_statistics_to_metric(*stats, verbose=False)[KEY_METRIC_FID]))

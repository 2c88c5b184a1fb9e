"""FID between a folder of results and a folder of targets, with torch-fidelity, offline only; and its
bootstrap interval, from the same Inception features (extracted once)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from put.metrics import MetricValue
from put.metrics.image import MetricProtocol
from put.pretrained import INCEPTION_FID

Interval = tuple[float, float] | None


def _pngs(folder: Path) -> int:
    # torch-fidelity globs the folder itself (not recursively, samples_find_ext below); count the same set.
    return sum(1 for p in folder.glob("*.png") if p.is_file()) if folder.is_dir() else 0


def inception_features(result_dir: Path, target_dir: Path,
                       protocol: MetricProtocol) -> tuple[np.ndarray, np.ndarray] | MetricValue:
    """torch-fidelity's FID features (N x 2048, file names in sorted order) of both folders, or why they
    cannot be computed."""
    if protocol.fid_backend != "torch-fidelity":  # the Literal allows only this today
        raise ValueError(f"unsupported fid_backend {protocol.fid_backend!r}")
    if reason := INCEPTION_FID.missing():
        return MetricValue.missing(reason)
    for side, folder in (("result", result_dir), ("target", target_dir)):
        if (n := _pngs(Path(folder))) < 2:
            return MetricValue.missing(f"FID needs at least 2 PNG images per side; {side} folder {folder} has {n}")

    from torch_fidelity.utils import (create_feature_extractor, extract_featuresdict_from_input_id,  # heavy
                                      resolve_feature_extractor, resolve_feature_layer_for_metric)

    cuda = torch.cuda.is_available()
    options = dict(
        input1=str(result_dir), input2=str(target_dir), fid=True,
        # An explicit path makes torch-fidelity torch.load this file; with None it would call
        # load_state_dict_from_url, which downloads when the cache misses.
        feature_extractor_weights_path=str(INCEPTION_FID.path),
        samples_find_ext="png", samples_find_deep=False, cuda=cuda, verbose=False)
    layer = resolve_feature_layer_for_metric("fid", **options)
    extractor = create_feature_extractor(resolve_feature_extractor(**options), [layer], **options)
    return tuple(extract_featuresdict_from_input_id(side, extractor, **options)[layer].numpy() for side in (1, 2))


def fid_of_features(features1: np.ndarray, features2: np.ndarray) -> float:
    """torch-fidelity's FID of two feature sets (its statistics, its matrix square root)."""
    from torch_fidelity.metric_fid import KEY_METRIC_FID, fid_features_to_statistics, fid_statistics_to_metric

    stats = [fid_features_to_statistics(torch.from_numpy(np.asarray(f))) for f in (features1, features2)]
    return float(fid_statistics_to_metric(*stats, verbose=False)[KEY_METRIC_FID])


def fid_with_interval(result_dir: Path, target_dir: Path, protocol: MetricProtocol) -> tuple[MetricValue, Interval]:
    """FID and its bootstrap interval over the image pairs (row i of both folders: one test image; the
    folders' files sort in the same order), or why FID cannot be computed (interval None)."""
    features = inception_features(result_dir, target_dir, protocol)
    if isinstance(features, MetricValue):
        return features, None
    from put.metrics.bootstrap import fid_interval

    return MetricValue(fid_of_features(*features)), fid_interval(*features, protocol.bootstrap(fid=True))


def fid(result_dir: Path, target_dir: Path, protocol: MetricProtocol) -> MetricValue:
    """FID of the PNGs in result_dir against those in target_dir, or why it cannot be computed."""
    features = inception_features(result_dir, target_dir, protocol)
    return features if isinstance(features, MetricValue) else MetricValue(fid_of_features(*features))

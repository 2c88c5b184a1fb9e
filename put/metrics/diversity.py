"""Diversity: mean LPIPS between random distinct pairs of samples of the same input."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from itertools import combinations
from pathlib import Path

import numpy as np
import torch

from put.data.images import read_rgb
from put.errors import FileMismatchError, InputError
from put.io.pretrained import LPIPS_BACKBONES
from put.metrics import MetricValue
from put.metrics.image import MetricProtocol

Distance = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def pairwise_sums(groups: Iterable[torch.Tensor], distance: Distance, pairs: int, seed: int) -> list[float]:
    """Per group, the sum of the distances of `pairs` random distinct sample pairs.

    Each group is an (N, C, H, W) stack for one input. Pairs are unordered, distinct, never a sample with itself,
    from one seeded Generator (depending only on seed and sizes). `distance(a, b)`: two (P, C, H, W) -> P values.
    """
    rng = np.random.default_rng(seed)
    sums = []
    for i, group in enumerate(groups):
        n = group.shape[0]
        candidates = np.array(list(combinations(range(n), 2))).reshape(-1, 2)
        if pairs > len(candidates):
            raise InputError(f"input {i}: {n} samples give {len(candidates)} distinct pairs, {pairs} requested")
        chosen = candidates[rng.choice(len(candidates), size=pairs, replace=False)]
        sums.append(float(distance(group[chosen[:, 0]], group[chosen[:, 1]]).double().sum()))
    if not sums:
        raise ValueError("no groups given")
    return sums


def _load_group(paths: list[Path]) -> torch.Tensor:
    """(N, 3, H, W) float in [-1, 1], the range LPIPS expects."""
    arrays = [read_rgb(p) for p in paths]
    if len({a.shape for a in arrays}) > 1:
        raise FileMismatchError(f"samples of one input differ in size: {[str(p) for p in paths]}")
    x = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).float()
    return x / 127.5 - 1.0


def lpips_model(net: str, spatial: bool, random_backbone: bool = False) -> torch.nn.Module:
    """lpips.LPIPS with its packaged linear layers and torchvision's ImageNet backbone (random, for timing it).

    Callers check LPIPS_BACKBONES[net] is cached in $TORCH_HOME/hub/checkpoints, so no network is used.
    """
    import lpips  # heavy; only needed here

    with warnings.catch_warnings():  # lpips uses torchvision's deprecated pretrained=True
        warnings.simplefilter("ignore", UserWarning)
        return lpips.LPIPS(net=net, spatial=spatial, pretrained=True, pnet_rand=random_backbone, verbose=False).eval()


def diversity_lpips_per_input(groups: list[list[Path]], protocol: MetricProtocol, seed: int,
                              device: str | torch.device | None = None) -> np.ndarray | MetricValue:
    """Per input (one path list each), the mean LPIPS over protocol.lpips_pairs random sample pairs; or why
    it cannot be measured."""
    backbone = LPIPS_BACKBONES[protocol.lpips_net]
    if reason := backbone.missing():
        return MetricValue.missing(reason)
    if not groups:
        return MetricValue.missing("no inputs to measure diversity on")
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = lpips_model(protocol.lpips_net, protocol.lpips_spatial).to(device)

    @torch.no_grad()
    def distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # (P,1,H,W) map when spatial, (P,1,1,1) otherwise: the mean over the map is the distance.
        return model(a.to(device), b.to(device)).mean(dim=(1, 2, 3)).cpu()

    loaded = (_load_group(paths) for paths in groups)  # one input's samples in memory at a time
    return np.array(pairwise_sums(loaded, distance, protocol.lpips_pairs, seed)) / protocol.lpips_pairs

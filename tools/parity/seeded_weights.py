"""Deterministic weights for the parity fixtures, shared by tools/parity/make_model_fixtures.py (which runs
the authors' code) and the parity tests (which run ours without the authors' code present).

Every tensor is drawn from numpy's legacy RandomState (a frozen stream: identical on every numpy and
torch version), seeded by the tensor's name, so a state dict is a pure function of its key names,
shapes and one seed: the fixtures need only the layout, never the weights.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping

import numpy as np
import torch


def seeded_array(name: str, shape: Iterable[int], seed: int) -> np.ndarray:
    """float32 values for the tensor `name`: scaled to keep activations O(1) through ReLU networks."""
    shape = tuple(int(s) for s in shape)
    rng = np.random.RandomState(zlib.crc32(f"{seed}:{name}".encode()))
    leaf = name.rsplit(".", 1)[-1]
    if leaf in ("weight_u", "weight_v"):  # spectral-norm power-iteration vectors: unit length
        values = rng.standard_normal(shape)
        values /= np.linalg.norm(values)
    elif leaf == "cluster_size":
        values = rng.uniform(0.5, 2.0, shape)
    elif leaf in ("embedding", "embedding_avg"):
        values = rng.uniform(-3.0, 3.0, shape)  # about the spread of the encoder features
    elif leaf == "pos_emb":  # non-zero, so that no two fully masked positions tie
        values = rng.uniform(-0.5, 0.5, shape)
    elif len(shape) >= 2:  # Linear / conv weights: He-uniform on fan-in
        bound = np.sqrt(6.0 / max(1, int(np.prod(shape[1:]))))
        values = rng.uniform(-bound, bound, shape)
    elif leaf == "weight":  # LayerNorm scales
        values = 1.0 + rng.uniform(-0.1, 0.1, shape)
    else:  # biases
        values = rng.uniform(-0.1, 0.1, shape)
    return values.astype(np.float32)


def seeded_state(layout: Mapping[str, Iterable[int]], seed: int, fixed: Mapping[str, torch.Tensor] | None = None,
                 aliases: Iterable[Iterable[str]] = ()) -> dict[str, torch.Tensor]:
    """A state dict with every key of `layout` ({name: shape}): the tensor given in `fixed` where there is
    one (constants such as BCE labels, the VGG trunk, a loaded sub-model), else `seeded_array`. Keys in
    one group of `aliases` name one tensor (a module registered twice) and get the first key's values."""
    fixed = fixed or {}
    state = {name: fixed[name].clone() if name in fixed else torch.from_numpy(seeded_array(name, shape, seed))
             for name, shape in layout.items()}
    for first, *others in aliases:
        for name in others:
            state[name] = state[first]
    return state


def seeded_vgg19_features(seed: int) -> torch.nn.Sequential:
    """torchvision's VGG19 trunk (`vgg19().features`) with seeded weights: the stand-in for the ImageNet
    weights, which cannot be downloaded where the fixtures are made or tested."""
    from torchvision.models.vgg import cfgs, make_layers

    features = make_layers(cfgs["E"])
    layout = {f"features.{k}": tuple(v.shape) for k, v in features.state_dict().items()}
    state = seeded_state(layout, seed)
    features.load_state_dict({k.removeprefix("features."): v for k, v in state.items()})
    return features.eval().requires_grad_(False)

"""VGG19 activations for the perceptual and style losses (torchvision's standard ImageNet weights)."""

from __future__ import annotations

import torch
from torch import nn
from torchvision.models.vgg import cfgs, make_layers

from put.io.pretrained import VGG19, MissingWeightsError
from put.models.checkpoint import load_torch_file

# Index of each ReLU in torchvision's vgg19().features.
RELU_INDEX = {
    "relu1_1": 1, "relu1_2": 3, "relu2_1": 6, "relu2_2": 8, "relu3_1": 11, "relu3_2": 13, "relu3_3": 15,
    "relu3_4": 17, "relu4_1": 20, "relu4_2": 22, "relu4_3": 24, "relu4_4": 26, "relu5_1": 29, "relu5_2": 31,
}
PERCEPTUAL_LAYERS = ("relu1_1", "relu2_1", "relu3_1", "relu4_1", "relu5_1")
STYLE_LAYERS = ("relu2_2", "relu3_4", "relu4_4", "relu5_2")


class VGG19Features(nn.Module):
    """Frozen VGG19 trunk returning the named ReLU activations. Inputs in [0, 1], not ImageNet-normalised
    (as the released code, whose loss weights were tuned that way)."""

    def __init__(self, features: nn.Sequential):
        super().__init__()
        self.features = features[: max(RELU_INDEX.values()) + 1].eval().requires_grad_(False)
        self.names = {index: name for name, index in RELU_INDEX.items()}

    @classmethod
    def untrained(cls) -> VGG19Features:
        """Random weights: for tests of the loss arithmetic only, never for training."""
        return cls(make_layers(cfgs["E"]))

    @classmethod
    def pretrained(cls) -> VGG19Features:
        """Loads torchvision's ImageNet weights from the hub cache; MissingWeightsError names the file if absent."""
        path = VGG19.require()
        state = load_torch_file(path, expected="torchvision's VGG19 weights file")
        features = make_layers(cfgs["E"])[: max(RELU_INDEX.values()) + 1]
        try:
            features.load_state_dict({k: state[f"features.{k}"] for k in features.state_dict()})
        except (KeyError, RuntimeError) as err:
            raise MissingWeightsError(f"{path}: not torchvision's VGG19 weights ({err})") from err
        return cls(features)

    def train(self, mode: bool = True) -> VGG19Features:
        return super().train(False)  # always frozen

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        out = {}
        x = images
        for index, layer in enumerate(self.features):
            x = layer(x)
            if index in self.names:
                out[self.names[index]] = x
        return out

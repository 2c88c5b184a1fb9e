"""PatchGAN discriminator as in EdgeConnect: five 4x4 spectral-norm convs, LeakyReLU 0.2, sigmoid.

`forward` returns logits: BCE-with-logits equals sigmoid + BCE but is stable and safe under autocast.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import spectral_norm


class PatchDiscriminator(nn.Module):
    def __init__(self, in_channels: int = 3, width: int = 64):
        super().__init__()
        # (out channels, stride) of the five convs; spectral norm replaces the biases.
        layout = [(width, 2), (width * 2, 2), (width * 4, 2), (width * 8, 1), (1, 1)]
        layers: list[nn.Module] = []
        c_in = in_channels
        for i, (c_out, stride) in enumerate(layout):
            conv = nn.Conv2d(c_in, c_out, 4, stride=stride, padding=1, bias=False)
            nn.init.normal_(conv.weight, 0.0, 0.02)
            layers.append(spectral_norm(conv))
            if i < len(layout) - 1:
                layers.append(nn.LeakyReLU(0.2))
            c_in = c_out
        self.net = nn.Sequential(*layers)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images in [0, 1] (the same range in the generator and the discriminator step) -> patch logits."""
        return self.net(images)

"""P-VQVAE encoders: the non-overlapping patch encoder (P-Enc) and the conv encoder of ablation `conv`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from put.config import PVQVAEConfig


class LinearResBlock(nn.Module):
    """relu(x) + Linear(ReLU(Linear(relu(x)))) with a bottleneck of half the width. The released blocks open
    with an in-place ReLU, which also overwrites the input that the skip adds back: their checkpoints
    were trained with relu(x), not x, on the skip."""

    def __init__(self, dim: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim // 2)
        self.fc2 = nn.Linear(dim // 2, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(x)
        return x + self.fc2(F.relu(self.fc1(x)))


class ConvResBlock(nn.Module):
    """relu(x) + Conv1x1(ReLU(Conv3x3(relu(x)))): the skip adds relu(x) as in LinearResBlock; the released
    code's second conv is 1x1 (7.40M generator)."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels // 2, 3, padding=1)
        self.conv2 = nn.Conv2d(channels // 2, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(x)
        return x + self.conv2(F.relu(self.conv1(x)))


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, 3, H, W) -> (B, H/r, W/r, 3*r*r): each patch flattened, nothing shared between patches."""
    b, c, h, w = images.shape
    r = patch_size
    x = images.reshape(b, c, h // r, r, w // r, r)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, h // r, w // r, c * r * r)


class PatchEncoder(nn.Module):
    """P-Enc: every patch mapped to a feature by the same MLP, so no information crosses patch borders."""

    def __init__(self, config: PVQVAEConfig):
        super().__init__()
        self.patch_size = config.patch_size
        width = config.width
        self.fc_in = nn.Linear(3 * config.patch_size ** 2, width)
        self.blocks = nn.Sequential(*[LinearResBlock(width) for _ in range(config.num_res_blocks)])
        self.fc_out = nn.Linear(width, config.embed_dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.fc_in(patchify(images, self.patch_size))
        x = F.relu(self.fc_out(F.relu(self.blocks(x))))
        return x.permute(0, 3, 1, 2)  # (B, C, h, w)


class ConvEncoder(nn.Module):
    """Conv-Enc (ablation `conv`): stride-2 4x4 convs down to token resolution, then conv res blocks.
    Channels after the k-th conv: base * 2^k, and `width` after the last (released PatchConvEncoder2)."""

    def __init__(self, config: PVQVAEConfig):
        super().__init__()
        n = config.num_upsamplings
        channels = [3] + [config.base_channels * 2 ** k for k in range(n - 1)] + [config.width]
        self.down = nn.ModuleList(nn.Conv2d(c_in, c_out, 4, stride=2, padding=1)
                                  for c_in, c_out in zip(channels[:-1], channels[1:]))
        self.blocks = nn.Sequential(*[ConvResBlock(config.width) for _ in range(config.num_res_blocks)])
        self.conv_out = nn.Conv2d(config.width, config.embed_dim, 3, padding=1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images
        for conv in self.down:
            x = F.relu(conv(x))
        return F.relu(self.conv_out(F.relu(self.blocks(x))))


def build_encoder(config: PVQVAEConfig) -> nn.Module:
    return PatchEncoder(config) if config.encoder == "patch" else ConvEncoder(config)

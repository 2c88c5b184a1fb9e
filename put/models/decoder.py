"""MSG-Dec: the multi-scale guided decoder with its reference branch.

Levels count down from the token grid (level n = log2(r)) to full resolution (level 0). Before each
upsampling and before the output layers, the main features are *replaced* where pixels are known by
the reference branch's features of the masked image (the paper's Mask Guided Addition, as the
released code implements it). Ablation `no_ref` drops the reference branch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from put.config import PVQVAEConfig
from put.models.encoder import ConvResBlock


def mask_guided_replace(x: torch.Tensor, reference: torch.Tensor, keep_mask: torch.Tensor) -> torch.Tensor:
    keep = F.interpolate(keep_mask, size=x.shape[-2:], mode="nearest")
    return x * (1 - keep) + reference * keep


class MultiScaleGuidedDecoder(nn.Module):
    def __init__(self, config: PVQVAEConfig):
        super().__init__()
        ch = config.level_channels()
        self.num_levels = config.num_upsamplings
        self.conv_in = nn.Conv2d(config.embed_dim, config.width, 3, padding=1)
        self.blocks = nn.Sequential(*[ConvResBlock(config.width) for _ in range(config.num_res_blocks)])
        self.up = nn.ModuleList(nn.ConvTranspose2d(ch[level], ch[level - 1], 4, stride=2, padding=1)
                                for level in range(self.num_levels, 0, -1))
        self.conv_out = nn.Conv2d(ch[0], 3, 3, padding=1)
        self.reference_branch = config.reference_branch
        if self.reference_branch:
            self.ref_in = nn.Conv2d(3, ch[0], 3, padding=1)
            self.ref_down = nn.ModuleList(nn.Conv2d(ch[level], ch[level + 1], 4, stride=2, padding=1)
                                          for level in range(self.num_levels))

    def reference_features(self, masked_images: torch.Tensor) -> list[torch.Tensor]:
        """Features of the masked image at every level, taken before their ReLU."""
        features = [self.ref_in(masked_images)]
        for conv in self.ref_down:
            features.append(conv(F.relu(features[-1])))
        return features

    def forward(self, codes: torch.Tensor, keep_mask: torch.Tensor, masked_images: torch.Tensor) -> torch.Tensor:
        """codes (B, C, h, w); keep_mask (B, 1, H, W), 1 = known pixel; masked_images (B, 3, H, W) in [-1, 1]."""
        refs = self.reference_features(masked_images) if self.reference_branch else None
        x = self.blocks(self.conv_in(codes))
        for level, up in zip(range(self.num_levels, 0, -1), self.up):
            if refs is not None:
                x = mask_guided_replace(x, refs[level], keep_mask)
            x = up(F.relu(x))
        if refs is not None:
            x = mask_guided_replace(x, refs[0], keep_mask)
        return self.conv_out(F.relu(x))

"""MSG-Dec: the multi-scale guided decoder with its reference branch, whose features replace the main ones where
pixels are known (the paper's Mask Guided Addition, as released). Ablation `no_ref` drops the branch; the TPAMI
decoder is the same network with other settings (docs/model.md, "The networks")."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from put.config import PVQVAEConfig
from put.models.encoder import ConvResBlock


def mask_guided_replace(x: torch.Tensor, reference: torch.Tensor, keep_mask: torch.Tensor) -> torch.Tensor:
    keep = F.interpolate(keep_mask, size=x.shape[-2:], mode="nearest")
    return x * (1 - keep) + reference * keep


def res_blocks(channels: int, count: int) -> nn.Sequential:
    return nn.Sequential(*[ConvResBlock(channels) for _ in range(count)])


class MultiScaleGuidedDecoder(nn.Module):
    def __init__(self, config: PVQVAEConfig):
        super().__init__()
        ch = config.level_channels()
        self.num_levels = config.num_upsamplings
        self.nearest = config.upsample == "nearest"
        self.conv_in = nn.Conv2d(config.embed_dim, config.width, 3, padding=1)
        self.blocks = res_blocks(config.width, config.decoder_blocks)
        up = (lambda c_in, c_out: nn.Conv2d(c_in, c_out, 3, padding=1)) if self.nearest else \
            (lambda c_in, c_out: nn.ConvTranspose2d(c_in, c_out, 4, stride=2, padding=1))
        levels_down = range(self.num_levels, 0, -1)
        self.up = nn.ModuleList(up(ch[level], ch[level - 1]) for level in levels_down)
        self.up_blocks = nn.ModuleList(res_blocks(ch[level - 1], config.decoder_level_res_blocks)
                                       for level in levels_down)
        self.conv_out = nn.Conv2d(ch[0], 3, 3, padding=1)
        self.reference_branch = config.reference_branch
        if self.reference_branch:
            self.ref_in = nn.Conv2d(3, ch[0], 3, padding=1)
            self.ref_blocks = nn.ModuleList(res_blocks(ch[level], config.decoder_level_res_blocks)
                                            for level in range(self.num_levels))
            self.ref_down = nn.ModuleList(nn.Conv2d(ch[level], ch[level + 1], 4, stride=2, padding=1)
                                          for level in range(self.num_levels))

    def reference_features(self, masked_images: torch.Tensor) -> list[torch.Tensor]:
        """Features of the masked image at every level, taken before their ReLU; at a level with res blocks
        after its ReLU (the released blocks' in-place ReLU overwrites the features they keep)."""
        features, x = [], self.ref_in(masked_images)
        for blocks, down in zip(self.ref_blocks, self.ref_down):
            if len(blocks):
                x = F.relu(x)
            features.append(x)
            x = down(F.relu(blocks(x)))
        return [*features, x]

    def upsample(self, level: int, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(x)
        if self.nearest:
            x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        return self.up_blocks[level](self.up[level](x))

    def forward(self, codes: torch.Tensor, keep_mask: torch.Tensor, masked_images: torch.Tensor) -> torch.Tensor:
        """codes (B, C, h, w); keep_mask (B, 1, H, W), 1 = known pixel; masked_images (B, 3, H, W) in the
        network's pixel space."""
        refs = self.reference_features(masked_images) if self.reference_branch else None
        x = self.blocks(self.conv_in(codes))
        for index, level in enumerate(range(self.num_levels, 0, -1)):
            if refs is not None:
                x = mask_guided_replace(x, refs[level], keep_mask)
            x = self.upsample(index, x)
        if refs is not None:
            x = mask_guided_replace(x, refs[0], keep_mask)
        return self.conv_out(F.relu(x))

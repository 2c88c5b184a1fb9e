"""`put info`: parameter counts and token grid of a preset x variant."""

from __future__ import annotations

import argparse
import json

import torch

from put.config import GENERATION_NAMES, PRESETS, VARIANTS, model_config, preset
from put.config.presets import variant_preset

HELP = "parameter counts and token grid of a preset x variant (the TPAMI presets: the authors' TPAMI 2024 sizes)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", choices=list(PRESETS), default="ffhq")
    parser.add_argument("--variant", choices=VARIANTS, default="put")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> dict:
    from put.models.discriminator import PatchDiscriminator
    from put.models.put_model import PUTModel
    from put.models.transformer import count_parameters

    config = model_config(args.preset, args.variant)
    with torch.device("meta"):  # parameter counts without allocating memory
        model = PUTModel(config)
        trained_as = preset(variant_preset(args.preset, args.variant))  # the tpami variant: its TPAMI preset
        discriminator = PatchDiscriminator(width=trained_as.pvqvae_train.discriminator_width)
    info = {
        "preset": args.preset, "variant": args.variant, "generation": config.generation,
        "image_size": config.image_size,
        "token_grid": list(config.token_grid),
        "parameters": {"transformer": count_parameters(model.transformer),
                       "pvqvae_generator": count_parameters(model.pvqvae),
                       "discriminator": count_parameters(discriminator)},
        "config": config.model_dump(),
    }
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        p = info["parameters"]
        print(f"preset {args.preset}, variant {args.variant} ({GENERATION_NAMES[config.generation]}): "
              f"{config.image_size}px, token grid {config.token_grid[0]}x{config.token_grid[1]}\n"
              f"  transformer      {p['transformer'] / 1e6:8.2f}M\n"
              f"  P-VQVAE (G)      {p['pvqvae_generator'] / 1e6:8.2f}M\n"
              f"  discriminator    {p['discriminator'] / 1e6:8.2f}M")
    return info

"""`put train-transformer`: train a UQ-Transformer on a frozen P-VQVAE (resumable)."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import add_training_arguments, load_cli_params, optional_path, parse_tags
from put.config import VARIANTS

HELP = "train a UQ-Transformer on a frozen P-VQVAE"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_training_arguments(parser, VARIANTS)
    parser.add_argument("--pvqvae", required=True, help="the P-VQVAE checkpoint to freeze and train on")


def run(args: argparse.Namespace) -> None:
    from put.stages.train import train_transformer

    result = train_transformer(load_cli_params(args), args.variant, Path(args.pvqvae), Path(args.split),
                               Path(args.out), args.device, parse_tags(args.tag), curves=optional_path(args.curves),
                               restart=args.restart,
                               prepared=optional_path(args.prepared))
    print(f"UQ-Transformer ({args.variant}) at {result.out}, {result.step} iterations")


def log_outputs(tracker, params, args: argparse.Namespace) -> None:
    """`put track`: this stage's MLflow run from its files (put/commands/track.py)."""
    from put.stages.train import log_outputs

    log_outputs(tracker, params, args.variant, "transformer", Path(args.split), Path(args.out), Path(args.curves),
                Path(args.pvqvae))

"""`put sample`: the evaluation set inpainted by one variant."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import (
    add_params_arguments,
    add_seed_argument,
    device_name,
    evaluated_label,
    load_cli_params,
    optional_path,
    parse_tags,
)

HELP = "inpaint the evaluation set with one variant (deterministic, top-K, diversity samples)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser, tags=True)
    parser.add_argument("--variant", type=evaluated_label, default="put", help="the variant, or official_NAME")
    add_seed_argument(parser)
    parser.add_argument("--checkpoint", required=True, help="the variant's transformer checkpoint")
    parser.add_argument("--pvqvae", help="its P-VQVAE checkpoint (default: the one the transformer checkpoint "
                                         "records)")
    parser.add_argument("--masks", default="data/demo/masks", help="folder written by `put masks`")
    parser.add_argument("--out", required=True, help="output folder (samples.csv + PNGs)")
    parser.add_argument("--device", type=device_name)
    parser.set_defaults(out_folder=True)


def run(args: argparse.Namespace) -> None:
    from put.stages.sample import run_sample

    manifest = run_sample(load_cli_params(args), args.variant, Path(args.checkpoint), Path(args.masks),
                          Path(args.out), args.device, parse_tags(args.tag), pvqvae=optional_path(args.pvqvae))
    print(f"samples of {args.variant}: {manifest}")


def log_outputs(tracker, params, args: argparse.Namespace) -> None:
    """`put track`: this stage's MLflow run from its files (put/commands/track.py)."""
    from put.stages.sample import log_outputs

    log_outputs(tracker, params, Path(args.masks), Path(args.out))

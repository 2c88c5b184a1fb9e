"""`put frontier`: quality against sampling cost."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import (
    add_params_arguments,
    device_name,
    load_cli_params,
    optional_path,
    parse_tags,
    recorded_command,
)
from put.config import VARIANTS

HELP = ("quality against sampling cost: tokens per step, cosine schedules, top-K and argmax on the evaluation "
        "masks (metrics, table, figure)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser, tags=True)
    parser.add_argument("--variant", choices=VARIANTS, default="put")
    parser.add_argument("--checkpoint", required=True, help="the variant's transformer checkpoint")
    parser.add_argument("--masks", required=True, help="folder written by `put masks`")
    parser.add_argument("--pvqvae", help="its P-VQVAE checkpoint (default: the one the transformer records)")
    parser.add_argument("--out", required=True, help="output folder (metrics.json, frontier.csv/.tex/.png)")
    parser.add_argument("--samples", required=True, help="folder for the inpainted images")
    parser.add_argument("--device", type=device_name)
    parser.set_defaults(out_folder=True, other_outputs=("samples",))


def run(args: argparse.Namespace) -> None:
    from put.stages.frontier import run_frontier

    frame = run_frontier(load_cli_params(args), args.variant, Path(args.checkpoint), Path(args.masks), Path(args.out),
                         Path(args.samples), args.device, parse_tags(args.tag), optional_path(args.pvqvae),
                         command=recorded_command("frontier"))
    for row in frame.itertuples():
        print(f"{row.group:>6} {row.label:<22} K={'--' if row.top_k != row.top_k else int(row.top_k):<4} "
              f"{row.forward_passes:7.1f} forwards/image {1000 * row.seconds_per_image:9.2f} ms/image  "
              f"PSNR {row.psnr:.3f}  SSIM {row.ssim:.4f}  MAE {row.mae:.4f}")
    print(f"frontier of {args.variant}: {args.out}")


def log_outputs(tracker, params, args: argparse.Namespace) -> None:
    """`put track`: this stage's MLflow run from its files (put/commands/track.py)."""
    from put.stages.frontier import log_outputs

    log_outputs(tracker, params, Path(args.masks), Path(args.out))

"""`put evaluate`: metrics of one variant's samples."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import add_params_arguments, add_seed_argument, evaluated_label, load_cli_params, parse_tags

HELP = "metrics of one variant's samples (PSNR, SSIM, MAE, FID, LPIPS)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser, tags=True)
    parser.add_argument("--variant", type=evaluated_label, default="put",
                        help="the variant, official_NAME or external_NAME")
    add_seed_argument(parser)
    parser.add_argument("--samples", required=True, help="folder written by `put sample`")
    parser.add_argument("--masks", default="data/demo/masks", help="folder written by `put masks`")
    parser.add_argument("--out", required=True, help="metrics JSON (under evaluate.known_pixels; its Table 1 groups "
                        "with the known pixels pasted back go to pasted/ beside it)")
    parser.set_defaults(out_folder=False)


def run(args: argparse.Namespace) -> None:
    from put.config.bins import BINS
    from put.stages.evaluate import run_evaluate

    result = run_evaluate(load_cli_params(args), args.variant, Path(args.samples), Path(args.masks), Path(args.out),
                          parse_tags(args.tag))
    cells = sum(len(groups) for mode, groups in result.items() if mode != BINS)
    print(f"metrics of {args.variant}: {args.out} ({cells} table cells, {len(result.get(BINS, {}))} fine bins; "
          "pasted: pasted/ beside it)")


def log_outputs(tracker, params, args: argparse.Namespace) -> None:
    """`put track`: this stage's MLflow run from its files (put/commands/track.py)."""
    from put.metrics.files import log_evaluation

    log_evaluation(tracker, params, Path(args.masks), Path(args.out))

"""`put split`: the dataset's train/test lists with checksums."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import add_params_arguments, load_cli_params

HELP = "list the dataset's train/test images with checksums (builds the demo set)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser)
    parser.add_argument("--out", default="data/splits", help="folder for train.csv, test.csv, split_report.json")
    parser.set_defaults(out_folder=True)


def run(args: argparse.Namespace) -> None:
    from put.stages.split import run_split

    report = run_split(load_cli_params(args), Path(args.out))
    counts = ", ".join(f"{k}: {v['usable']} usable of {v['listed']}" for k, v in report["splits"].items())
    screened = report.get("screened")  # the folder dataset: what was found and left out before splitting
    if screened:
        kinds = ", ".join(f"{n} {kind}" for kind, n in screened["excluded"].items()) or "none"
        counts = f"{screened['found']} found, {screened['usable']} usable (left out: {kinds}); {counts}"
    print(f"{report['dataset']} split written to {args.out} ({counts}; {len(report['excluded'])} excluded)")

"""`put masks`: the frozen evaluation masks and their manifest."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import add_params_arguments, load_cli_params

HELP = "write the frozen evaluation masks and their manifest"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser)
    parser.add_argument("--split", default="data/splits", help="folder written by `put split`")
    parser.add_argument("--out", default="data/masks", help="output folder")
    parser.set_defaults(out_folder=True)


def run(args: argparse.Namespace) -> None:
    from put.stages.masks import run_masks

    print(f"evaluation masks: {run_masks(load_cli_params(args), Path(args.split), Path(args.out))}")

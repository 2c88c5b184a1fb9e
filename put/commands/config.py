"""`put config`: every parameter the stages use, resolved (the DAG tracks it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import add_params_arguments, load_cli_params

HELP = "write every parameter the stages use, resolved (the DAG tracks it)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser)
    parser.add_argument("--out", required=True, help="YAML file")
    parser.set_defaults(out_folder=False)


def run(args: argparse.Namespace) -> None:
    from put.stages.config import run_config

    print(f"resolved parameters: {run_config(load_cli_params(args), Path(args.out))}")

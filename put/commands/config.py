"""`put config`: every parameter the stages use, resolved (the DAG tracks it)."""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from put.commands.common import add_params_arguments, load_cli_params

CODE_HEADER = "# Code version of each stage command (written by `put config`; put/dag/code.py; do not edit).\n"
HELP = "write every parameter the stages use, resolved (the DAG tracks it)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser)
    parser.add_argument("--out", required=True, help="YAML file")
    parser.add_argument("--code-versions", help="YAML file: the code version of each stage command (the DAG "
                                               "tracks it instead of every source file of every stage)")
    parser.set_defaults(out_folder=False, other_outputs=("code_versions",))


def run(args: argparse.Namespace) -> None:
    from put.stages.config import run_config, write_if_changed

    print(f"resolved parameters: {run_config(load_cli_params(args), Path(args.out))}")
    if args.code_versions:
        from put.dag.code import code_versions

        write_if_changed(Path(args.code_versions), CODE_HEADER + yaml.safe_dump(code_versions(), sort_keys=True))
        print(f"code versions of the stages: {args.code_versions}")

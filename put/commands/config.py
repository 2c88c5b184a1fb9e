"""`put config`: every parameter the stages use, resolved (the DAG tracks it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import add_params_arguments, load_cli_params

HELP = "write every parameter the stages use, resolved (the DAG tracks it)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser)
    parser.add_argument("--out", required=True, help="YAML file")
    parser.add_argument("--code-versions", help="YAML file: the code version of each stage command (the DAG "
                                               "tracks it instead of every source file of every stage)")
    parser.set_defaults(out_folder=False, other_outputs=("code_versions",))


def run(args: argparse.Namespace) -> None:
    from put.stages.config import run_config, write_code_versions

    print(f"resolved parameters: {run_config(load_cli_params(args), Path(args.out))}")
    if args.code_versions:
        from put.dag.code import code_versions

        write_code_versions(code_versions(), Path(args.code_versions))
        print(f"code versions of the stages: {args.code_versions}")

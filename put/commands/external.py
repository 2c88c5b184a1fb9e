"""`put external`: an entry of params.yaml's `external` as a samples folder the evaluate stage scores."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import add_params_arguments, evaluated_label, load_cli_params, parse_tags

HELP = "another method's results on the frozen masks (a folder checked, or a built-in baseline run) as samples"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser, tags=True)
    parser.add_argument("--variant", type=evaluated_label, required=True,
                        help="external_NAME, for the entry NAME of params.yaml's `external`")
    parser.add_argument("--masks", default="data/demo/masks", help="folder written by `put masks`")
    parser.add_argument("--out", required=True, help="samples folder (the layout `put sample` writes)")
    parser.set_defaults(out_folder=True)


def run(args: argparse.Namespace) -> None:
    from put.stages.external import run_external

    manifest = run_external(load_cli_params(args), args.variant, Path(args.masks), Path(args.out),
                            parse_tags(args.tag))
    print(f"results of {args.variant}: {manifest}")


def log_outputs(tracker, params, args: argparse.Namespace) -> None:
    """`put track`: this stage's MLflow run from its files (put/commands/track.py)."""
    from put.stages.external import log_outputs

    log_outputs(tracker, params, args.variant, Path(args.masks))

"""`put dag`: dvc.yaml and its plot templates generated from the DAG declaration."""

from __future__ import annotations

import argparse

from put.errors import FileMismatchError

HELP = "generate dvc.yaml and the dvc plots templates (.dvc/plots/) from the DAG declaration (put/dag/declaration.py)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="only check that the generated files are up to date")


def run(args: argparse.Namespace) -> None:
    from put.dag import dvc_plots, dvc_yaml

    if args.check:
        stale = ([dvc_yaml.PATH] if not dvc_yaml.is_current() else []) + dvc_plots.stale()
        if stale:
            raise FileMismatchError(f"{', '.join(map(str, stale))} stale: run `put dag` (generated from "
                             "put/dag/declaration.py and the code's imports)")
        print(f"{dvc_yaml.PATH} and the plot templates are up to date")
    else:
        print(f"{dvc_yaml.PATH} {'written' if dvc_yaml.write() else 'already up to date'}")
        for path in dvc_plots.write():
            print(f"{path} written")

"""`put dag`: dvc.yaml generated from the DAG declaration."""

from __future__ import annotations

import argparse

HELP = "generate dvc.yaml from the DAG declaration (put/dag/declaration.py)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="only check that dvc.yaml is up to date")


def run(args: argparse.Namespace) -> None:
    from put.dag import dvc_yaml

    if args.check:
        if not dvc_yaml.is_current():
            raise ValueError(f"{dvc_yaml.PATH} is stale: run `put dag --write` (it is generated from "
                             "put/dag/declaration.py and the code's imports)")
        print(f"{dvc_yaml.PATH} is up to date")
    else:
        print(f"{dvc_yaml.PATH} {'written' if dvc_yaml.write() else 'already up to date'}")

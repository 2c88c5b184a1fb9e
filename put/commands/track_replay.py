"""`put track-replay`: log the runs a stage spooled while the tracking server did not answer (tracking/spool.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "log the MLflow records a stage kept in a spool file while the tracking server did not answer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spools", nargs="+", type=Path, metavar="FILE",
                        help="spool file(s) named by the stage (mlflow-unsent/*.jsonl); each is removed once logged")


def run(args: argparse.Namespace) -> None:
    from put.errors import MissingFileError, ServiceError
    from put.tracking.runs import MlflowTracker
    from put.tracking.source import tracking_uri
    from put.tracking.spool import outage, replay, unreachable

    for spool in args.spools:
        if not spool.is_file():
            raise MissingFileError(f"{spool}: no such spool file")
        try:
            calls = replay(spool, MlflowTracker)
        except Exception as err:
            if not unreachable(err):
                raise
            raise ServiceError(f"MLflow at {tracking_uri()} did not answer ({outage(err)}); "
                               f"{spool} is kept: run this again once the server is back") from None
        for npy in spool.parent.glob(f"{spool.stem}-*.npy"):
            npy.unlink()
        spool.unlink()
        print(f"{spool}: {calls} records logged to {tracking_uri()}; file removed")

"""`put track-replay`: log the runs a stage spooled while the tracking server did not answer (tracking/spool.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

HELP = "log the MLflow records a stage kept in a spool file while the tracking server did not answer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spools", nargs="+", type=Path, metavar="FILE",
                        help="spool file(s) named by the stage (mlflow-unsent/*.jsonl); each is removed once logged")
    parser.add_argument("--to", metavar="URI", default=None,
                        help="the tracking store to log into (default: the one the stage wrote to, recorded in the "
                             "file; a different MLFLOW_TRACKING_URI is refused without --to)")


def run(args: argparse.Namespace) -> None:
    from put.errors import MissingFileError, ServiceError
    from put.tracking.runs import MlflowTracker
    from put.tracking.spool import outage, remove_spool, replay, unreachable

    stores: list[str] = []  # the store each replay chose (the recorded one, or --to)

    def make(**init: Any) -> MlflowTracker:
        stores.append(init["uri"])
        return MlflowTracker(**init)

    for spool in args.spools:
        if not spool.is_file():
            raise MissingFileError(f"{spool}: no such spool file")
        stores.clear()
        try:
            calls = replay(spool, make, args.to)
        except Exception as err:
            if not unreachable(err):
                raise
            where = stores[-1] if stores else "its address"
            raise ServiceError(f"MLflow at {where} did not answer ({outage(err)}); {spool} is kept: run this "
                               "again once the server is back (it goes on after the last record logged)") from None
        remove_spool(spool)
        where = f"to {stores[-1]}" if stores else "(all were logged before)"
        print(f"{spool}: {calls} records logged {where}; file removed")

"""`put track-replay`: log the runs a stage spooled while the tracking server did not answer (tracking/spool.py).
Files given (or in a folder given) that are no spool to replay now are skipped with one line each saying why: an
array or a cursor of a spool, an empty or foreign file, a spool that a running stage still writes."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

HELP = "log the MLflow records a stage kept in a spool file while the tracking server did not answer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spools", nargs="+", type=Path, metavar="FILE",
                        help="spool file(s) named by the stage (mlflow-unsent/*.jsonl), or their folder; each is "
                             "removed once logged; other files are skipped, one line each")
    parser.add_argument("--to", metavar="URI", default=None,
                        help="the tracking store to log into (default: the one the stage wrote to, recorded in the "
                             "file; a different MLFLOW_TRACKING_URI is refused without --to)")


def given_files(paths: list[Path]) -> list[Path]:
    """The files named, a folder's files in name order; a path that is not there is an error, before any replay."""
    from put.errors import MissingFileError

    files = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if not p.is_dir())
        elif path.exists():
            files.append(path)
        else:
            raise MissingFileError(f"{path}: no such spool file")
    return files


def run(args: argparse.Namespace) -> None:
    from put.errors import ServiceError
    from put.tracking.resilient import outage, unreachable
    from put.tracking.runs import MlflowTracker
    from put.tracking.spool import (
        NotASpool,
        lock_spool,
        read_records,
        remove_spool,
        replay,
        spool_header,
        still_written,
    )

    stores: list[str] = []  # the store each replay chose (the recorded one, or --to)

    def make(**init: Any) -> MlflowTracker:
        stores.append(init["uri"])
        return MlflowTracker.open(**init)

    for spool in given_files(args.spools):
        if not spool.exists():
            print(f"{spool}: skipped, removed with the spool replayed before it")
            continue
        try:
            header = spool_header(spool)
        except NotASpool as why:
            print(f"{spool}: skipped, {why}")
            continue
        try:
            lock = lock_spool(spool)
        except NotASpool as why:
            print(f"{spool}: skipped, {why}")
            continue
        if lock is None:
            writer = header.get("writer") or {}
            print(f"{spool}: skipped, still being written by a running stage (host {writer.get('host', '?')}, pid "
                  f"{writer.get('pid', '?')}) or replayed by another replay; replay it once the stage has ended")
            continue
        try:
            try:
                if why := still_written(spool, header, read_records(spool)):
                    print(f"{spool}: skipped, {why}")
                    continue
                stores.clear()
                calls = replay(spool, make, args.to)
            except NotASpool as why:
                print(f"{spool}: skipped, {why}")
                continue
            except Exception as err:
                if not unreachable(err):
                    raise
                where = stores[-1] if stores else "its address"
                raise ServiceError(f"MLflow at {where} did not answer ({outage(err)}); {spool} is kept: run this "
                                   "again once the server is back (it goes on after the last record logged)") from None
            remove_spool(spool)
        finally:
            os.close(lock)
        where = f"to {stores[-1]}" if stores else "(all were logged before)"
        print(f"{spool}: {calls} records logged {where}; file removed")

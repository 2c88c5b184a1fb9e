"""Imported by the fork server of tests/tracking_writer.py only: MLflow imported and one run logged to a throwaway
SQLite store, so that what a process does once (imports, SQLAlchemy's mappers, the installed distributions) is done
before the writers fork."""

from __future__ import annotations

import os
import shutil
import tempfile

from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

from tests.tracking_writer import write

_folder = tempfile.mkdtemp(prefix="put-writer-warmup-")
_here = os.getcwd()
try:
    SqlAlchemyStore(f"sqlite:///{_folder}/mlflow.db", f"{_folder}/mlruns")
    write(f"sqlite:///{_folder}/mlflow.db", _folder, "put", "sample")
finally:
    os.chdir(_here)
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    shutil.rmtree(_folder, ignore_errors=True)

"""Tracking that outlives a server's outage: once MLflow's retries run out, this and every later call go to a spool
file, and the stage finishes and names it for `put track-replay` (docs/mlflow.md, "When the tracking server is
down")."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from put.tracking.base import Tracker
from put.tracking.source import store_address, tracking_uri
from put.tracking.spool import encode, new_spool, spool_folder


def unreachable(err: BaseException) -> bool:
    """A tracking server that did not answer (after MLflow's retries): a connection error, a time-out, or 5xx
    answers until the retries ran out. MLflow wraps these in an MlflowException raised while handling them."""
    import requests

    return any(isinstance(e, (requests.RequestException, ConnectionError))
               for e in (err, err.__cause__, err.__context__) if e is not None)


def outage(err: BaseException) -> str:
    """The cause in a few words: "Connection refused", "timed out", "too many 503 error responses"."""
    import re

    text = str(err)
    found = (re.search(r"\[Errno -?\d+\] ([^'\")]+)", text) or re.search(r"(too many \d+ error responses)", text)
             or re.search(r"(timed? ?out)", text, re.IGNORECASE))
    return found.group(1).strip() if found else text.splitlines()[0][:150]


class ResilientTracker:
    """Forwards every call to the tracker `make` builds, or spools it once the server did not answer. `init`: the
    tracker's arguments (JSON), recorded so that a replay builds the same run (with the run's id, when the
    tracker had one before the server went away)."""

    def __init__(self, make: Callable[..., Tracker], init: dict[str, Any], system_metrics: bool = False):
        self.init, self.lock = init, threading.Lock()
        self.uri = store_address(init["uri"]) if init.get("uri") else tracking_uri()
        self.inner: Tracker | None = None
        self.spool: Path | None = None
        self.spool_fd: int | None = None  # holds the spool's lock while this stage may append to it
        self.system = None
        try:
            self.inner = make(**init)
        except Exception as err:
            if not unreachable(err):
                raise
            self._start_spool(err)
        if system_metrics:  # through this tracker, so that its figures are spooled too
            from put.tracking.system import SystemMetrics

            self.system = SystemMetrics(self.log_metrics)
            self.system.start()

    def _start_spool(self, err: BaseException) -> None:
        with self.lock:
            if self.spool is not None:
                return
            folder = spool_folder()
            folder.mkdir(parents=True, exist_ok=True)
            name = "-".join(str(self.init.get(k)) for k in ("preset", "stage", "variant") if self.init.get(k))
            self.reason = outage(err)
            run_id = getattr(self.inner, "run_id", None)  # the run this attempt wrote: a replay writes it too
            init = self.init | ({"run_id": run_id} if run_id else {})
            # the store the tracker was made for, as an address that does not depend on the directory
            header = json.dumps({"init": init, "uri": self.uri, "reason": self.reason,
                                 "writer": {"host": socket.gethostname(), "pid": os.getpid()}})
            self.spool, self.spool_fd = new_spool(
                folder / f"{name}-{os.getpid()}-{time.strftime('%Y%m%dT%H%M%S')}", header)
            self.inner = None  # after the spool is there: a call that finds no tracker writes to it

    def _write(self, method: str, args: tuple, kwargs: dict, time_ms: int) -> None:
        stem = self.spool.stem
        record = {"call": method, "time_ms": time_ms,
                  "args": encode(list(args), self.spool.parent, stem),
                  "kwargs": encode(kwargs, self.spool.parent, stem)}
        with self.lock, open(self.spool, "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        # Fixed before anything is sent, so that a call spooled part-way replays the same points, not new ones.
        time_ms = int(time.time() * 1000)
        inner = self.inner
        if inner is not None:
            try:
                with inner.called_at(time_ms):
                    return getattr(inner, method)(*args, **kwargs)
            except Exception as err:
                if not unreachable(err):
                    raise
                self._start_spool(err)
        self._write(method, args, kwargs, time_ms)
        return None

    def log_metrics(self, metrics: dict[str, float], step: int, **links: str) -> None:
        self._call("log_metrics", metrics, step, **links)

    def log_params(self, params: dict[str, Any]) -> None:
        self._call("log_params", params)

    def log_image(self, image: np.ndarray, name: str) -> None:
        self._call("log_image", image, name)

    def log_artifact(self, path: Path) -> None:
        self._call("log_artifact", path)

    def log_dataset(self, path: Path, name: str, context: str) -> dict[str, str] | None:
        return self._call("log_dataset", path, name, context)

    def log_model(self, checkpoint: Path, kind: str, metrics: dict[str, float], params: dict[str, Any],
                  step: int = 0) -> str | None:
        return self._call("log_model", checkpoint, kind, metrics, params, step)

    def use_model(self, kind: str) -> None:
        self._call("use_model", kind)

    def log_evaluation(self, metrics: dict[str, Any], manifest: Path) -> None:
        self._call("log_evaluation", metrics, manifest)

    def called_at(self, time_ms: int) -> contextlib.AbstractContextManager:
        """Each call here fixes its own time (_call)."""
        return contextlib.nullcontext()

    @property
    def run_name(self) -> str:
        return " ".join(str(self.init[k]) for k in ("stage", "variant") if self.init.get(k))

    def finish(self, status: str = "FINISHED") -> None:
        if self.system is not None:
            self.system.finish()
        self._call("finish", status)
        if self.spool is not None:
            with self.lock:  # the end record is written: a replay may take the spool now
                if self.spool_fd is not None:
                    os.close(self.spool_fd)
                    self.spool_fd = None
            print(f"put: MLflow at {self.uri} did not answer ({self.reason}); run '{self.run_name}' of "
                  f"put-{self.init['preset']} is not logged in full: its records are in {self.spool}; log them "
                  f"once the server is back: put track-replay {self.spool}", file=sys.stderr, flush=True)

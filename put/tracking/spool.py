"""Tracking that outlives a tracking server's outage: once MLflow's client has run out of retries, this call and
every later one of the run go to a spool file, the stage finishes its work and names the run it could not log;
`put track-replay FILE` logs them into the same run of the same store once the server is back, resuming where
an interrupted replay stopped (docs/mlflow.md, "When the tracking server is down")."""

from __future__ import annotations

import contextlib
import fcntl
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

from put.errors import InputError
from put.io.files import atomic_write_text
from put.io.output_lock import node_local_locks
from put.tracking.base import NullTracker
from put.tracking.source import store_address, tracking_enabled, tracking_uri
from put.tracking.workspace import resolve

SPOOL_ENV = "PUT_MLFLOW_SPOOL"
SPOOL_DIR = "mlflow-unsent"  # in the workspace, beside its outputs (a cluster's shared file system)


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


def spool_folder() -> Path:
    return resolve(os.environ.get(SPOOL_ENV, SPOOL_DIR))


class NotASpool(Exception):
    """A file that is no spool to replay (an array of one, a cursor, an empty file, ...): why, in a few words."""


def spool_header(path: Path) -> dict[str, Any]:
    """A spool's first line: the tracker's arguments (`init`), its store (`uri`), why it spooled (`reason`);
    NotASpool for any other file."""
    path = Path(path)
    if path.name.endswith(".npy"):
        raise NotASpool("an array of a spool, replayed with its spool")
    if path.name.endswith(".cursor"):
        raise NotASpool("a replay's cursor, removed with its spool")
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError as err:
        raise NotASpool(f"not readable ({err.strerror})") from None
    if not first.strip():
        raise NotASpool("empty, not a spool")
    try:
        header = json.loads(first)
    except ValueError:  # not UTF-8, not JSON
        header = None
    if not isinstance(header, dict) or not isinstance(header.get("init"), dict) or not header.get("uri"):
        raise NotASpool("not a spool: its first line is no spool header")
    return header


def instance_key(init: dict[str, Any]) -> tuple:
    """The stage instance a tracker's arguments name (preset, variant, stage, DAG, seed), whatever its code."""
    return (init.get("preset"), init.get("variant"), init.get("stage"), init.get("dag_id"), int(init.get("seed") or 0))


def pending_spools(uri: str) -> dict[tuple, Path]:
    """The spools in the spool folder that wait for a replay into store `uri`, by the stage instance whose run
    they hold (`put track` leaves those runs to the replay)."""
    folder, found = spool_folder(), {}
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else ():
        try:
            header = spool_header(path)
        except NotASpool:
            continue
        if store_address(header["uri"]) == store_address(uri):
            found[instance_key(header["init"])] = path
    return found


def _encode(value: Any, folder: Path, stem: str) -> Any:
    """JSON for a call's argument: paths as absolute paths, arrays (images) as .npy files beside the spool."""
    if isinstance(value, Path):
        return {"__path__": str(value.resolve())}
    if isinstance(value, np.ndarray):
        name = f"{stem}-{time.monotonic_ns()}.npy"
        np.save(folder / name, value)
        return {"__npy__": name}
    if isinstance(value, dict):
        return {str(k): _encode(v, folder, stem) for k, v in value.items()}
    if isinstance(value, tuple):  # logged as text: (0.0, 0.5) must stay a tuple
        return {"__tuple__": [_encode(v, folder, stem) for v in value]}
    if isinstance(value, list):
        return [_encode(v, folder, stem) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decode(value: Any, folder: Path) -> Any:
    if isinstance(value, dict):
        if "__path__" in value:
            return Path(value["__path__"])
        if "__npy__" in value:
            return np.load(folder / value["__npy__"])
        if "__tuple__" in value:
            return tuple(_decode(v, folder) for v in value["__tuple__"])
        return {k: _decode(v, folder) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, folder) for v in value]
    return value


def _new_spool(stem: Path, header: str) -> tuple[Path, int]:
    """A spool file of its own, never another attempt's of the same second and process: `<stem>.jsonl`, else
    `<stem>_N.jsonl` (not matched by the arrays' glob `<stem>-*.npy`). Returned with an open descriptor that holds
    flock(2) on it, taken before the header is written: until the stage ends, a replay finds it locked
    (`lock_spool`) and leaves it alone."""
    tries = 0
    while True:
        spool = stem.with_name(f"{stem.name}{f'_{tries}' if tries else ''}.jsonl")
        try:
            fd = os.open(spool, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            tries += 1
            continue
        with contextlib.suppress(OSError):  # no locks here: the header's host and pid tell instead
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, (header + "\n").encode())
        os.fsync(fd)
        return spool, fd


def still_written(spool: Path, header: dict[str, Any], records: list[dict]) -> str | None:
    """Why `spool`, which the replay could lock (`lock_spool`), may still be appended to by a running stage, or
    None. Its writer holds flock(2) on it until it ends (the lock goes with its process, killed or not), which a
    replay on any node sees where the file system's locks are shared; where they are this node's only, a spool
    without its end record written on another node is taken as written still: replay it there, or once its stage
    has ended."""
    if records and records[-1].get("call") == "finish":
        return None
    writer = header.get("writer") or {}
    if writer.get("host") not in (None, socket.gethostname()) and (local := node_local_locks(spool.parent)):
        return (f"not ended, and written on host {writer['host']} (pid {writer.get('pid', '?')}), whose lock this "
                f"node cannot see ({local}): replay it there, or once its stage has ended")
    return None


def lock_spool(spool: Path) -> int | None:
    """A descriptor holding flock(2) on `spool` for the replay until it is closed, or None while another holds it
    (its stage, still writing; another replay). Exclusive where the file can be opened for writing (NFS grants an
    exclusive lock only then), else shared, which the writer's exclusive lock refuses too. NotASpool when another
    replay removed it meanwhile."""
    try:
        fd, mode = os.open(spool, os.O_RDWR), fcntl.LOCK_EX
    except PermissionError:
        fd, mode = os.open(spool, os.O_RDONLY), fcntl.LOCK_SH
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError:  # no locks on this file system: still_written decides by the header
        pass
    try:
        same = os.path.samestat(os.fstat(fd), os.stat(spool))
    except FileNotFoundError:
        same = False
    if not same:
        os.close(fd)
        raise NotASpool("replayed and removed meanwhile by another replay")
    return fd


class ResilientTracker:
    """Forwards every call to the tracker `make` builds, or spools it once the server did not answer. `init`: the
    tracker's arguments (JSON), recorded so that a replay builds the same run (with the run's id, when the
    tracker had one before the server went away)."""

    def __init__(self, make: Callable[..., NullTracker], init: dict[str, Any], system_metrics: bool = False):
        self.init, self.lock = init, threading.Lock()
        self.uri = store_address(init["uri"]) if init.get("uri") else tracking_uri()
        self.inner: NullTracker | None = None
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
            self.spool, self.spool_fd = _new_spool(
                folder / f"{name}-{os.getpid()}-{time.strftime('%Y%m%dT%H%M%S')}", header)
            self.inner = None  # after the spool is there: a call that finds no tracker writes to it

    def _write(self, method: str, args: tuple, kwargs: dict, time_ms: int) -> None:
        stem = self.spool.stem
        record = {"call": method, "time_ms": time_ms,
                  "args": _encode(list(args), self.spool.parent, stem),
                  "kwargs": _encode(kwargs, self.spool.parent, stem)}
        with self.lock, open(self.spool, "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        # The call's time, fixed before any of it is sent: its points carry it, and so does its record if the
        # server goes away part-way (inside log_model, after its log_metrics went through), so that the replay's
        # points are those already logged, which the store keeps once, not a second point at another time.
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

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """Every tracking call (log_metrics, log_model, ...: whatever the tracker offers) goes through `_call`."""
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self._call(name, *args, **kwargs)

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


def cursor_path(spool: Path) -> Path:
    """How many of the spool's records a replay has logged into each store (`<spool>.cursor`, JSON: store address
    to count): a rerun into the same store starts after them, a replay into another store from the first."""
    return spool.with_name(spool.name + ".cursor")


def read_cursor(spool: Path, recorded: str) -> dict[str, int]:
    """The cursor's counts per store; a count alone (the format before issue 43) was the recorded store's."""
    cursor = cursor_path(spool)
    if not cursor.exists():
        return {}
    value = json.loads(cursor.read_text())
    return {recorded: int(value)} if isinstance(value, int) else {k: int(v) for k, v in value.items()}


def replay_target(recorded: str, to: str | None) -> str:
    """The store a spool is replayed into: `to`, else the one the attempt wrote to. A different
    MLFLOW_TRACKING_URI is refused rather than followed: the run belongs in the store it was started in."""
    if to:
        return store_address(to)
    current = os.environ.get("MLFLOW_TRACKING_URI")
    if current and store_address(current) != recorded:
        raise InputError(f"the spool was written for MLflow at {recorded}, but MLFLOW_TRACKING_URI is {current}: "
                         f"nothing replayed, the file is kept; to log it there, add --to {current}")
    return recorded


def read_records(spool: Path) -> list[dict]:
    """The spool's records after its header. A last line cut short (its stage killed while writing it) is left
    out; any other line that is no record makes it no spool (NotASpool)."""
    text = Path(spool).read_bytes().decode("utf-8", errors="replace")
    lines = text.split("\n")[1:]
    records = []
    for number, line in enumerate(lines, 2):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict) or "call" not in record or "time_ms" not in record:
            if number == len(lines) + 1:  # the last line, with no newline after it
                break
            raise NotASpool(f"line {number} is no spool record")
        records.append(record)
    return records


def replay(spool: Path, make: Callable[..., NullTracker], to: str | None = None) -> int:
    """Builds the spooled run's tracker (the same run: its recorded id or code version, in the recorded store or
    `to`) and replays the calls a previous replay did not log; returns how many it logged. Each call keeps its
    original time (a metric point sent twice is the same point) and the cursor file moves past it once logged
    into this store, so an interrupted replay resumes and a finished one logs nothing again. A spooled end does
    not overwrite the status of a run that a later attempt has started on (MlflowTracker.finish)."""
    header = spool_header(spool)
    uri = replay_target(store_address(header["uri"]), to)
    calls = read_records(spool)
    counts = read_cursor(spool, store_address(header["uri"]))
    done = counts.get(uri, 0)  # what went into this store: a replay cut short into another one logged none here
    if done >= len(calls):
        return 0
    tracker = make(**(header["init"] | {"uri": uri}))
    for index in range(done, len(calls)):
        record = calls[index]
        args, kwargs = _decode(record["args"], spool.parent), _decode(record["kwargs"], spool.parent)
        with tracker.called_at(record["time_ms"]):
            getattr(tracker, record["call"])(*args, **kwargs)
        counts[uri] = index + 1
        atomic_write_text(cursor_path(spool), json.dumps(counts))
    return len(calls) - done


def remove_spool(spool: Path) -> None:
    """A replayed spool's files: its arrays, itself, its cursor (last: until the spool goes, a rerun finds it
    done)."""
    for npy in spool.parent.glob(f"{spool.stem}-*.npy"):
        npy.unlink()
    spool.unlink()
    cursor_path(spool).unlink(missing_ok=True)


def stage_tracker(preset: str, variant: str | None, stage: str, dag_id: str, tags: dict[str, str] | None = None,
                  **options: Any) -> NullTracker:
    """MlflowTracker unless PUT_TRACKING=0 (options: labels, system_metrics, seed, from_outputs), whose calls are
    spooled once the server stops answering (put/tracking/spool.py)."""
    if not tracking_enabled():
        return NullTracker()
    from put.tracking.runs import MlflowTracker, stage_code

    # sampled through ResilientTracker, so that its figures are spooled too; a run logged from outputs ran nothing
    system = options.pop("system_metrics", False) and not options.get("from_outputs", False)
    # the run's identity and the attempt's start, fixed now: a replay after a code change logs into this run
    # and its store, resolved once: what the process's environment says later does not move it (issue 43)
    init = {"preset": preset, "variant": variant, "stage": stage, "dag_id": dag_id, "tags": tags,
            "code": stage_code(stage), "attempt": int(time.time() * 1000), "uri": tracking_uri(), **options}
    return ResilientTracker(MlflowTracker, init, system)

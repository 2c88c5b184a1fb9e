"""The spool file of a run whose tracking server stopped answering, and `put track-replay FILE`'s resumable replay
into the same run (docs/mlflow.md, "When the tracking server is down")."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from put.errors import InputError
from put.io.files import atomic_write_text
from put.io.output_lock import node_local_locks
from put.tracking.base import Tracker
from put.tracking.source import store_address
from put.tracking.workspace import resolve

SPOOL_ENV = "PUT_MLFLOW_SPOOL"
SPOOL_DIR = "mlflow-unsent"  # in the workspace, beside its outputs (a cluster's shared file system)


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


def encode(value: Any, folder: Path, stem: str) -> Any:
    """JSON for a call's argument: paths as absolute paths, arrays (images) as .npy files beside the spool."""
    if isinstance(value, Path):
        return {"__path__": str(value.resolve())}
    if isinstance(value, np.ndarray):
        name = f"{stem}-{time.monotonic_ns()}.npy"
        np.save(folder / name, value)
        return {"__npy__": name}
    if isinstance(value, dict):
        return {str(k): encode(v, folder, stem) for k, v in value.items()}
    if isinstance(value, tuple):  # logged as text: (0.0, 0.5) must stay a tuple
        return {"__tuple__": [encode(v, folder, stem) for v in value]}
    if isinstance(value, list):
        return [encode(v, folder, stem) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def decode(value: Any, folder: Path) -> Any:
    if isinstance(value, dict):
        if "__path__" in value:
            return Path(value["__path__"])
        if "__npy__" in value:
            return np.load(folder / value["__npy__"])
        if "__tuple__" in value:
            return tuple(decode(v, folder) for v in value["__tuple__"])
        return {k: decode(v, folder) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v, folder) for v in value]
    return value


def new_spool(stem: Path, header: str) -> tuple[Path, int]:
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
    """Why the locked `spool` may still be appended to by a running stage, or None. Its writer holds flock(2)
    until its process ends; where locks are node-local, a spool from another node without its end record is
    taken as still written."""
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


def cursor_path(spool: Path) -> Path:
    """How many of the spool's records a replay has logged into each store (`<spool>.cursor`, JSON: store address
    to count): a rerun into the same store starts after them, a replay into another store from the first."""
    return spool.with_name(spool.name + ".cursor")


def read_cursor(spool: Path) -> dict[str, int]:
    """The cursor's counts per store (none before the first record is logged)."""
    cursor = cursor_path(spool)
    if not cursor.exists():
        return {}
    return {k: int(v) for k, v in json.loads(cursor.read_text()).items()}


def write_cursor(spool: Path, counts: dict[str, int]) -> None:
    atomic_write_text(cursor_path(spool), json.dumps(counts))


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


def replay(spool: Path, make: Callable[..., Tracker], to: str | None = None) -> int:
    """Replay into the spooled run (in its recorded store or `to`) the calls not yet logged; returns how many.
    Calls keep their original time (a point sent twice is the same point) and the cursor advances per call, so
    an interrupted replay resumes. A spooled end does not overwrite a later attempt's status."""
    header = spool_header(spool)
    uri = replay_target(store_address(header["uri"]), to)
    calls = read_records(spool)
    counts = read_cursor(spool)
    done = counts.get(uri, 0)  # what went into this store: a replay cut short into another one logged none here
    if done >= len(calls):
        return 0
    tracker = make(**(header["init"] | {"uri": uri}))
    for index in range(done, len(calls)):
        record = calls[index]
        args, kwargs = decode(record["args"], spool.parent), decode(record["kwargs"], spool.parent)
        with tracker.called_at(record["time_ms"]):
            getattr(tracker, record["call"])(*args, **kwargs)
        counts[uri] = index + 1
        write_cursor(spool, counts)
    return len(calls) - done


def remove_spool(spool: Path) -> None:
    """A replayed spool's files: its arrays, itself, its cursor (last: until the spool goes, a rerun finds it
    done)."""
    for npy in spool.parent.glob(f"{spool.stem}-*.npy"):
        npy.unlink()
    spool.unlink()
    cursor_path(spool).unlink(missing_ok=True)

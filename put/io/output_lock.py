"""One writer per output: an exclusive flock(2) on `.NAME.lock` beside it, held for the whole run. A second run
stops at once with a LockedError naming the holder; where locks cannot keep it out, the run is refused unless
PUT_UNLOCKED_OUTPUTS=1. `hand_over` keeps the locks through a launch (docs/reliability.md, "Output locks")."""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import re
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from put.errors import LockedError, PathError
from put.io.files import recover_leftovers

MOUNTS = Path("/proc/self/mountinfo")
READ_HOLDER_S = 2.0  # a lock just taken holds its identity a moment later: how long a refused run looks for it
NODE_LOCAL = {"nfs": {"nolock", "local_lock=all", "local_lock=flock"}, "lustre": {"localflock"}}
# Set by a command that launches workers (put/cli.py) to its lock's token: its workers run under its locks.
HANDED_OVER_ENV = "PUT_OUTPUT_LOCKS_HELD"
UNLOCKED_ENV = "PUT_UNLOCKED_OUTPUTS"  # "1": run where locks cannot guard an output, one run per output at your care


class NoLocksError(PathError):
    """An output on a file system whose locks cannot keep another run out: none (ENOLCK), local to one node, or
    not enforced."""


def unusable_locks(output: Path, why: str) -> None:
    """Refuses the run (NoLocksError), or warns where PUT_UNLOCKED_OUTPUTS=1 says to run unguarded."""
    if os.environ.get(UNLOCKED_ENV) == "1":
        print(f"warning: {output}: not guarded ({why}; {UNLOCKED_ENV}=1): a run started meanwhile, here or on "
              "another node, would not be kept from this output", file=sys.stderr)
        return
    raise NoLocksError(errno.ENOLCK, f"output locks do not work here ({why}), so a second run on this output, on "
                       "another node, would not be kept out; put the output on a file system whose locks every node "
                       f"shares (docs/reliability.md, \"Output locks\"), or set {UNLOCKED_ENV}=1 to run unguarded",
                       str(output))


def locks_enforced(lock: Path) -> bool:
    """Whether a second open of `lock`, which this process holds, is refused its lock: a file system that
    accepts flock without enforcing it (some FUSE mounts) keeps no run out."""
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True  # BlockingIOError: held, as it should be
    finally:
        os.close(fd)  # its own lock, if it got one, goes with it; ours stays (flock: per open file)
    return False


def lock_path(output: Path) -> Path:
    return output.with_name(f".{output.name}.lock")


def this_process() -> dict:
    """Who holds a lock: what its LockedError tells the next run."""
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "slurm_job": os.environ.get("SLURM_JOB_ID"), "command": " ".join(["put", *sys.argv[1:]])[:200]}


def describe(holder: dict) -> str:
    job = f", Slurm job {holder['slurm_job']}" if holder.get("slurm_job") else ""
    return f"host {holder['host']}, pid {holder['pid']}, started {holder['started']}{job}: {holder['command']}"


def _holder(fd: int) -> dict | None:
    try:
        holder = json.loads(os.pread(fd, 4096, 0))
        describe(holder)  # has every field
        return holder
    except (ValueError, KeyError, TypeError):
        return None  # not written yet, or not by this code


def _token(lock: Path) -> str | None:
    try:
        return json.loads(lock.read_bytes()).get("token")
    except (OSError, ValueError, AttributeError):
        return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:  # removed (ENOENT), or stale on NFS (ESTALE)
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def node_local_locks(path: Path) -> str | None:
    """Why locks on `path`'s file system are local to this node, if they are: a mount option (NFS, Lustre), or a
    FUSE mount (fuse.sshfs, fuse.s3fs, ...: the kernel takes flock on the client, no other node sees it)."""
    try:
        lines = MOUNTS.read_text().splitlines()
    except OSError:
        return None
    target, longest, found = os.path.realpath(path), -1, None
    for line in lines:  # ID PARENT DEV ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS
        mount, _, fs = line.partition(" - ")
        mount, fs = mount.split(), fs.split()
        if len(mount) < 6 or len(fs) < 3:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), mount[4])  # "\040": a space
        if len(point) < longest or not (target == point or target.startswith(point.rstrip("/") + "/")):
            continue
        options = set(mount[5].split(",")) | set(fs[2].split(","))
        local = options & NODE_LOCAL.get(re.sub(r"\d+$", "", fs[0]), set())  # nfs4 -> nfs
        longest, found = len(point), (f"{fs[0]} mounted with {','.join(sorted(local))}" if local else None)
        if fs[0] == "fuse" or fs[0].startswith("fuse."):  # sshfs, s3fs, ...: flock is the kernel's, on this node
            found = f"{fs[0]}, a FUSE mount, whose locks the kernel keeps on this node"
    return found


class OutputLock:
    """Holds the locks of `outputs` while in use (`with OutputLock([...]):`); on entering, removes what killed
    runs left of them (fileio.recover_leftovers) and prints what it did."""

    def __init__(self, outputs: list[Path], handed_over: str | None = None):
        """`handed_over`: in a launched worker, the launcher's token (HANDED_OVER_ENV); an output whose lock file
        holds it is the launcher's to hold, not taken again."""
        self.outputs = sorted({Path(o).absolute() for o in outputs})
        self.handed_over = handed_over
        self.token = secrets.token_hex(8)  # tells this holder's workers its lock file from any other
        self.content = json.dumps({**this_process(), "token": self.token}, indent=1).encode()
        self.held: list[tuple[Path, int]] = []

    def __enter__(self) -> OutputLock:
        try:
            for output in self.outputs:
                if self.handed_over and _token(lock_path(output)) == self.handed_over:
                    continue  # the launcher holds it, and recovered its leftovers
                self._acquire(output)
                for line in recover_leftovers(output):  # this host's of dead processes only, locked or not
                    print(f"recovered: {line}", file=sys.stderr)
        except BaseException:
            self.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _acquire(self, output: Path) -> None:
        """Locks `output`; where locks cannot (unusable_locks), refuses, or goes on unguarded when told to."""
        lock = lock_path(output)
        lock.parent.mkdir(parents=True, exist_ok=True)
        if local := node_local_locks(lock.parent):
            unusable_locks(output, f"locks are local to this node: {local}")
        deadline = time.monotonic() + READ_HOLDER_S
        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                if holder is None and time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                held_by = describe(holder) if holder else "an unreadable lock file"
                raise LockedError(f"{output}: in use by another run ({held_by}); stopping so that the two do not "
                                   f"overwrite each other. A run's lock ends with its process; if its node died, "
                                   f"delete {lock}") from None
            except OSError as err:  # ENOLCK (no lock manager), EOPNOTSUPP, ...
                os.close(fd)
                unusable_locks(output, f"{err.strerror} for {lock}")
                return
            if _same_file(fd, lock):
                break
            os.close(fd)  # the file the previous holder removed on release: lock the one at the path now
        self.held.append((lock, fd))  # first: released (and removed) if what follows fails
        if not locks_enforced(lock):
            unusable_locks(output, f"flock on {lock} does not keep a second open of it out")
        os.ftruncate(fd, 0)
        os.pwrite(fd, self.content, 0)
        os.fsync(fd)  # on NFS, other nodes read what reached the server

    def hand_over(self) -> None:
        """Keeps the locks held across exec, by the launcher this process becomes, until it ends: its workers,
        its children, run under them and do not take them again (HANDED_OVER_ENV), so no other run can start
        between this check and their work (docs/reliability.md, "Output locks")."""
        for _, fd in self.held:
            os.set_inheritable(fd, True)
        os.environ[HANDED_OVER_ENV] = self.token

    def release(self) -> None:
        if os.environ.get(HANDED_OVER_ENV) == self.token:  # the launch failed: not handed over after all
            del os.environ[HANDED_OVER_ENV]
        for lock, fd in reversed(self.held):
            if _same_file(fd, lock):  # not a lock file that replaced ours after a removal by hand
                lock.unlink(missing_ok=True)
            os.close(fd)
        self.held.clear()


@contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """SIGTERM (a scheduler's kill, `kill PID`) as SystemExit, so that every `finally` runs and the output locks
    are released; training replaces it while it runs, to save its state first (put/train/loop.py)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

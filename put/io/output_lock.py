"""One writer per output: an exclusive lock that every `put` command writing an output holds for its whole run
(put/cli.py), across processes and the nodes of a cluster's shared file system. A second run on the same output
stops at once with a LockedError naming the holder (host, pid, start, Slurm job, command); it never waits.

Mechanism: flock(2) on `.NAME.lock` beside the output, a file that holds the holder's identity. The kernel drops
the lock when the holder's process ends, however it ends (kill -9, the OOM killer, Slurm's SIGKILL), so a dead
run never leaves its output locked, and there is no lease to time out, no pid to check and nothing to take over
(a process forked by the holder, a data-loader worker, shares the lock until it exits too).
flock rather than fcntl(F_SETLK): a POSIX lock belongs to the process, so a second lock of the same output in one
process would succeed and the first close of the file, by anyone in the process, would release it. The file is
removed on release, while still locked; an acquirer then checks that the file it locked is still the one at the
path, else a run that opened it just before the removal would hold a deleted file while the next one creates
and locks a new file (the stress test in tests/test_reliability.py fails without the check).

Across nodes, no lease either. On Linux NFS (2.6.12 and later) flock is a whole-file lock held by the server
(NLM on NFSv3, the protocol's own locks on NFSv4), and Lustre mounted with `flock` keeps it coherent across its
clients. A lease would only matter when a holder's node dies, and the file systems have their own: an NFSv4
server drops a dead client's locks when the client's lease ends (90 s by default), before Slurm declares the node
down (SlurmdTimeout, 300 s by default) and requeues its jobs elsewhere, and Lustre evicts a dead client with its
locks. Under NFSv3 the locks of a node that died stay until it reboots (statd tells the server): the error says
to delete the lock file by hand if its node is gone. Where locks are local to a node (NFS mounted `nolock` or
`local_lock=flock|all`, Lustre `localflock`) runs on other nodes would not see them: the command says so on
stderr and runs. (BeeGFS is such a case unless its client sets tuneUseGlobalFileLocks, which the mount options do
not show.) Where flock fails (ENOLCK: no lock manager), the command says so and runs unlocked.

Slurm: a requeued job starts only after its first instance ended, which released the lock; if that instance
still runs (a node cut off from the controller only), the requeued one stops at once, naming it. Not covered: a
node cut off from the file server for longer than its NFSv4 lease loses its locks to the next run, and a job of
that node that goes on once it is back is not told (Linux fails I/O on the lock file only); Slurm has normally
killed it by then, as the node was set down. Snakemake's and DVC's own locks guard their bookkeeping, not the
outputs of concurrent jobs, and stay as they are.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from put.errors import LockedError
from put.io.files import pid_alive, recover_leftovers

MOUNTS = Path("/proc/self/mountinfo")
READ_HOLDER_S = 2.0  # a lock just taken holds its identity a moment later: how long a refused run looks for it
NODE_LOCAL = {"nfs": {"nolock", "local_lock=all", "local_lock=flock"}, "lustre": {"localflock"}}


class OutputLocked(LockedError):
    """An output another run holds."""


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


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:  # removed (ENOENT), or stale on NFS (ESTALE)
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def node_local_locks(path: Path) -> str | None:
    """The mount option that keeps locks on `path`'s file system local to this node, if any."""
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
    return found


class OutputLock:
    """Holds the locks of `outputs` while in use (`with OutputLock([...]):`); on entering, removes what killed
    runs left of them (fileio.recover_leftovers) and prints what it did."""

    def __init__(self, outputs: list[Path]):
        self.outputs = sorted({Path(o).absolute() for o in outputs})
        self.content = json.dumps(this_process(), indent=1).encode()
        self.held: list[tuple[Path, int]] = []

    def __enter__(self) -> OutputLock:
        try:
            for output in self.outputs:
                locked = self._acquire(output)  # then every leftover beside it but this run's is a dead run's
                for line in recover_leftovers(output, (lambda pid: pid == os.getpid()) if locked else pid_alive):
                    print(f"recovered: {line}", file=sys.stderr)
        except BaseException:
            self.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _acquire(self, output: Path) -> bool:
        """Locks `output`: True, or False where the file system refused locks (said on stderr)."""
        lock = lock_path(output)
        lock.parent.mkdir(parents=True, exist_ok=True)
        if local := node_local_locks(lock.parent):
            print(f"warning: {output}: locks are local to this node here ({local}): a run on another node "
                  "would not be kept from this output", file=sys.stderr)
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
                raise OutputLocked(f"{output}: in use by another run ({held_by}); stopping so that the two do not "
                                   f"overwrite each other. A run's lock ends with its process; if its node died, "
                                   f"delete {lock}") from None
            except OSError as err:
                os.close(fd)
                print(f"warning: {output}: not locked ({err.strerror} for {lock}): a run started meanwhile would "
                      "not be kept from this output", file=sys.stderr)
                return False
            if _same_file(fd, lock):
                break
            os.close(fd)  # the file the previous holder removed on release: lock the one at the path now
        os.ftruncate(fd, 0)
        os.pwrite(fd, self.content, 0)
        os.fsync(fd)  # on NFS, other nodes read what reached the server
        self.held.append((lock, fd))
        return True

    def release(self) -> None:
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

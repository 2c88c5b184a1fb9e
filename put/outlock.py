"""One writer per output: an exclusive lock that every `put` command writing an output takes for its whole run
(put/cli.py), across processes and the hosts of a cluster's shared file system. A second run on the same output
stops at once, naming the holder; it never waits for it, and never writes.

Mechanism. The lock of output NAME is the file `.NAME.lock` beside it, holding the holder's host, pid, start
time, boot id, Slurm job and a random token. It is made by writing a uniquely named file and hard-linking it to
`.NAME.lock`: link(2) is atomic and fails when the name exists, on local file systems, on every NFS version (the
procedure open(2) recommends for NFS; O_CREAT|O_EXCL needs NFSv3 or later) and on Lustre, GPFS and BeeGFS, and the
lock appears with its content complete. Where hard links are refused (some FUSE or SMB mounts) O_CREAT|O_EXCL is
used instead. fcntl/flock locks are not used: whether they reach other nodes depends on mount options (NFS's
`nolock`, Lustre's `localflock`), and they would fail silently.

Stale locks. On the holder's own host (same host name and boot id) a lock is stale when its pid no longer runs,
or runs a process started at another time (a reused pid): it is taken over at once. From another host a pid
cannot be checked, so the holder refreshes the lock file's modification time every HEARTBEAT_S seconds (a
thread), and a lock not refreshed for LEASE_S seconds is stale; its age is measured against the file server's
clock (the modification time of a file just written), never this host's. A lock whose refreshes stopped less
than LEASE_S ago (its holder probably died) is waited for, at most until its lease ends. Taking over renames the
stale lock to a unique name, so only one contender gets it, checks that it is still the stale one (else links it
back) and only then creates its own. A holder that finds its lock taken by another run (its lease ran out while
it could not refresh it: a hung file server, a suspended job) exits at once, without writing more (LOST_EXIT);
one that finds its lock missing creates it again. By hand: when you know the holder is gone, delete the
`.NAME.lock` file that the error names.

Slurm. A requeued job (preemption, node failure) is the same job id, a new pid and maybe another node, and Slurm
starts it only after it stopped the first instance: on SIGTERM that instance saves its state and releases the
lock on its way out. If it was killed instead (SIGKILL after KillWait), the new instance takes the lock over at
once on the same node, or, on another node, waits for the lease to end (at most LEASE_S) because the holder's
Slurm job is its own. If the first instance still runs (a node cut off from the controller but not from the file
system), its lock stays fresh, and the requeued instance stops after the lease naming it. Snakemake's retry of a
failed job is a new job: it takes over a dead holder's lock as above, and stops at once on a live one.
Snakemake's own lock (.snakemake/locks) and DVC's (.dvc/tmp/rwlock) guard their own bookkeeping, not the outputs
of concurrent jobs, and stay as they are.
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from put.errors import LockedError
from put.fileio import pid_alive, recover_leftovers

HEARTBEAT_S = 30.0
LEASE_S = 300.0
FRESH_BEATS = 3  # refreshed within this many heartbeats: its holder is alive
LOST_EXIT = 75  # EX_TEMPFAIL: the lock was taken over while this run held it; it stopped without writing more


class OutputLocked(LockedError):
    pass


def lock_path(output: Path) -> Path:
    return output.with_name(f".{output.name}.lock")


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _process_start(pid: int) -> int | None:
    """The process's start time in clock ticks after boot (Linux), which tells a reused pid from the holder."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    started: str
    boot_id: str = ""
    process_start: int | None = None
    slurm_job: str | None = None
    command: str = ""
    token: str = ""

    @classmethod
    def this_process(cls) -> "Holder":
        started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        return cls(socket.gethostname(), os.getpid(), started, _boot_id(), _process_start(os.getpid()),
                   os.environ.get("SLURM_JOB_ID"), " ".join(["put", *sys.argv[1:]])[:500], secrets.token_hex(8))

    def describe(self) -> str:
        job = f", Slurm job {self.slurm_job}" if self.slurm_job else ""
        return f"host {self.host}, pid {self.pid}, started {self.started}{job}"

    def dead_on_this_host(self) -> bool:
        """Known dead: it ran on this host (same name and boot) and its pid no longer runs the same process."""
        if self.host != socket.gethostname():
            return False
        if self.boot_id and _boot_id() and self.boot_id != _boot_id():
            return True  # this host rebooted since
        if not pid_alive(self.pid):
            return True
        now = _process_start(self.pid)
        return self.process_start is not None and now is not None and now != self.process_start


def _parse(raw: bytes) -> Holder | None:
    try:
        return Holder(**json.loads(raw))
    except (ValueError, TypeError):
        return None


def _create(lock: Path, content: bytes) -> tuple[bool, float]:
    """Creates `lock` with `content` unless it exists: (created, the file server's time now)."""
    unique = lock.with_name(f"{lock.name}.{socket.gethostname()}.{os.getpid()}")
    with open(unique, "wb") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
    server_now = unique.stat().st_mtime
    try:
        os.link(unique, lock)
        return True, server_now
    except FileExistsError:
        return False, server_now
    except OSError as err:
        if err.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK):
            return _create_exclusive(lock, content), server_now  # no hard links on this file system
        return unique.stat().st_nlink == 2, server_now  # NFSv2: the link may have been made although it failed
    finally:
        unique.unlink(missing_ok=True)


def _create_exclusive(lock: Path, content: bytes) -> bool:
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(content)
    return True


def _take_over(lock: Path, stale: bytes) -> None:
    """Removes `lock` if it still holds `stale`: renamed first, so that of several contenders one alone gets it;
    a live lock that replaced the stale one meanwhile is linked back."""
    grabbed = lock.with_name(f"{lock.name}.stale.{socket.gethostname()}.{os.getpid()}")
    try:
        os.rename(lock, grabbed)
    except FileNotFoundError:
        return  # another contender took it
    try:
        if grabbed.read_bytes() != stale:
            try:
                os.link(grabbed, lock)
            except FileExistsError:
                pass  # yet another lock is there: the one we moved finds it at its next refresh and stops
    finally:
        grabbed.unlink(missing_ok=True)


def _remove_own_leftovers(lock: Path) -> None:
    """The uniquely named files `_create` and `_take_over` use for an instant, left by a process of this host that
    was killed in that instant."""
    for entry in lock.parent.glob(f"{lock.name}.*"):
        host, _, pid = entry.name[len(lock.name) + 1:].removeprefix("stale.").rpartition(".")
        if host == socket.gethostname() and pid.isdigit() and not pid_alive(int(pid)):
            entry.unlink(missing_ok=True)


class OutputLock:
    """Holds the locks of `outputs` while in use (`with OutputLock([...]) as lock:`), refreshing them; on
    entering, removes what killed runs left of them (fileio.recover_leftovers) and prints what it did."""

    def __init__(self, outputs: list[Path], heartbeat: float | None = None, lease: float | None = None):
        self.outputs = sorted({Path(o).absolute() for o in outputs})
        self.heartbeat = HEARTBEAT_S if heartbeat is None else heartbeat
        self.lease = LEASE_S if lease is None else lease
        self.me = Holder.this_process()
        self.content = json.dumps(asdict(self.me), indent=1).encode()
        self.held: list[Path] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "OutputLock":
        try:
            for output in self.outputs:
                self._acquire(output)
                for line in recover_leftovers(output, alive=lambda pid: pid == os.getpid()):
                    print(f"recovered: {line}", file=sys.stderr)
        except BaseException:
            self.release()
            raise
        self._thread = threading.Thread(target=self._refresh, name="put-output-lock", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _acquire(self, output: Path) -> None:
        lock = lock_path(output)
        lock.parent.mkdir(parents=True, exist_ok=True)
        waited_since = None
        while True:
            created, server_now = _create(lock, self.content)
            if created:
                self.held.append(lock)
                _remove_own_leftovers(lock)
                return
            try:
                raw, mtime = lock.read_bytes(), lock.stat().st_mtime
            except FileNotFoundError:
                continue  # released meanwhile
            holder, age = _parse(raw), server_now - mtime
            verdict = self._judge(holder, age)
            if verdict == "stale":
                print(f"{output}: taking over the lock of a run that no longer runs "
                      f"({holder.describe() if holder else 'unreadable lock file'})", file=sys.stderr)
                _take_over(lock, raw)
                continue
            if verdict == "wait" and (waited_since is None or time.monotonic() - waited_since < self.lease):
                if waited_since is None:
                    waited_since = time.monotonic()
                    print(f"{output}: locked by {holder.describe()}, not refreshed for {age:.0f} s: waiting up to "
                          f"{self.lease - age:.0f} s for its lease to end", file=sys.stderr)
                time.sleep(min(self.heartbeat, max(0.05, self.lease - age)))
                continue
            held_by = holder.describe() if holder else "an unreadable lock file"
            raise OutputLocked(f"{output}: in use by another run ({held_by}); stopping so that the two do not "
                               f"overwrite each other. If that run is gone, delete {lock}")

    def _judge(self, holder: Holder | None, age: float) -> str:
        """stale (take it over), wait (its lease may end soon) or live."""
        if holder is None:  # not a lock this code wrote: stale only once its lease is over
            return "stale" if age >= self.lease else "live"
        if holder.dead_on_this_host() or (holder.host != self.me.host and age >= self.lease):
            return "stale"
        if holder.host == self.me.host:
            return "live"
        same_job = holder.slurm_job is not None and holder.slurm_job == self.me.slurm_job
        return "wait" if same_job or age >= min(FRESH_BEATS * self.heartbeat, self.lease) else "live"

    def _refresh(self) -> None:
        while not self._stop.wait(self.heartbeat):
            for lock in list(self.held):
                try:
                    if lock.read_bytes() == self.content:
                        os.utime(lock)
                        continue
                except FileNotFoundError:  # removed by hand while this run holds it: made again
                    if _create(lock, self.content)[0]:
                        continue
                except OSError:
                    continue  # the file server did not answer: try again at the next beat
                if self._stop.is_set():
                    return
                try:
                    holder = _parse(lock.read_bytes())
                except OSError:
                    holder = None
                print(f"{lock}: this run's lock was taken over by {holder.describe() if holder else 'another run'}"
                      " (its lease ran out while this run could not refresh it); stopping at once, writing nothing "
                      "more", file=sys.stderr, flush=True)
                os._exit(LOST_EXIT)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for lock in reversed(self.held):
            try:
                if lock.read_bytes() == self.content:
                    lock.unlink()
            except FileNotFoundError:
                pass
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

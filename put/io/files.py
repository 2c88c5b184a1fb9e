"""Files in and out: writes never left half done (temporary name, renamed), recovery of what a killed run left,
writability checks, JSON and CSV reads whose errors name the file, hashes (docs/reliability.md, "Atomic writes")."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import io
import json
import os
import re
import shutil
import socket
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from put.errors import FileMismatchError, MissingFileError, PathError
from put.io.diskspace import DiskFullError, as_disk_full, human

if TYPE_CHECKING:
    import pandas as pd


def this_host() -> str:
    """This machine's name as temporary names carry it (characters of host names only)."""
    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())


def temporary_name(path: Path, what: str = "tmp") -> Path:
    """`.NAME.WHAT-HOST-PID`: the host too, because a pid says whether a process lives only on its own host."""
    return path.with_name(f".{path.name}.{what}-{this_host()}-{os.getpid()}")


def link_or_copy(source: str | os.PathLike, target: str | os.PathLike) -> Path:
    """`target` replaced atomically by a hard link to `source` (a copy where the file system has no hard links),
    through `atomic_path`: a copy that fails (a full disk: DiskFullError naming `target`) leaves no temporary
    file, and one killed leaves `.NAME.tmp-HOST-PID`, which `recover_leftovers(target)` removes."""
    target = Path(target)
    with atomic_path(target, needed=None) as tmp:
        tmp.unlink(missing_ok=True)
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)
    return target


@contextmanager
def atomic_path(path: str | os.PathLike, needed: int | None = None) -> Iterator[Path]:
    """Yields a temporary path beside `path`; it replaces `path` when the block succeeds and is removed
    when it fails. A full disk is a DiskFullError naming `path` (and `needed`, its size, when the caller knows)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except Exception as err:
        tmp.unlink(missing_ok=True)  # first, so that the error counts the space it held as free
        if not isinstance(err, DiskFullError) and (full := as_disk_full(err, path, needed)) is not None:
            raise full from err
        raise
    finally:
        tmp.unlink(missing_ok=True)


def check_output(path: str | os.PathLike, folder: bool) -> None:
    """Raises now, naming the path, when an output file (or folder) could not be written at `path`: the
    wrong kind of thing is there, or the nearest existing folder above it is not a writable folder."""
    path = Path(path)
    if folder and path.exists() and not path.is_dir():
        raise PathError(errno.ENOTDIR, "exists and is not a folder (expected an output folder)", str(path))
    if not folder and path.is_dir():
        raise PathError(errno.EISDIR, "is a folder (expected an output file name)", str(path))
    above = next(p for p in (path.parent, *path.parent.parents) if p.exists())
    if not above.is_dir():
        raise PathError(errno.ENOTDIR, f"is not a folder, so {path} cannot be written", str(above))
    if not os.access(above, os.W_OK | os.X_OK):
        raise PathError(errno.EACCES, f"folder not writable, so {path} cannot be written", str(above))


def _renameat2() -> Callable | None:
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2  # glibc >= 2.28
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return function


RENAMEAT2, AT_FDCWD, RENAME_EXCHANGE = _renameat2(), -100, 2


def exchange(a: Path, b: Path) -> bool:
    """Swaps the names of `a` and `b` in one atomic step (Linux's renameat2 RENAME_EXCHANGE: ext4, xfs, btrfs,
    tmpfs, ...). False where the C library or the file system has none (NFS, Lustre, macOS): nothing changed."""
    if RENAMEAT2 is None:
        return False
    if RENAMEAT2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def replace_folder(new: Path, path: Path) -> None:
    """Puts the folder `new` at `path`; readers see the old or the new, never a mix. An atomic exchange where the
    platform has it (old content then at `new`), else two renames via .NAME.old-HOST-PID, whose kill in between
    `recover_leftovers` repairs."""
    if not path.exists():
        os.replace(new, path)
    elif not exchange(new, path):
        old = temporary_name(path, "old")
        os.replace(path, old)
        os.replace(new, path)
        shutil.rmtree(old)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yields an empty temporary folder beside `path` that replaces it when the block succeeds and is removed when
    it fails: the old folder or the complete new one, never half. A full disk is a DiskFullError naming `path`."""
    path = Path(path)
    check_output(path, folder=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        replace_folder(tmp, path)
    except Exception as err:
        if (full := as_disk_full(err, path)) is not None:
            written = folder_bytes(tmp) if tmp.is_dir() else 0
            shutil.rmtree(tmp, ignore_errors=True)  # first, so that the error counts the space it held as free
            raise DiskFullError(path, None, reason=f"{full.strerror.lower()} after writing {human(written)} of the "
                                f"new folder beside the old one", code=full.errno) from err
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


LEFTOVER = re.compile(r"\.(?P<name>.+)\.(?P<what>tmp|old)-(?P<host>[A-Za-z0-9._-]+)-(?P<pid>\d+)")


def pid_alive(pid: int) -> bool:
    """A process with this id runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def left_by_dead_run(entry: Path, alive: Callable[[int], bool] = pid_alive) -> bool:
    """A temporary name of this host whose process has ended."""
    m = LEFTOVER.fullmatch(entry.name)
    return m is not None and m["host"] == this_host() and not alive(int(m["pid"]))


def _remove(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)


def recover_leftovers(path: str | os.PathLike, alive: Callable[[int], bool] = pid_alive) -> list[str]:
    """Clean up what killed runs left of the output `path`: this host's temporary files whose process is not
    `alive` are removed, and a swapped-out `.NAME.old-HOST-PID` is put back when `path` is missing. Other hosts'
    are only named: their run may still live (docs/reliability.md). Returns one line per action or kept leftover."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    host = this_host()

    def kept(entry: Path, m: re.Match) -> str:
        return (f"{entry}: kept, left by a run on host {m['host']} (pid {m['pid']}), which cannot be checked from "
                "here; delete it once that run is over")

    beside = [(entry, m) for entry in path.parent.iterdir()
              if (m := LEFTOVER.fullmatch(entry.name)) and m["name"] == path.name]
    done = [kept(entry, m) for entry, m in beside if m["host"] != host]
    dead = [(entry, m) for entry, m in beside if m["host"] == host and not alive(int(m["pid"]))]
    olds = sorted((entry for entry, m in dead if m["what"] == "old"), key=lambda e: e.stat().st_mtime)
    if not path.exists() and olds:
        os.replace(olds[-1], path)
        done.append(f"{path}: put back the previous {path.name}, which an interrupted run (pid "
                    f"{LEFTOVER.fullmatch(olds[-1].name)['pid']}) had moved to {olds[-1].name}")
    inside = [(entry, m) for entry in path.rglob(".*.tmp-*")
              if (m := LEFTOVER.fullmatch(entry.name))] if path.is_dir() else []
    done += [kept(entry, m) for entry, m in inside if m["host"] != host]
    dead += [(entry, m) for entry, m in inside if m["host"] == host and not alive(int(m["pid"]))]
    for entry, m in dead:
        if entry.exists() or entry.is_symlink():
            _remove(entry)
            done.append(f"{entry}: removed, left by an interrupted run (pid {m['pid']})")
    return done


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    data = text.encode("utf-8")
    with atomic_path(path, needed=len(data)) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def read_json(path: str | os.PathLike, expected: str) -> Any:
    """A JSON file's content; a missing file or invalid JSON is an error naming the file and what was expected."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path}: file not found (expected {expected})")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FileMismatchError(f"{path}: not valid JSON ({err}); expected {expected}") from None


def read_csv(path: str | os.PathLike, expected: str, **options: Any) -> pd.DataFrame:
    """pandas.read_csv(path, **options); a file that does not parse as CSV is an error naming it."""
    import pandas as pd  # only the readers of tables need it

    try:
        return pd.read_csv(path, **options)
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise FileMismatchError(f"{path}: not a readable CSV file ({err}); expected {expected}") from None


def read_manifest_csv(path: Path, name: str, writer: str, hint: str, columns: tuple[str, ...], dtype: dict,
                      error: type[Exception] | None = None) -> pd.DataFrame:
    """A stage's manifest (a CSV of string columns) with every column of `columns`; a missing file or column is an
    error naming it (`error` for both, else MissingFileError and FileMismatchError), the file's by `name`, what
    writes it and `hint`."""
    if not path.is_file():
        raise (error or MissingFileError)(f"{path}: no {name} ({hint})")
    frame = read_csv(path, f"the {name} {writer} writes", keep_default_na=False, dtype=dtype)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise (error or FileMismatchError)(f"{path}: manifest lacks column(s) {', '.join(missing)}; "
                                           f"expected {', '.join(columns)}")
    return frame


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _Tee(io.TextIOBase):
    def __init__(self, stream, log):
        self.stream, self.log = stream, log

    def write(self, text: str) -> int:
        self.stream.write(text)
        if self.log is not None:
            try:
                self.log.write(text)
            except OSError:  # a full disk: the terminal still gets every line, the error included
                self.log = None
        return len(text)

    def flush(self) -> None:
        self.stream.flush()
        if self.log is not None:
            try:
                self.log.flush()
            except OSError:
                self.log = None

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


@contextmanager
def tee_output(path: str | os.PathLike) -> Iterator[None]:
    """Everything printed to stdout/stderr inside the block also goes to `path` (appended: a resumed or
    retried job keeps the earlier attempts' lines)."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        log = open(path, "a", encoding="utf-8", buffering=1)
    except OSError as err:  # a path that cannot be a log (a folder, under a file, not writable): one line
        raise PathError(err.errno, f"cannot write the log here ({err.strerror})", str(path)) from None
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(sys.stdout, log), _Tee(sys.stderr, log)
    try:
        yield
    except Exception:  # the interpreter prints the traceback only after the block: put it in the log too
        with suppress(OSError):  # a full disk: the terminal has it
            traceback.print_exc(file=log)
        raise
    finally:
        sys.stdout, sys.stderr = saved
        with suppress(OSError):  # a full disk: the log misses its last lines, the command's outcome stands
            log.close()

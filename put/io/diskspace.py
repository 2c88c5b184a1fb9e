"""A full disk (or quota), told as one line: which output, how many bytes it needs when known, and what was kept.

Outputs are renamed into place only when complete, so a write that runs out of space loses nothing. Writers turn
ENOSPC / EDQUOT (also when wrapped, as by torch's zip writer) into `DiskFullError`; `require_space` refuses a large
write before it starts."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from put.errors import PutError

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def human(size: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def free_bytes(path: str | os.PathLike) -> int | None:
    """Bytes this user may still write on the file system of `path` (its nearest existing folder above)."""
    path = Path(path).absolute()
    folder = next((p for p in (path, *path.parents) if p.is_dir()), None)
    try:
        return shutil.disk_usage(folder).free if folder is not None else None
    except OSError:
        return None


class DiskFullError(PutError, OSError):
    """No room for `path`: the message names it, the bytes it needs when known (`needed`), the free bytes, and
    what is as it was (`kept`; by default: the earlier `path`, or nothing, since it is written whole or not)."""

    def __init__(self, path: str | os.PathLike, needed: int | None = None, kept: str | None = None,
                 reason: str = "no space left on device", code: int = errno.ENOSPC):
        path = Path(path)
        free = free_bytes(path)
        sizes = [f"needs about {human(needed)}" if needed is not None else "",
                 f"{human(free)} free" if free is not None else ""]
        sizes_text = f" ({', '.join(s for s in sizes if s)})" if any(sizes) else ""
        if kept is None:
            kept = (f"the existing {path} is as it was" if path.exists() else
                    f"no partial {path.name} was left (outputs are renamed into place only when complete)")
        self.message = f"{path}: {reason.lower()}{sizes_text}; nothing was lost: {kept}. Free space, then re-run"
        super().__init__(code, reason, str(path))
        self.needed = needed

    def __str__(self) -> str:
        return self.message


def disk_full_cause(err: BaseException | None) -> OSError | None:
    """The ENOSPC / EDQUOT error behind `err` (itself, or in its chain of causes and contexts), if any. torch's
    zip writer, say, reports a failed write as RuntimeError("... unexpected pos ...") whose context is the
    OSError(ENOSPC) that Python's file object raised."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in DISK_FULL_ERRNOS:
            return err
        err = err.__cause__ or err.__context__
    return None


def as_disk_full(err: BaseException, path: str | os.PathLike, needed: int | None = None,
                 kept: str | None = None) -> DiskFullError | None:
    """`err` as a DiskFullError naming `path` when a full disk caused it (None otherwise)."""
    cause = disk_full_cause(err)
    if cause is None:
        return None
    return DiskFullError(path, needed, kept, reason=cause.strerror or os.strerror(cause.errno), code=cause.errno)


def require_space(path: str | os.PathLike, needed: int, kept: str | None = None) -> None:
    """Raises DiskFullError before writing `needed` bytes at `path` when its file system has less room."""
    free = free_bytes(path)
    if free is not None and free < needed:
        raise DiskFullError(path, needed, kept, reason="not enough space left on device")

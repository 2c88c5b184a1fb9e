"""Writing files so that a crash never leaves half of one: everything goes to a temporary name beside
the target and is renamed onto it (atomic on POSIX), and content hashes."""

from __future__ import annotations

import hashlib
import io
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path beside `path`; it replaces `path` when the block succeeds and is removed
    when it fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


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
        self.log.write(text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()
        self.log.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


@contextmanager
def tee_output(path: str | os.PathLike) -> Iterator[None]:
    """Everything printed to stdout/stderr inside the block also goes to `path` (appended: a resumed or
    retried job keeps the earlier attempts' lines)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8", buffering=1) as log:
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Tee(sys.stdout, log), _Tee(sys.stderr, log)
        try:
            yield
        except Exception:  # the interpreter prints the traceback only after the block: put it in the log too
            traceback.print_exc(file=log)
            raise
        finally:
            sys.stdout, sys.stderr = saved

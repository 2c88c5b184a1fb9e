"""Files in and out: writes that a crash or a bad input never leaves half done (everything goes to a
temporary name beside the target, file or folder, and is renamed onto it: atomic on POSIX), checks that an
output can be written before the work starts, JSON and CSV reads whose errors name the file, content hashes."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


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


def check_output(path: str | os.PathLike, folder: bool) -> None:
    """Raises now, naming the path, when an output file (or folder) could not be written at `path`: the
    wrong kind of thing is there, or the nearest existing folder above it is not a writable folder."""
    path = Path(path)
    if folder and path.exists() and not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "exists and is not a folder (expected an output folder)", str(path))
    if not folder and path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder (expected an output file name)", str(path))
    above = next(p for p in (path.parent, *path.parent.parents) if p.exists())
    if not above.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"is not a folder, so {path} cannot be written", str(above))
    if not os.access(above, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, f"folder not writable, so {path} cannot be written", str(above))


@contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yields an empty temporary folder beside `path`; it replaces the folder `path` (and whatever it held)
    when the block succeeds and is removed when it fails. A stage writing its output folder this way leaves
    either the old folder or the complete new one, never half of one, whatever input it fails on."""
    path = Path(path)
    check_output(path, folder=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, old = (path.with_name(f".{path.name}.{what}-{os.getpid()}") for what in ("tmp", "old"))
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def read_json(path: str | os.PathLike, expected: str) -> Any:
    """A JSON file's content; a missing file or invalid JSON is an error naming the file and what was expected."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: file not found (expected {expected})")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not valid JSON ({err}); expected {expected}") from None


def read_csv(path: str | os.PathLike, expected: str, **options: Any) -> pd.DataFrame:
    """pandas.read_csv(path, **options); a file that does not parse as CSV is an error naming it."""
    import pandas as pd  # only the readers of tables need it

    try:
        return pd.read_csv(path, **options)
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ValueError(f"{path}: not a readable CSV file ({err}); expected {expected}") from None


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

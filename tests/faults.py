"""Faults the tests inject: a pickled object that runs code when it is loaded (tests/test_checkpoint.py,
test_bad_input.py) and a file on a disk that fills up (tests/test_reliability.py, test_training.py)."""

from __future__ import annotations

import errno
import os


class Payload:
    """Unpickling this runs os.mkdir(marker): the marker's absence shows nothing ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


class FillingFile:
    """A binary file whose writes fail with ENOSPC once `room` bytes are written: a disk that fills up."""

    def __init__(self, path, mode="wb", room: int = 1000):
        self.file, self.room = open(path, mode), room

    def write(self, data) -> int:
        if self.file.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.file.write(data)

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()

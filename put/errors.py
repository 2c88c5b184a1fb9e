"""The package's own errors: known causes outside the code (input, files, machine, a service). The CLI prints a
`PutError` as one line (exit 2), the server as a 4xx; anything else is a bug with its traceback. Imports nothing
of the package (docs/reliability.md, "Error kinds")."""

from __future__ import annotations


class PutError(Exception):
    """An error the user can act on: the message says what is wrong and where."""


class InputError(PutError, ValueError):
    """A value that is not what was expected: a setting in params.yaml, an option, an image, a mask, a request."""


class MissingFileError(PutError, FileNotFoundError):
    """A file or folder the command needs does not exist (a checkpoint, a dataset, pretrained weights)."""


class FileMismatchError(PutError, ValueError):
    """A file exists but is not the one expected: a checkpoint of another model, preset or layout, a cache made
    with other settings."""


class PathError(PutError, OSError):
    """A path that cannot be used as asked: an output that is a file where a folder is expected (or the other way
    round), a folder that is not writable. Raised as OSError(errno, reason, path); reads "path: reason"."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


class LockedError(PutError, RuntimeError):
    """An output another run holds."""


class ServiceError(PutError, RuntimeError):
    """A service or remote the command needs did not answer, or refused: a tracking server, a DVC remote, a
    download."""


BUG_REPORT = ("this is a bug in put, not a problem with your input: please report it (the project's issue "
              "tracker) with the traceback above and the command line")


def describe(err: BaseException) -> str:
    """The error for the user: the package's own as their message, the operating system's as "PATH: reason"."""
    if not isinstance(err, PutError) and isinstance(err, OSError) and err.filename is not None and err.strerror:
        return f"{err.filename}: {err.strerror}"
    return str(err)

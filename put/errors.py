"""The package's own errors: failures whose cause is known and lies outside the code (the user's input, their
files, the machine, a service). The CLI turns a `PutError` into one line and exit status 2, and the server into a
4xx answer; any other exception is a bug in the package and keeps its traceback (exit status 1).

Raise the most specific class where the cause is known, with a message that names the file, key or value and
what was expected. Each class also derives from the built-in exception a caller would expect (`ValueError` for
bad values, `FileNotFoundError` for missing files, ...), so `except ValueError` around library calls still works.
"""

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


class LockedError(PutError, RuntimeError):
    """An output another run holds."""


class ServiceError(PutError, RuntimeError):
    """A service or remote the command needs did not answer, or refused: a tracking server, a DVC remote, a
    download."""

"""The error model (put/errors.py): the package's own errors are PutError kinds (and still the built-in exception a
caller catches); the CLI turns them into one line and exit 2, anything else into its traceback, a line saying it
is a bug, and exit 1; the server answers them with a 4xx. The library never imports the CLI."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import put
from put.cli import main
from put.errors import (
    BUG_REPORT,
    FileMismatchError,
    InputError,
    MissingFileError,
    PathError,
    PutError,
    ServiceError,
    describe,
)

PACKAGE = Path(put.__file__).parent
FRONT_END = {PACKAGE / "cli.py", PACKAGE / "__main__.py"}


def error_classes() -> list[tuple[type, type, type]]:
    """(class, its PutError kind, the built-in a caller may catch) for each user-facing error class."""
    from put.config.evaluation import MixedRulesError
    from put.config.params import ParamsError
    from put.dag.resources import ClusterConfigError
    from put.data.folder import FolderError
    from put.data.images import ImageReadError, ImageTooLargeError
    from put.data.sources import DatasetLayoutError
    from put.data.split import SplitError
    from put.external.folder import ResultsLeakError, ResultsMismatchError, ResultsMissingError
    from put.io.diskspace import DiskFullError
    from put.io.output_lock import NoLocksError
    from put.io.pretrained import DownloadError, MissingWeightsError
    from put.io.yamlfile import YamlFileError
    from put.masks.io import MaskError
    from put.models.checkpoint import CheckpointError
    from put.official.keys import KeyMappingError
    from put.official.load import OfficialCheckpointError
    from put.sampling.registered import RegisteredModelError
    from put.serve.jobs import AlreadyFinished, QueueFull
    from put.serve.store import UnknownId
    from put.train.loop import StaleState, TrainingDiverged

    return [(ParamsError, InputError, ValueError), (ClusterConfigError, InputError, ValueError),
            (YamlFileError, InputError, ValueError), (SplitError, InputError, ValueError),
            (ImageReadError, InputError, ValueError), (ImageTooLargeError, InputError, ValueError),
            (MaskError, InputError, ValueError), (UnknownId, InputError, LookupError),
            (MissingWeightsError, MissingFileError, FileNotFoundError),
            (DatasetLayoutError, MissingFileError, FileNotFoundError),
            (ResultsMissingError, MissingFileError, FileNotFoundError),
            (CheckpointError, FileMismatchError, RuntimeError), (StaleState, FileMismatchError, RuntimeError),
            (OfficialCheckpointError, FileMismatchError, ValueError), (KeyMappingError, FileMismatchError, ValueError),
            (ResultsMismatchError, FileMismatchError, ValueError), (ResultsLeakError, FileMismatchError, ValueError),
            (MixedRulesError, FileMismatchError, ValueError),
            (FolderError, InputError, ValueError), (RegisteredModelError, InputError, ValueError),
            (DownloadError, ServiceError, RuntimeError),
            (QueueFull, ServiceError, RuntimeError), (AlreadyFinished, InputError, ValueError),
            (DiskFullError, PutError, OSError),
            (TrainingDiverged, PutError, RuntimeError), (NoLocksError, PathError, OSError)]


def test_the_package_errors_are_put_errors_and_still_the_builtins_callers_catch():
    for cls, kind, builtin in error_classes():
        assert issubclass(cls, kind) and issubclass(cls, PutError) and issubclass(cls, builtin), cls
    err = PathError(20, "exists and is not a folder", "out/x")
    assert isinstance(err, OSError) and str(err) == describe(err) == "out/x: exists and is not a folder"
    assert describe(FileNotFoundError(2, "No such file or directory", "a.png")) == "a.png: No such file or directory"


def test_every_error_class_the_package_defines_is_a_put_error_or_internal():
    """A new error class of the package is one of the kinds, or one of these on purpose (not errors the user
    makes: control flow, or a tool the report runs)."""
    # Stopped: a served request's end; NotASpool: a file `put track-replay` skips with a line, never raised out
    internal = {"TrainingStopped", "Stopped", "LatexError", "_DuplicateKey", "NotASpool"}
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception")) or b.id in {"SystemExit"})
                    for b in node.bases):
                found.add(node.name)
    listed = {cls.__name__ for cls, _, _ in error_classes()}
    kinds = {"PutError", "InputError", "MissingFileError", "FileMismatchError", "PathError", "LockedError",
             "ServiceError"}
    assert found - internal - kinds <= listed, found - internal - kinds - listed


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at any depth of its code (relative imports resolved)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-node.level]
                base = ".".join([*parts, base] if base else parts)
            names |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return names


def test_the_library_never_imports_the_cli():
    offenders = [str(path.relative_to(PACKAGE.parent)) for path in sorted(PACKAGE.rglob("*.py"))
                 if path not in FRONT_END and "put.cli" in imports_of(path) | {
                     name for name in imports_of(path) if name.startswith("put.cli.")}]
    assert not offenders, f"import the CLI (put/cli.py): {offenders}"
    assert not [name for name in imports_of(PACKAGE / "errors.py") if name.startswith("put")]  # low in the house


def test_a_user_error_is_one_line_and_exit_2(monkeypatch, capsys):
    import put.commands.info as info

    def bad_input(args):
        raise InputError("params.yaml: sample.top_k: expected an integer >= 1, got 0")

    monkeypatch.setattr(info, "run", bad_input)
    assert main(["info", "--preset", "demo"]) == 2
    assert capsys.readouterr().err == "put info: error: params.yaml: sample.top_k: expected an integer >= 1, got 0\n"


@pytest.mark.parametrize("bug", [KeyError("pvqvae"), ValueError("operands could not be broadcast together"),
                                 FileNotFoundError(2, "No such file or directory", "/tmp/wrong/internal.path")])
def test_an_internal_error_is_its_traceback_a_bug_line_and_exit_1(monkeypatch, capsys, bug):
    """Built-in exceptions the package did not raise on purpose (a ValueError or a FileNotFoundError included) are
    bugs: the traceback to debug them, not a message that blames the input."""
    import put.commands.info as info

    def broken(args):
        raise bug

    monkeypatch.setattr(info, "run", broken)
    assert main(["info", "--preset", "demo"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "in broken" in err
    assert err.splitlines()[-1] == f"put info: internal error ({type(bug).__name__}): {BUG_REPORT}"


def test_exit_statuses_as_a_user_sees_them(tmp_path):
    """Through `python -m put`: a missing checkpoint is one line and exit status 2."""
    result = subprocess.run([sys.executable, "-m", "put", "inpaint", "--checkpoint", str(tmp_path / "t.pt"),
                             "--image", str(tmp_path / "none.png"), "--mask", str(tmp_path / "m.png"), "--out",
                             str(tmp_path / "out"), "--device", "cpu"], capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("put inpaint: error: ")

"""The workspace a stage's run belongs to, wherever the stage runs. DVC runs a queued or `--temp` experiment in a
temporary copy of the workspace (`.dvc/tmp/exps/<tmp>`), deleted when it ends, and tells the stage the workspace
it was queued from (DVC_ROOT) and the experiment (DVC_EXP_NAME, DVC_EXP_BASELINE_REV): the default store, its
lock and the spool resolve there, and the runs carry the experiment as tags (docs/mlflow.md, "Sweeps")."""

from __future__ import annotations

import os
from pathlib import Path

from put.errors import InputError

# dvc/env.py. Every stage command gets DVC_ROOT, the repository's root; a queued or temporary experiment's
# names the workspace it belongs to, not the temporary copy it runs in (dvc/repo/experiments/queue/base.py).
DVC_ROOT = "DVC_ROOT"
DVC_EXP_NAME = "DVC_EXP_NAME"
DVC_EXP_BASELINE_REV = "DVC_EXP_BASELINE_REV"
TEMP_COPIES = (".dvc", "tmp", "exps")  # where DVC makes its temporary copies (dvc/repo/experiments/utils.py)

EXPERIMENT_TAG = "put.dvc.experiment"  # the DVC experiment a run was made by (its name, as `dvc exp show` prints)
BASELINE_TAG = "put.dvc.baseline"  # the commit that experiment was queued from
ARTIFACTS = "mlruns"  # a local store's artefacts, beside it (MLflow's default folder name)


def temporary_copy(folder: Path) -> Path | None:
    """The workspace whose DVC temporary copy `folder` lies in, or None."""
    parts = folder.parts
    for i in range(len(parts) - len(TEMP_COPIES)):
        if parts[i + 1:i + 1 + len(TEMP_COPIES)] == TEMP_COPIES:
            return Path(*parts[:i + 1])
    return None


def workspace() -> Path:
    """The folder a relative store or spool path is relative to: the workspace DVC names (DVC_ROOT), else the
    working directory. A DVC temporary copy that names none is refused: its files are deleted when it ends."""
    folder = Path(os.environ.get(DVC_ROOT) or Path.cwd()).resolve()
    if (owner := temporary_copy(folder)) is not None:
        raise InputError(f"this stage runs in DVC's temporary experiment copy {folder}, deleted when the experiment "
                         f"ends, and DVC named no workspace ({DVC_ROOT} unset): a local MLflow store there would be "
                         f"lost; set MLFLOW_TRACKING_URI=sqlite:///{owner / 'mlflow.db'} (or a tracking server)")
    return folder


def resolve(path: str | Path) -> Path:
    """`path` made absolute against the workspace (an absolute one as it is)."""
    path = Path(path)
    return path.resolve() if path.is_absolute() else (workspace() / path).resolve()


def experiment_tags() -> dict[str, str]:
    """The DVC experiment this stage runs in (queued, temporary or in the workspace), as tags; none outside one."""
    tags = {}
    for variable, tag in ((DVC_EXP_NAME, EXPERIMENT_TAG), (DVC_EXP_BASELINE_REV, BASELINE_TAG)):
        if os.environ.get(variable):
            tags[tag] = os.environ[variable]
    return tags


def artifact_location(uri: str, experiment: str) -> str | None:
    """Where a new experiment of a local SQLite store (an absolute address) keeps its artefacts: `mlruns/<experiment>`
    beside the database, the workspace's for the default store (MLflow would take the working directory: a queued
    run's temporary copy); None for a server, which decides."""
    prefix = "sqlite:///"
    if not uri.startswith(prefix):
        return None
    return (Path(uri[len(prefix):]).parent / ARTIFACTS / experiment).as_uri()

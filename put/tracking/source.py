"""Where a run comes from: the tracking store, the code a stage runs (its version: a hash of its source files),
the git checkout, the host, the Slurm job and the software (tags), and every installed distribution (the run's
environment.txt)."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from functools import cache
from importlib import metadata

from put.io.code import ROOT
from put.tracking.workspace import experiment_tags, resolve

DEFAULT_URI = "sqlite:///mlflow.db"


def tracking_enabled() -> bool:
    return os.environ.get("PUT_TRACKING", "1") not in ("0", "false", "no")


def tracking_uri() -> str:
    """The store runs log to (MLFLOW_TRACKING_URI, else the workspace's mlflow.db), as an address independent of
    the directory: MLflow keeps one store per address string, so a relative `sqlite:///mlflow.db` met earlier in
    the process in another directory would be that directory's file."""
    return store_address(os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI)


def store_address(uri: str) -> str:
    """`uri` as the same store from any directory: a relative SQLite path made absolute against the workspace (a
    DVC experiment's, when the stage runs in its temporary copy: put/tracking/workspace.py), no trailing slash."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri[len(prefix):].startswith("/"):
        return prefix + str(resolve(uri[len(prefix):]))
    return uri.rstrip("/")


CODE_ROOT = ROOT  # the checkout whose code runs (an editable install)
PARAMS_FILE = "params.yaml"  # the knobs, beside the code (a stage run's parameters come from it)


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=CODE_ROOT, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit() -> str | None:
    return _git("rev-parse", "HEAD")


def code_version(files: Sequence[str]) -> str:
    """The first 12 hex digits of a SHA-256 over the files' names and contents: which code a stage run ran."""
    sha = hashlib.sha256()
    for name in sorted(files):
        sha.update(name.encode() + b"\0" + (CODE_ROOT / name).read_bytes() + b"\0")
    return sha.hexdigest()[:12]


def git_dirty(files: Sequence[str]) -> bool:
    """Whether any of `files` (repository-relative) differs from the commit or is not committed."""
    return bool(_git("status", "--porcelain", "--", *files))


def environment_tags(command: str, code: Sequence[str] = ()) -> dict[str, str]:
    """Where and with what this stage ran: source (command, git commit, branch, remote), host, Slurm job,
    library versions, the DVC experiment. `put.git.dirty`: whether the stage's `code` files or its parameters
    (params.yaml, the presets) differ from the commit; the pipeline's own products, which every run rewrites, do
    not count."""
    from put.config.presets import PRESET_FILE
    from put.io.versions import versions

    tags = {"put.host": socket.gethostname(), "mlflow.source.type": "LOCAL", "mlflow.source.name": command}
    for tag, args in (("mlflow.source.git.commit", ("rev-parse", "HEAD")),
                      ("mlflow.source.git.branch", ("rev-parse", "--abbrev-ref", "HEAD")),
                      ("mlflow.source.git.repoURL", ("remote", "get-url", "origin"))):
        if value := _git(*args):
            tags[tag] = value
    if tags.get("mlflow.source.git.commit"):
        tags["put.git.dirty"] = str(git_dirty([*code, PARAMS_FILE, PRESET_FILE.relative_to(CODE_ROOT).as_posix()]))
    for var, tag in (("SLURM_JOB_ID", "put.slurm_job_id"), ("SLURM_ARRAY_JOB_ID", "put.slurm_array_job_id")):
        if os.environ.get(var):
            tags[tag] = os.environ[var]
    tags |= experiment_tags()
    tags |= {f"put.version.{name}": value[:5000] for name, value in versions().items()}  # and the lock's state
    if "torch" in sys.modules:  # the CUDA/cuDNN the stage's torch was built with, when any
        torch = sys.modules["torch"]
        for tag, value in (("put.version.cuda", torch.version.cuda),
                           ("put.version.cudnn", torch.backends.cudnn.version())):
            if value:
                tags[tag] = str(value)
    return tags


@cache
def installed_distributions() -> str:
    """Every installed distribution and its version, one per line (the run's `environment.txt`); read once per
    process (parsing the metadata of every distribution takes a second), as put.io.versions' `versions`."""
    found = {(d.metadata["Name"] or "?").lower(): d.version for d in metadata.distributions()}
    return "".join(f"{name}=={version}\n" for name, version in sorted(found.items()))

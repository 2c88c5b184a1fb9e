"""Files of a git revision or DVC experiment (a commit under refs/exps/), read with `git show REV:PATH`. The
evaluation's files are kept in git (`cache: false`), so git alone reads them (docs/statistics.md, "Did a change
help?")."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from put.errors import InputError, MissingFileError

EXPERIMENT_REFS = "refs/exps/"
# DVC's own machinery under refs/exps (its queue and runners), not experiments: refs/exps/<2>/<38>/<name> are.
EXPERIMENT_DEPTH = 5


def _git(repo: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=not binary, timeout=60)
    except FileNotFoundError:
        raise MissingFileError("git: not found on PATH (needed to read results from a revision)") from None


def is_repository(repo: Path) -> bool:
    return _git(repo, "rev-parse", "--git-dir").returncode == 0


def experiments(repo: Path) -> dict[str, list[str]]:
    """Each DVC experiment's name -> the refs holding it (one per baseline it was run on)."""
    listed = _git(repo, "for-each-ref", "--format=%(refname)", EXPERIMENT_REFS).stdout.split()
    found: dict[str, list[str]] = {}
    for ref in listed:
        parts = ref.split("/")
        if len(parts) == EXPERIMENT_DEPTH and len(parts[2]) == 2:
            found.setdefault(parts[-1], []).append(ref)
    return found


@dataclass(frozen=True)
class Revision:
    """A commit of `repo` and what the user called it (a revision, or an experiment and its ref)."""

    repo: Path
    commit: str
    name: str
    ref: str | None = None  # the experiment's ref, when `name` is an experiment

    def describe(self) -> str:
        kind = f"DVC experiment {self.name}" if self.ref else f"revision {self.name}"
        return f"{kind} ({self.commit[:7]})"

    def shown(self, path: str) -> str:
        """A file of this commit as git names it."""
        return f"{self.name}:{path}"

    def read(self, path: str) -> bytes | None:
        """The file at `path` (relative to the repository's root) in this commit, or None when it has none."""
        done = _git(self.repo, "show", f"{self.commit}:{path}", binary=True)
        return done.stdout if done.returncode == 0 else None


def resolve(name: str, repo: Path) -> Revision:
    """A git revision (branch, tag, commit, HEAD~1) or a DVC experiment's name, as a commit of `repo`; a name that
    is neither, or an experiment name several baselines share, is an error saying so."""
    repo = Path(repo)
    if not is_repository(repo):
        raise InputError(f"{name!r}: not a folder, and {repo.resolve()} is not a git repository to find it in as a "
                         "revision or DVC experiment")
    named = experiments(repo).get(name, [])
    if len(named) > 1:
        raise InputError(f"{name!r}: {len(named)} DVC experiments have this name ({', '.join(named)}); name one by "
                         "its ref or commit")
    if named:
        commit = _git(repo, "rev-parse", "--verify", "--quiet", f"{named[0]}^{{commit}}").stdout.strip()
        return Revision(repo, commit, name, named[0])
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    if done.returncode != 0 or not done.stdout.strip():
        raise InputError(f"{name!r}: not a folder, a git revision or a DVC experiment of {repo.resolve()} "
                         "(`dvc exp show` lists the experiments, `git log` the revisions)")
    return Revision(repo, done.stdout.strip(), name)

"""Shared by the slow tests that run the DAG: a throwaway copy of the repository as it is now."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def working_copy(dst: Path) -> Path:
    """A git clone of this repository with the working tree's files (committed or not, minus ignored ones)
    copied over it, so the DAG under test is the code being tested."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dst)], check=True, timeout=120)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / name)
        else:
            (dst / name).unlink(missing_ok=True)  # deleted in the working tree
    return dst

"""The software a run used: Python, the project's direct dependencies as installed, and whether the installed
environment is the pinned one (requirements.lock, `make lock`). Recorded with every MLflow run (tags) and in
the report's appendix."""

from __future__ import annotations

import hashlib
import platform
import re
from functools import cache
from importlib import metadata
from pathlib import Path

LOCK_FILE = Path(__file__).resolve().parents[2] / "requirements.lock"
PACKAGES = ("torch", "torchvision", "numpy", "scipy", "pillow", "scikit-image", "pandas", "pydantic", "lpips",
            "torch-fidelity", "mlflow", "dvc", "snakemake")  # what the numbers depend on, and the DAG's tools


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def lock_pins(path: Path = LOCK_FILE) -> dict[str, str]:
    """name -> version of every `name==version` line of a pip-compile lock file."""
    pins = {}
    for line in path.read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)", line):
            pins[normalise(match.group(1))] = match.group(3)
    return pins


def lock_state(path: Path = LOCK_FILE) -> str:
    """"matches <file> (sha256 ...)" when every pinned distribution is installed at its pinned version,
    else which ones differ (a local CUDA build's +cu suffix counts as its version)."""
    if not path.is_file():
        return f"no lock file ({path.name} not beside the package: not a checkout)"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    differing = [f"{name} {installed(name)} (lock: {version})" for name, version in lock_pins(path).items()
                 if installed(name).split("+")[0] != version.split("+")[0]]
    if not differing:
        return f"matches {path.name} (sha256 {digest})"
    shown = ", ".join(differing[:5]) + (f" and {len(differing) - 5} more" if len(differing) > 5 else "")
    return f"differs from {path.name} (sha256 {digest}): {shown}"


@cache
def versions() -> dict[str, str]:
    """python, each of PACKAGES, and the lock state."""
    return {"python": platform.python_version(), **{name: installed(name) for name in PACKAGES},
            "environment": lock_state()}

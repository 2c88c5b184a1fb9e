"""Shared by the slow tests that run the DAG: a throwaway copy of the repository's code as it is now, and the paths
of the products they check."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path, PurePosixPath

import put.config.paths
from put.config.paths import METRICS_FILE, PVQVAE_CHECKPOINT, REPORT_DIR, TRANSFORMER_CHECKPOINT, path_of

ROOT = Path(__file__).resolve().parents[1]

# DVC's record of the last run's outputs: `dvc repro` and `make record` rewrite it.
DVC_LOCK = "dvc.lock"


def product_roots() -> set[str]:
    """The top folders of every path pattern in put/config/paths.py (data, runs, results, reports, logs): whatever lies
    under them, committed or not, is made by the pipeline (or `make bench`), never code."""
    patterns = [value for name, value in vars(put.config.paths).items() if name.isupper() and isinstance(value, str)]
    return {PurePosixPath(pattern).parts[0] for pattern in patterns} | {put.config.paths.benchmark_dir().parts[0]}


def is_product(name: str, roots: set[str]) -> bool:
    """`name` (a path relative to the repository root, as git lists it) is a pipeline product."""
    return name == DVC_LOCK or PurePosixPath(name).parts[0] in roots


def working_copy(dst: Path, source: Path = ROOT) -> Path:
    """A git clone of `source` with the working tree's changes to its code (edited, new or deleted files,
    minus ignored ones) copied over it, so that the DAG under test is the code being tested. Pipeline
    products are left as committed: outputs of an earlier `make demo` in `source` (metrics, benchmarks,
    checkpoints, a rewritten dvc.lock or report) would make Snakemake or DVC find targets done and skip them."""
    subprocess.run(["git", "clone", "-q", str(source), str(dst)], check=True, timeout=120)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=source,
                           check=True, capture_output=True, text=True).stdout.split("\0")
    roots = product_roots()
    for name in filter(None, files):
        if is_product(name, roots):
            continue
        src = source / name
        if src.is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / name)
        else:
            (dst / name).unlink(missing_ok=True)  # deleted in the working tree
    return dst


def pvqvae_checkpoint(preset: str, variant: str) -> Path:
    """`tok` and `qua0` resolve to the full model's P-VQVAE."""
    return path_of(PVQVAE_CHECKPOINT, preset, variant)


def transformer_checkpoint(preset: str, variant: str) -> Path:
    return path_of(TRANSFORMER_CHECKPOINT, preset, variant)


def metrics_file(preset: str, variant: str) -> Path:
    return path_of(METRICS_FILE, preset, variant)


def report_dir(preset: str) -> Path:
    return path_of(REPORT_DIR, preset)

"""Shared by the tests that run the DAG: a throwaway copy of the repository's code as it is now, Snakemake as they
call it, and the paths of the products they check."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

import put.config.paths
from put.config.paths import METRICS_FILE, PVQVAE_CHECKPOINT, REPORT_DIR, TRANSFORMER_CHECKPOINT, path_of

ROOT = Path(__file__).resolve().parents[1]
# This environment's executables (snakemake, dvc, put) first on PATH, as the DAG's commands expect
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}

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


def compare_experiments(repo: Path, dvc: Callable[..., subprocess.CompletedProcess], setting: str,
                        targets: Sequence[str], env: dict[str, str] | None = None, preset: str = "demo") -> dict:
    """What a user does to ask whether a change helped (docs/dvc-snakemake.md, "Change, run, compare"), in `repo`
    (a DVC workspace whose `targets` are up to date): `dvc exp run` of the workspace as it is (experiment
    `compare-base`: nothing to re-run), then of `setting` (`-S`, experiment `compare-changed`), each of `targets`
    only; then `put compare` of the two by the names DVC lists, and of the first against the workspace
    (which now holds the second), as CSV. Returns the runs, the stages the second ran (or restored from the run
    cache), their seconds, and both tables (the same numbers, checked here)."""
    import pandas as pd

    runs, seconds = {}, {}
    for name, settings in (("compare-base", []), ("compare-changed", ["-S", setting])):
        start = time.monotonic()
        runs[name] = dvc(repo, "exp", "run", "-n", name, *settings, *targets)
        seconds[name] = time.monotonic() - start
        assert runs[name].returncode == 0, runs[name].stdout[-3000:] + runs[name].stderr[-3000:]
    listed = dvc(repo, "exp", "list", "--name-only")  # the names `dvc exp show` prints
    assert {"compare-base", "compare-changed"} <= set(listed.stdout.split()), listed.stdout[-2000:]
    tables = {}
    for key, names in (("experiments", ["compare-base", "compare-changed"]), ("workspace", ["compare-base", "."])):
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "put", "compare", *names, "--preset", preset, "--format",
                               "csv"], cwd=repo,
                              capture_output=True, text=True, env=env, timeout=300)
        seconds[f"compare {key}"] = time.monotonic() - start
        assert done.returncode == 0, done.stderr[-3000:]
        tables[key] = pd.read_csv(io.StringIO(done.stdout))
    columns = [c for c in tables["experiments"].columns if c != "result"]
    pd.testing.assert_frame_equal(tables["experiments"][columns], tables["workspace"][columns])
    # run, or restored from DVC's run cache (the same stage and inputs run before, e.g. by an earlier experiment)
    ran = set(re.findall(r"Running stage '([^']+)'|Stage '([^']+)' is cached", runs["compare-changed"].stdout))
    ran = {name for pair in ran for name in pair if name}
    return {"runs": runs, "ran": ran, "seconds": seconds, "table": tables["experiments"]}


def snakemake(repo: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "snakemake"), *args], cwd=repo, capture_output=True, text=True, env=ENV,
                          timeout=timeout)


def planned_jobs(output: str) -> dict[str, dict]:
    """`snakemake -n -p` output -> {rule@variant: {inputs, outputs, shell}} (the targets all/ablations left out)."""
    jobs = {}
    for block in re.split(r"\n(?=rule \w+:)", output):
        head = re.match(r"rule (\w+):", block)
        if not head or head.group(1) in ("all", "ablations"):
            continue
        field = dict(re.findall(r"^    (\w+): (.*)$", block, re.M))
        variant = re.search(r"(?:variant|official|external|seed)=(\w+)", field.get("wildcards", ""))
        shell = re.search(r"^Shell command: (.*)$", block, re.M)
        jobs[head.group(1) + (f"@{variant.group(1)}" if variant else "")] = {
            "inputs": set(field.get("input", "").split(", ")) - {""},
            "outputs": set(field.get("output", "").split(", ")) - {""},
            "shell": shell.group(1) if shell else ""}
    return jobs

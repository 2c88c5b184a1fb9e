"""How the scale benchmark (put/bench/scale.py) runs one command and what it records of it: wall and CPU time and
peak resident memory from GNU time, under nice; the disk a stage's outputs take; the stages it runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from put.errors import InputError

# (key, DAG stage, instance) in the order the DAG runs them; the report reads every evaluated label's metrics
STAGES = (("split", "split", None), ("prepare", "prepare", None), ("masks", "masks", None),
          ("external", "external", "telea"), ("evaluate", "evaluate_external", "telea"), ("report", "report", None))
NICE = 19  # a shared machine: the benchmark yields to everyone
TIME = "/usr/bin/time"  # GNU time


def folder_bytes(path: Path) -> int:
    """Disk taken by a file or folder (allocated blocks)."""
    path = Path(path)
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_blocks * 512
    return sum(os.lstat(os.path.join(d, f)).st_blocks * 512 for d, _, files in os.walk(path) for f in files)


def measured_run(argv: list[str], cwd: Path, log: Path, env: dict | None = None) -> dict:
    """Run `argv` under nice; its wall time, CPU time (children included) and peak resident memory, as GNU time
    reports them from a small parent (a fork of this large process would start at its size). Failure raises."""
    if not Path(TIME).is_file():
        raise InputError(f"{TIME}: not found; the scale benchmark measures each stage with GNU time (Debian: time)")
    figures = Path(log).with_suffix(".time")
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        code = subprocess.run([TIME, "-f", "%e %U %S %M", "-o", str(figures), "nice", "-n", str(NICE), *argv],
                              cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
                              ).returncode
    if code:
        tail = "".join(Path(log).read_text().splitlines(keepends=True)[-15:])
        raise RuntimeError(f"{' '.join(argv)} exited {code} in {cwd}; the end of {log}:\n{tail}")
    wall, user, system, peak_kib = figures.read_text().split()[-4:]
    return {"wall_seconds": float(wall), "cpu_seconds": round(float(user) + float(system), 3),
            "peak_rss_mib": round(int(peak_kib) / 1024, 1)}


def output_of(argv: list[str]) -> str:
    return argv[argv.index("--out") + 1]

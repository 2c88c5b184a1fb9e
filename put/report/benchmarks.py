"""Benchmark rows as the tables read them: every JSON file of a folder (`put bench`, tools/gpu/ and the DAG's
bench stage write them), each a list of rows, one row (older files), or {"provenance": ..., "rows": [...]}
for figures measured elsewhere (the file says by whom). Each row gets `source`: the file it came from."""

from __future__ import annotations

from pathlib import Path

from put.errors import FileMismatchError
from put.io.files import read_json

COST_FILE = "cost.json"  # `put cost`'s output: derived figures, not measured rows
LOADER_FILES = "loader_*.json"  # `put bench loader` (make bench-loader): input rates, read by no table


def read_benchmark_rows(folder: Path, source: str | None = None) -> list[dict]:
    """The rows of every *.json file in `folder` (sorted by name); `source` overrides the file name."""
    rows = []
    for path in sorted(Path(folder).glob("*.json")):
        if path.name == COST_FILE or path.match(LOADER_FILES):
            continue
        data = read_json(path, "benchmark rows (`put bench`)")
        provenance = data.get("provenance") if isinstance(data, dict) and "rows" in data else None
        items = data["rows"] if provenance is not None else data if isinstance(data, list) else [data]
        for row in items:
            if not isinstance(row, dict) or "benchmark" not in row:
                raise FileMismatchError(f"{path}: expected benchmark rows (objects with a `benchmark` key), "
                                        f"got {row!r:.80}")
            if "dtype" in row and "precision" not in row:  # files written before rows named it `precision`
                row = {**row, "precision": row["dtype"]}
            rows.append({**row, "source": source or path.stem,
                         **({"measured_elsewhere": provenance.get("what", "")} if provenance else {})})
    return rows


def of_kind(rows: list[dict], benchmark: str) -> list[dict]:
    return [r for r in rows if r["benchmark"] == benchmark]


def read_speed_rows(benchmarks: Path | None, measured: Path | None) -> list[dict]:
    """Sampling and P-VQVAE rows of this run's bench stage (source "this run") and of the committed files."""
    rows = read_benchmark_rows(benchmarks, source="this run") if benchmarks is not None else []
    rows += read_benchmark_rows(measured) if measured is not None else []
    return [r for r in rows if r["benchmark"] in ("sampling", "pvqvae")]


def read_cost(measured: Path | None) -> dict | None:
    """`put cost`'s figures beside the committed benchmark rows, when they were computed."""
    path = Path(measured) / COST_FILE if measured is not None else None
    return read_json(path, "`put cost` figures") if path is not None and path.is_file() else None

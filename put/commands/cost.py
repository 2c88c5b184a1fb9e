"""`put cost`: what each preset costs to train and sample, from the measured benchmark rows."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from put.config import PRESETS
from put.config.paths import benchmark_dir

HELP = "GPU-hours and wall time per stage and for the ablation DAG, from measured benchmark rows (cost.json)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", choices=list(PRESETS), nargs="+", default=list(PRESETS))
    parser.add_argument("--benchmarks", default=str(benchmark_dir()),
                        help="folder of measured rows (`put bench`, tools/gpu/); cost.json is written there")
    parser.add_argument("--page", help="also rewrite the cost tables of this Markdown page (between its markers), "
                        "e.g. docs/speed-and-cost.md")
    parser.set_defaults(out_folder=False)


def run(args: argparse.Namespace) -> dict:
    from put.bench.cost import cost_report
    from put.dag.resources import RESOURCE_TABLE, load_resource_table
    from put.io.files import atomic_write_text
    from put.report.benchmarks import COST_FILE, read_benchmark_rows
    from put.report.cost import cost_markdown, with_cost_tables

    folder = Path(args.benchmarks)
    cost = cost_report(read_benchmark_rows(folder), load_resource_table(RESOURCE_TABLE), args.preset, RESOURCE_TABLE)
    if args.page:  # checked before anything is written
        page = Path(args.page)
        text = with_cost_tables(page.read_text(), cost, str(page))
    atomic_write_text(folder / COST_FILE, json.dumps(cost, indent=1) + "\n")
    if args.page:
        atomic_write_text(page, text)
    print(cost_markdown(cost))
    return cost

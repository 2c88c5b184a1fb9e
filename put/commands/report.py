"""`put report`: LaTeX tables, plots, sample grids and the report document."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import add_params_arguments, load_cli_params, optional_path, parse_tags, recorded_command
from put.config.paths import benchmark_dir

HELP = "LaTeX tables, plots, sample grids and the report document"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser, tags=True)
    parser.add_argument("--metrics-dir", required=True, help="folder of the `put evaluate` files: one per variant "
                                                             "and per entry of params.yaml's `official`")
    parser.add_argument("--samples", required=True, help="PUT's samples folder (for the sample grid)")
    parser.add_argument("--resolved-params", help="the `put config` file, copied into the report")
    parser.add_argument("--masks", required=True, help="folder written by `put masks`")
    parser.add_argument("--benchmarks", help="this run's bench stage folder (`put bench-suite`)")
    parser.add_argument("--measured", default=str(benchmark_dir()),
                        help="committed benchmark rows (GPU figures, the authors' loop) and `put cost`'s "
                             "cost.json")
    parser.add_argument("--frontier", help="folder written by `put frontier` (its table and figure join the report)")
    parser.add_argument("--frontier-tpami", help="the tpami variant's `put frontier` folder (drawn beside PUT's)")
    parser.add_argument("--out", required=True, help="report folder")
    parser.set_defaults(out_folder=True)


def run(args: argparse.Namespace) -> None:
    from put.stages.report import run_report

    params = load_cli_params(args)
    metrics = [Path(args.metrics_dir) / f"{label}.json" for label in params.evaluated_labels()]
    out = run_report(params, metrics, Path(args.samples), Path(args.masks), optional_path(args.benchmarks),
                     Path(args.out), parse_tags(args.tag), optional_path(args.frontier),
                     resolved_params=optional_path(args.resolved_params), measured=optional_path(args.measured),
                     frontier_tpami=optional_path(args.frontier_tpami), command=recorded_command("report"))
    print(f"report written to {out}")


def log_outputs(tracker, params, args: argparse.Namespace) -> None:
    """`put track`: this stage's MLflow run from its files (put/commands/track.py)."""
    from put.stages.report import log_outputs

    log_outputs(tracker, Path(args.out))

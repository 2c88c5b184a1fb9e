"""`put compare`: did a change help? Results of one preset paired by test image and mask, each against the first."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from put.commands.common import add_params_arguments
from put.compare.rules import RULES

HELP = ("results of one preset (DVC experiments, git revisions, workspaces, variants) compared with the baseline "
        "(the first), paired by test image and mask: differences with intervals and a family-wise correction")
FORMATS = ("table", "csv", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", metavar="RESULT",
                        help="WHERE[:VARIANT]: WHERE a DVC experiment (as `dvc exp show` names it), a git revision or "
                             "a folder (a workspace, or a folder of metrics files); empty or `.`: the working "
                             "directory. VARIANT: the evaluated label (default --variant). The first is the baseline. "
                             "Each is read under its own params.yaml's preset; --preset names the one all must "
                             "have, and that of a result without a params.yaml")
    add_params_arguments(parser)
    parser.add_argument("--rule", choices=RULES,
                        help="the compositing rule whose files every result is read under: pasted (the pasted/ "
                             "files, Table 1's rule) or raw (the main files, scored raw); default: the main files, "
                             "or pasted where PUT meets another method (an external_ label)")
    parser.add_argument("--variant", default="put", help="the variant of a RESULT that names none (default put)")
    parser.add_argument("--repo", default=".", help="the git repository revisions and experiments are read from")
    parser.add_argument("--format", choices=FORMATS, default="table", help="a table (default), or CSV or JSON")
    parser.add_argument("--bins", action="store_true", help="also the fine hole-ratio bins (10-20 ... 50-60), in the "
                                                            "same family")
    parser.add_argument("--multiplicity", choices=("holm", "bonferroni", "bh", "none"),
                        help="error control over the family (default: the protocol's, evaluate.multiplicity)")
    parser.add_argument("--mlflow", action="store_true", help="also log the comparison as an MLflow run of the "
                                                              "preset's experiment")


def run(args: argparse.Namespace) -> None:
    from put.compare.output import as_csv, as_json, as_table
    from put.compare.pairing import bootstrap_of, cells_left_out, compare
    from put.compare.results import read_results

    # each result under its own params.yaml's preset (--preset: the one they must have, or for one without it)
    results = read_results(args.results, args.variant, Path(args.repo), args.preset, args.rule,
                           Path(args.params) if args.params else None)
    preset = results[0].preset
    frame = compare(results, bins=args.bins, method=args.multiplicity)
    left_out = cells_left_out(results, args.bins)
    table = as_table(frame, results, bootstrap_of(results[0])[0].level, left_out)
    formats = {"table": lambda: table, "csv": lambda: as_csv(frame), "json": lambda: as_json(frame, results, left_out)}
    print(formats[args.format]().rstrip("\n"))
    if args.format == "csv" and left_out:  # a CSV has no place for them: a script's log has
        print("\n".join(left_out), file=sys.stderr)
    if args.mlflow:
        from put.tracking.comparison import log_comparison

        # results by their place (result_1, ...: their names may hold characters MLflow refuses in a metric's name)
        place = {r.name: f"result_{i}" for i, r in enumerate(results[1:], 1)}
        rows = frame.drop(columns="modes").assign(result=frame["variant"].map(place)).to_dict("records")
        run_id = log_comparison(preset, results[0].name, [r.name for r in results[1:]], rows,
                                {"comparison.txt": table + "\n", "comparison.csv": as_csv(frame),
                                 "comparison.json": as_json(frame, results, left_out)},
                                {"baseline": results[0].where, **{f"result_{i}": r.where
                                                                  for i, r in enumerate(results[1:], 1)}},
                                "put compare " + " ".join(shlex.quote(a) for a in sys.argv[2:]))
        print(f"logged to MLflow: run {run_id}", file=sys.stderr)

"""`put coverage`: how often the evaluation's intervals hold the truth, on simulated test sets (docs/coverage.md)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from put.commands.common import positive_int
from put.errors import InputError

HELP = "coverage of the bootstrap intervals and family-wise error of the corrections, by simulation"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sets", type=positive_int, default=1000, help="simulated test sets per mean/difference row")
    parser.add_argument("--resamples", type=positive_int, default=2000, help="bootstrap resamples per interval")
    parser.add_argument("--families", type=positive_int, default=500, help="simulated null families per n")
    parser.add_argument("--fid-dim", type=positive_int, default=2048, help="dimension of the Gaussian features")
    parser.add_argument("--fid-sets", type=positive_int, nargs=2, default=[500, 100], metavar=("N100", "N1000"),
                        help="simulated sets at n = 100 and n = 1,000 images")
    parser.add_argument("--fid-resamples", type=positive_int, help="default: evaluate.fid_bootstrap_resamples")
    parser.add_argument("--out", required=True, help="the Markdown table (docs/coverage.md); the rows beside it as "
                                                     "CSV")
    parser.add_argument("--only", nargs="+", metavar="PART", help="rerun only these parts (means, families, fid, "
                        "replicates), keeping the other rows of an earlier run (the CSV beside --out)")
    parser.add_argument("--sizes", type=positive_int, nargs="+", help="with --only: the n of the grid to rerun the "
                        "means and families at (default: all)")
    parser.add_argument("--render", action="store_true", help="only rewrite the Markdown from the rows of an earlier "
                                                              "run (the CSV beside --out), keeping its command")
    parser.set_defaults(out_folder=False)


def run(args: argparse.Namespace) -> None:
    import pandas as pd

    from put.config.evaluation import MetricProtocol
    from put.io.files import atomic_write_text, read_csv
    from put.report.coverage import (
        PARTS,
        SIZES,
        coverage_markdown,
        made_by,
        merge_parts,
        minimum_units,
        run_study,
    )

    out = Path(args.out)
    if args.render:
        frame = read_csv(out.with_suffix(".csv"), "the rows of `put coverage`")
        command = made_by(out.read_text())
    else:
        parts = tuple(args.only or PARTS)
        if unknown := set(parts) - set(PARTS):
            raise InputError(f"--only: unknown part(s) {', '.join(sorted(unknown))}; the parts: {', '.join(PARTS)}")
        sizes = tuple(args.sizes or SIZES)
        fid_resamples = args.fid_resamples or MetricProtocol().fid_bootstrap_resamples
        frame = run_study(args.sets, args.resamples, dict(zip((100, 1000), args.fid_sets)), args.fid_dim,
                          fid_resamples, args.families, sizes=sizes, parts=parts)
        command = "put " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "put coverage"
        if args.only:  # the earlier rows of the other parts stay, and so does the command that made them
            frame = merge_parts(read_csv(out.with_suffix(".csv"), "the rows of `put coverage`"), frame, parts,
                                sizes)
            command = f"{made_by(out.read_text())}`, then `{command}"
        atomic_write_text(out.with_suffix(".csv"), frame.to_csv(index=False))
    atomic_write_text(out, coverage_markdown(pd.DataFrame(frame), command))
    print(f"{out} written; minimum n: {minimum_units(frame)}")

"""`put prepare`: the training and test images decoded and resized once, into a few large shard files."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import add_params_arguments, load_cli_params, positive_int

HELP = "write the training and test images once at the size training reads them (resumable)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser)
    parser.add_argument("--split", default="data/splits", help="folder written by `put split`")
    parser.add_argument("--out", default="data/prepared", help="folder for the shards, index.csv and manifest.json")
    parser.add_argument("--workers", type=positive_int, help="decoding threads (default: this process's CPUs)")
    parser.set_defaults(out_folder=True)


def run(args: argparse.Namespace) -> None:
    from put.stages.prepare import run_prepare

    manifest = run_prepare(load_cli_params(args), Path(args.split), Path(args.out), args.workers)
    storage = manifest["settings"]["storage"]
    if storage == "originals":
        print(f"data.prepared is 'originals': training reads the original files ({args.out}/manifest.json says so)")
    else:
        counts = ", ".join(f"{split}: {n}" for split, n in manifest["images"].items())
        print(f"prepared {counts} images ({storage}, {manifest['bytes'] / 2**20:.1f} MiB in "
              f"{len(manifest['shards'])} shards) in {args.out}")

"""`put bench-suite`: the DAG's `bench` stage."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands import bench
from put.commands.common import add_params_arguments, default_device, load_cli_params
from put.config import PRESETS

HELP = "the DAG's benchmarks of a preset's models (random weights)"
BENCH_STEPS = 2  # sampling steps timed per model by the DAG's bench stage (each one full forward)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser)
    parser.add_argument("--out", required=True, help="folder for sampling.json and pvqvae.json")
    parser.set_defaults(out_folder=True)


def run(args: argparse.Namespace) -> None:
    """Sampling speed of the paper-size transformers (random weights) and of the preset's own model, and P-VQVAE
    throughput, on this machine: sampling.json and pvqvae.json."""
    own = load_cli_params(args).preset
    paper = [name for name in PRESETS if name != "demo"]
    presets = paper + ([own] if own not in paper else [])
    common = dict(batch=[1], tokens_per_step=[1], engine=["auto"], device=default_device(), bf16=False)
    bench.run(argparse.Namespace(what="sampling", preset=presets, steps=BENCH_STEPS,
                                 out=Path(args.out) / "sampling.json", **common))
    bench.run(argparse.Namespace(what="pvqvae", preset=list(dict.fromkeys(["ffhq", own])), steps=BENCH_STEPS,
                                 out=Path(args.out) / "pvqvae.json", **common))

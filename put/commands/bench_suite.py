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
    """Sampling speed of the paper-size transformers (random weights) and of the preset's own models (its tpami
    variant's too), and P-VQVAE throughput, on this machine: sampling.json and pvqvae.json. Of the TPAMI presets
    the FFHQ ones stand for their resolution: the three datasets' networks are the same at a resolution."""
    params = load_cli_params(args)
    own = [params.preset, params.resolved().tpami_preset or params.preset]
    paper = [name for name, p in PRESETS.items()
             if p.data.dataset != "demo" and (p.model.generation == "cvpr2022" or p.data.dataset == "ffhq")]
    presets = list(dict.fromkeys(paper + own))
    common = dict(batch=[1], tokens_per_step=[1], engine=["auto"], device=default_device(), bf16=False)
    bench.run(argparse.Namespace(what="sampling", preset=presets, steps=BENCH_STEPS,
                                 out=Path(args.out) / "sampling.json", **common))
    tpami = [name for name in paper if PRESETS[name].model.generation == "tpami2024"]
    bench.run(argparse.Namespace(what="pvqvae", preset=list(dict.fromkeys(["ffhq", *tpami, *own])), steps=BENCH_STEPS,
                                 out=Path(args.out) / "pvqvae.json", **common))

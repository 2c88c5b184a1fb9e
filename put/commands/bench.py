"""`put bench`: speed benchmarks of the paper-size models (random weights)."""

from __future__ import annotations

import argparse
import importlib
import json

from put.commands.common import default_device, device_name, positive_int
from put.config import PRESETS
from put.fileio import atomic_write_text

HELP = "speed benchmarks (random weights)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", choices=["sampling", "pvqvae", "loader"])
    parser.add_argument("--preset", choices=list(PRESETS), nargs="+", default=["ffhq"],
                        help="one or more presets, each timed with its own model size (one JSON list)")
    parser.add_argument("--steps", type=positive_int, default=5, help="sampling steps to time")
    parser.add_argument("--batch", type=positive_int, default=1)
    parser.add_argument("--tokens-per-step", type=positive_int, default=1)
    parser.add_argument("--device", type=device_name, default=default_device())
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (GPU)")
    parser.add_argument("--workers", type=positive_int, nargs="+", help="loader: worker counts (default: the CPUs)")
    parser.add_argument("--seconds", type=float, default=3.0, help="loader: seconds per measurement")
    parser.add_argument("--out", help="write the figures as JSON here")
    parser.set_defaults(out_folder=False)


def run(args: argparse.Namespace) -> list[dict]:
    from put import bench

    if args.what == "loader":  # imported by name, as put/cli.py imports commands: the DAG's bench stage reuses
        # this module without running the loader benchmark, so it does not depend on it (put/dag/code_deps.py)
        loader_bench = importlib.import_module("put.data.loader_bench")
        return loader_bench.run_loader_bench(args.preset, args.workers, args.seconds, args.out)
    results = []
    if args.what == "sampling":
        for name in args.preset:
            r = bench.bench_sampling(name, args.steps, batch=args.batch, tokens_per_step=args.tokens_per_step,
                                     device=args.device, bf16=args.bf16)
            print(f"{name} sampling ({r['n_layer']} layers x {r['n_embd']}) on {r['device_name']} ({r['dtype']}, "
                  f"batch {args.batch}, {args.tokens_per_step} token/step): {r['seconds_per_step']:.3f} s/step, "
                  f"{r['tokens_per_second']:.2f} tokens/s, {r['achieved_gflops']:.1f} GFLOP/s = "
                  f"{r['fraction_of_matmul']:.0%} of the measured matmul rate {r['matmul_gflops']:.1f} GFLOP/s "
                  f"(bench took {r['wall_seconds']:.1f} s)")
            results.append(r)
    else:
        for name in args.preset:
            r = bench.bench_pvqvae(name, batch=args.batch, device=args.device, bf16=args.bf16)
            print(f"{name} P-VQVAE on {r['device_name']} ({r['dtype']}): {r['images_per_second']:.2f} images/s at "
                  f"{r['image_size']}px (bench took {r['wall_seconds']:.1f} s)")
            results.append(r)
    if args.out:
        atomic_write_text(args.out, json.dumps(results, indent=2) + "\n")
    return results

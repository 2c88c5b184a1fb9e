"""`put bench`: speed benchmarks of the paper-size models (random weights)."""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
from pathlib import Path

from put.bench.scale_run import STAGES as SCALE_STAGES
from put.commands.common import default_device, device_name, positive_int
from put.config import PRESETS
from put.errors import InputError
from put.io.files import atomic_write_text
from put.sampling.engine import ENGINES

HELP = "speed benchmarks (random weights)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", choices=["sampling", "pvqvae", "train", "loader", "evaluate", "fid-interval",
                                             "fid-routes", "scale", "precision"])
    parser.add_argument("--preset", choices=list(PRESETS), nargs="+",
                        help="one or more presets, each timed with its own model size (one JSON list; default ffhq); "
                             "scale: one preset of ImageNet's layout (default imagenet), whose image size is used")
    parser.add_argument("--steps", type=positive_int, default=5, help="sampling or training steps to time")
    parser.add_argument("--batch", type=positive_int, nargs="+",
                        help="batch sizes (train: per GPU; default: sampling and pvqvae 1, train the batch of "
                             "each --gpu-counts layout)")
    parser.add_argument("--tokens-per-step", type=positive_int, nargs="+", default=[1])
    parser.add_argument("--engine", choices=ENGINES, nargs="+", default=["auto"],
                        help="sampling engines: eager, graph (captured step; uncaptured on CPU), compile (graph "
                             "with a torch.compile'd forward); auto = graph on CUDA, eager on CPU")
    parser.add_argument("--stage", choices=["pvqvae", "transformer"], nargs="+", default=["pvqvae", "transformer"],
                        help="train: the training stages to time")
    parser.add_argument("--gpu-counts", type=positive_int, nargs="+", default=[1],
                        help="train: time the per-GPU batch of these GPU counts (the preset's batch / N)")
    parser.add_argument("--device", type=device_name, default=default_device())
    parser.add_argument("--bf16", action="store_true", help="sampling, pvqvae: bf16 autocast (train: bf16 on GPUs "
                                                            "always, as training runs)")
    parser.add_argument("--holes", type=positive_int, default=32,
                        help="precision: tokens of the run whose fp32 and bf16 draws are compared")
    parser.add_argument("--rounds", type=positive_int, default=3,
                        help="precision: fp32 and bf16 timed this many times each, alternately (their median rounds)")
    parser.add_argument("--workers", type=positive_int, nargs="+", help="loader: worker counts (default: the CPUs)")
    parser.add_argument("--seconds", type=float, default=3.0, help="loader: seconds per measurement")
    parser.add_argument("--images", type=positive_int, nargs="+", default=[1000],
                        help="fid-interval: paired feature rows (n); fid-routes: one or more n")
    parser.add_argument("--dim", type=positive_int, default=2048, help="fid-interval: feature dimension")
    parser.add_argument("--resamples", type=positive_int, help="fid-interval: bootstrap resamples (default: "
                        "evaluate.fid_bootstrap_resamples)")
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[1000, 10000],
                        help="scale: training images at each size (the first --preset's image size)")
    parser.add_argument("--test-images", type=positive_int, nargs="+", default=[100, 1000],
                        help="scale: test images at each size (one per --sizes)")
    parser.add_argument("--work", default="/tmp/put-scale",
                        help="scale: folder for the fabricated data and the stages' workspaces (deleted after)")
    parser.add_argument("--page", help="scale: also write the tables into this Markdown page's scale-table markers")
    parser.add_argument("--only", nargs="+", choices=[key for key, _, _ in SCALE_STAGES],
                        help="scale: only these stages (split among them), e.g. the file-list stages at a size whose "
                             "prepared pixels would not fit")
    parser.add_argument("--append", action="store_true",
                        help="scale: add the sizes to those of the --out file's earlier runs")
    parser.add_argument("--tables-only", action="store_true",
                        help="scale: only rewrite --page's tables from the --out file, measuring nothing")
    parser.add_argument("--out", help="write the rows as a JSON list here (scale: one JSON object)")
    parser.set_defaults(out_folder=False)


def train_batches(preset: str, stage: str, batches: list[int] | None, gpus: list[int]) -> list[int]:
    """The per-GPU batches to time: given, or the preset's global batch split over each GPU count."""
    if batches:
        return batches
    from put.config import preset as load_preset

    train = getattr(load_preset(preset), f"{stage}_train")
    bad = [n for n in gpus if train.batch_size % n]
    if bad:
        raise InputError(f"--gpu-counts {bad[0]}: {preset}'s {stage} batch {train.batch_size} does not split over "
                         f"{bad[0]} GPUs")
    return [train.batch_size // n for n in gpus]


def describe(r: dict) -> str:
    where = f"{r['device_name']}, {r['precision']}"
    if r["benchmark"] == "fid_interval":
        return (f"FID interval of {r['n']} x {r['dim']} paired features, {r['resamples']} resamples on {r['workers']} "
                f"cores: {r['seconds']:.1f} s ({r['seconds_per_resample'] * 1e3:.1f} ms/resample; the previous SVD "
                f"method {r['previous_seconds_per_resample'] * 1e3:.0f} ms/resample, {r['previous_seconds']:.0f} s for "
                f"its {r['previous_resamples']}); half width {r['half_width']:.4f}, Monte-Carlo error of the bounds "
                f"{r['mc_error']:.4f}: printed +-{r['printed_half_width']}")
    if r["benchmark"] == "fid_routes":
        gram = (f"{r['gram']['cpu_seconds_per_resample']:.3f} s" if "gram" in r else "not run (3 n^2 floats)")
        return (f"FID of one resample of {r['n']} x {r['dim']} paired features, one core: d x d covariances "
                f"{r['moments']['cpu_seconds_per_resample']:.3f} s, n x n Gram matrices {gram}")
    if r["benchmark"] == "evaluate":
        return (f"{r['preset']} evaluation parts on {where}: {r['seconds_per_result'] * 1e3:.1f} ms per result "
                f"(PSNR/SSIM/MAE, CPU), Inception {r['inception_seconds_per_image'] * 1e3:.1f} ms/image, LPIPS "
                f"{r['lpips_seconds_per_pair'] * 1e3:.1f} ms/pair, mean interval {r['mean_interval_seconds']:.2f} s, "
                "FID "
                f"interval {r['fid_interval_seconds']:.1f} s at n = {r['test_images']}")
    if "oom" in r:
        return f"{r['preset']} {r['stage']} training at batch {r['batch']} on {where}: out of memory ({r['oom']})"
    rate = f"{r['achieved_tflops']:.3g} TFLOP/s = {r['fraction_of_matmul']:.0%} of {r['matmul_reference']} matmul " \
           f"at {r['matmul_tflops']:.3g} TFLOP/s"
    if r["benchmark"] == "sampling":
        return (f"{r['preset']} sampling ({r['n_layer']} layers x {r['n_embd']}) by {r['engine']} on {where}, batch "
                f"{r['batch']}, {r['tokens_per_step']} token/step: {r['seconds_per_step'] * 1e3:.2f} ms/step, "
                f"{r['tokens_per_second']:.2f} tokens/s, {rate} (bench took {r['wall_seconds']:.1f} s)")
    if r["benchmark"] == "pvqvae":
        return (f"{r['preset']} P-VQVAE on {where}, batch {r['batch']}: {r['images_per_second']:.2f} images/s at "
                f"{r['image_size']}px, {rate} (bench took {r['wall_seconds']:.1f} s)")
    return (f"{r['preset']} {r['stage']} training step on {where}, batch {r['batch']} per GPU: "
            f"{r['seconds_per_step']:.4f} s/step, {r['images_per_second']:.1f} images/s, peak {r['peak_gib']:.2f} GiB "
            f"({r['peak_memory_kind']}), {rate} (bench took {r['wall_seconds']:.1f} s)")


def describe_precision(r: dict) -> str:
    return (f"{r['preset']} exact sampling on {r['device_name']}: fp32 {r['fp32_tokens_per_second']:.3f} tokens/s, "
            f"bf16 autocast {r['bf16_tokens_per_second']:.3f} tokens/s (medians of {r['rounds']} rounds; "
            f"{r['speedup']:.2f}x, the median round's ratio); "
            f"{r['tokens_agreeing']:.1%} of {r['holes']} tokens as fp32 draws them (first differs at "
            f"{r['first_disagreement']})")


def run(args: argparse.Namespace) -> list[dict]:
    # The training and loader benchmarks are imported by name, as put/cli.py imports commands: the DAG's bench
    # stage reuses this module without running them, so it does not depend on their code (put/io/code.py).
    if args.what == "scale":
        return run_scale(args)
    args.preset = args.preset or ["ffhq"]
    if args.what == "loader":
        bench_loader = importlib.import_module("put.bench.loader")
        return bench_loader.run_loader_bench(args.preset, args.workers, args.seconds, args.out)
    if args.what in ("fid-routes", "evaluate", "fid-interval"):
        return written(evaluation_rows(args), args.out)
    presets = args.preset
    results = []
    if args.what == "precision":
        bench_precision = importlib.import_module("put.bench.precision").bench_precision
        for name in presets:
            results.append(bench_precision(name, args.steps, args.holes, device=args.device, rounds=args.rounds))
            print(describe_precision(results[-1]), flush=True)
    elif args.what == "sampling":
        from put.bench.sampling import bench_sampling

        for name, batch, per_step, engine in itertools.product(presets, args.batch or [1], args.tokens_per_step,
                                                               args.engine):
            results.append(bench_sampling(name, args.steps, batch=batch, tokens_per_step=per_step,
                                                device=args.device, bf16=args.bf16, engine=engine))
            print(describe(results[-1]), flush=True)
    elif args.what == "pvqvae":
        from put.bench.pvqvae import bench_pvqvae

        for name, batch in itertools.product(presets, args.batch or [1]):
            results.append(bench_pvqvae(name, batch=batch, device=args.device, bf16=args.bf16))
            print(describe(results[-1]), flush=True)
    else:
        bench_train = importlib.import_module("put.bench.train")
        for name, stage in itertools.product(presets, args.stage):
            for batch in train_batches(name, stage, args.batch, args.gpu_counts):
                results.append(bench_train.bench_train(name, stage, batch, device=args.device, steps=args.steps))
                print(describe(results[-1]), flush=True)
    return written(results, args.out)


def run_scale(args: argparse.Namespace) -> list[dict]:
    bench_scale = importlib.import_module("put.bench.scale")
    if args.tables_only:
        if not (args.out and args.page):
            raise InputError("--tables-only: give the benchmark's file (--out) and the page to rewrite (--page)")
        return bench_scale.rewrite_tables(Path(args.out), Path(args.page))
    return bench_scale.run_scale(args.sizes, args.test_images, Path(args.work), args.out,
                                 (args.preset or ["imagenet"])[0], page=args.page,
                                 only=tuple(args.only) if args.only else None, append=args.append)


def evaluation_rows(args: argparse.Namespace) -> list[dict]:
    """The evaluation's benchmarks: FID's routes, its interval, or each preset's evaluation; each row printed."""
    bench_evaluate = importlib.import_module("put.bench.evaluate")
    if args.what == "fid-routes":
        rows = bench_evaluate.bench_fid_routes(args.images, args.dim)
    elif args.what == "fid-interval":
        from put.config.evaluation import MetricProtocol

        resamples = args.resamples or MetricProtocol().fid_bootstrap_resamples
        rows = [bench_evaluate.bench_fid_interval(args.images[0], args.dim, resamples)]
    else:
        import torch

        rows = [bench_evaluate.bench_evaluate(name, torch.device(args.device)) for name in args.preset]
    for r in rows:
        print(describe(r), flush=True)
    return rows


def written(rows: list[dict], out: str | None) -> list[dict]:
    """The rows, written to `out` as JSON when given."""
    if out:
        atomic_write_text(out, json.dumps(rows, indent=2) + "\n")
    return rows

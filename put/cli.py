"""`put` command line: one subcommand per pipeline stage plus inpaint, info, bench and weights."""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import NoReturn

import torch

from put.checkpoint import CheckpointError
from put.config import PRESETS, PVQVAE_VARIANTS, VARIANTS, model_config, preset
from put.fileio import atomic_write_text, check_output, tee_output
from put.pretrained import DownloadError

# Bad input, and files or folders that are missing, of the wrong kind or not writable: exit status 2.
BENCH_STEPS = 2  # sampling steps timed per model by the DAG's bench stage (each one full forward)

USER_ERRORS: tuple[type[Exception], ...] = (ValueError, CheckpointError, FileNotFoundError, FileExistsError,
                                            NotADirectoryError, IsADirectoryError, PermissionError, DownloadError)


def describe(err: Exception) -> str:
    """The error for the user: an operating-system error as "PATH: reason", others as their message."""
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        return f"{err.filename}: {err.strerror}"
    return str(err)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def device_name(text: str) -> str:
    """A device this machine has: checked when the command line is read, not after loading a model."""
    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch device (expected cpu, cuda or cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text}: no CUDA device is available here (use --device cpu)")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(f"{text}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return text


def threads_per_process(processes: int = 1) -> int | None:
    """Under Slurm: the job's CPUs shared by its processes, not every core of the node (None elsewhere)."""
    cpus = os.environ.get("SLURM_CPUS_PER_TASK")
    if not cpus or "OMP_NUM_THREADS" in os.environ:
        return None
    return max(1, int(cpus) // processes)


def launch_torchrun(processes: int, argv: list[str]) -> NoReturn:
    """Replaces this process by `torchrun` running the same command once per GPU on this node. `exec`, so a
    scheduler's SIGTERM reaches torchrun, which passes it to the workers; they save and exit (see train/loop.py)."""
    threads = threads_per_process(processes)
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    command = [sys.executable, "-c", "from put.cli import torchrun; torchrun()", "--standalone", "--nnodes=1",
               f"--nproc-per-node={processes}", "-m", "put", *argv]
    print("launching: " + " ".join(command), file=sys.stderr, flush=True)
    os.execv(command[0], command)


def torchrun() -> None:
    """`torchrun` whose parser matches its own options exactly: by default it takes an abbreviation out of the
    training command's arguments (our `--log` is ambiguous with its `--log-dir`, ...) and stops."""
    import torch.distributed.run

    parser = torch.distributed.run.get_args_parser()
    parser.allow_abbrev = False
    torch.distributed.run.run(parser.parse_args(sys.argv[1:]))


def evaluated_label(text: str) -> str:
    """A variant, or official_<name> for an entry of params.yaml's `official` (the label of its files)."""
    from put.config.params import OFFICIAL_PREFIX

    name = text[len(OFFICIAL_PREFIX):] if text.startswith(OFFICIAL_PREFIX) else ""
    if text in VARIANTS or name.replace("_", "").isalnum():
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: expected a variant ({', '.join(VARIANTS)}) or {OFFICIAL_PREFIX}NAME")


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def cmd_info(args: argparse.Namespace) -> dict:
    from put.models.discriminator import PatchDiscriminator
    from put.models.put_model import PUTModel
    from put.models.transformer import count_parameters

    config = model_config(args.preset, args.variant)
    with torch.device("meta"):  # parameter counts without allocating memory
        model = PUTModel(config)
        discriminator = PatchDiscriminator(width=preset(args.preset).pvqvae_train.discriminator_width)
    info = {
        "preset": args.preset, "variant": args.variant, "image_size": config.image_size,
        "token_grid": list(config.token_grid),
        "parameters": {"transformer": count_parameters(model.transformer),
                       "pvqvae_generator": count_parameters(model.pvqvae),
                       "discriminator": count_parameters(discriminator)},
        "config": config.model_dump(),
    }
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        p = info["parameters"]
        print(f"preset {args.preset}, variant {args.variant}: {config.image_size}px, token grid "
              f"{config.token_grid[0]}x{config.token_grid[1]}\n"
              f"  UQ-Transformer   {p['transformer'] / 1e6:8.2f}M\n"
              f"  P-VQVAE (G)      {p['pvqvae_generator'] / 1e6:8.2f}M\n"
              f"  discriminator    {p['discriminator'] / 1e6:8.2f}M")
    return info


def cmd_inpaint(args: argparse.Namespace) -> None:
    from put.inpaint import InpaintRequest, inpaint
    from put.sampling import SamplingOptions

    request = InpaintRequest(
        checkpoint=Path(args.checkpoint), image=Path(args.image), mask=Path(args.mask), out=Path(args.out),
        samples=args.samples, seed=args.seed, deterministic=args.deterministic, composite=args.composite,
        options=SamplingOptions(top_k=args.top_k, temperature=args.temperature,
                                tokens_per_step=args.tokens_per_step, position_rule=args.position_rule,
                                steps=args.steps),
        mask_polarity=args.mask_polarity, pad=args.pad, pvqvae=Path(args.pvqvae) if args.pvqvae else None,
        batch_size=args.batch_size, device=args.device)
    for path in inpaint(request):
        print(path)


def cmd_bench_suite(args: argparse.Namespace) -> None:
    """The DAG's `bench` stage: sampling speed of the paper-size transformers (random weights) and of the
    preset's own model, and P-VQVAE throughput, on this machine: sampling.json and pvqvae.json."""
    own = load_cli_params(args).preset
    paper = [name for name in PRESETS if name != "demo"]
    presets = paper + ([own] if own not in paper else [])
    common = dict(batch=1, tokens_per_step=1, device=default_device(), bf16=False)
    cmd_bench(argparse.Namespace(what="sampling", preset=presets, steps=BENCH_STEPS,
                                 out=Path(args.out) / "sampling.json", **common))
    cmd_bench(argparse.Namespace(what="pvqvae", preset=list(dict.fromkeys(["ffhq", own])), steps=BENCH_STEPS,
                                 out=Path(args.out) / "pvqvae.json", **common))


def cmd_import_official(args: argparse.Namespace) -> None:
    from put.official import import_official, read_overrides

    params = load_cli_params(args)
    overrides = read_overrides(args.model_overrides) if args.model_overrides else None
    transformer, variant = args.transformer, args.variant
    if args.official:  # an entry of params.yaml's `official` (what the DAG's import_official stage passes)
        if args.official not in params.official:
            raise ValueError(f"{params.source}: official: no entry {args.official!r} (entries: "
                             f"{', '.join(params.official) or 'none'})")
        entry = params.official[args.official]
        differs = transformer not in (None, entry.transformer) or variant not in (None, entry.variant)
        if differs or overrides is not None:
            raise ValueError(f"--official {args.official} takes the file, variant and model from params.yaml; "
                             "do not give --transformer, --variant or --model-overrides that differ")
        transformer, variant, overrides = entry.transformer, entry.variant, entry.model
    result = import_official(Path(args.out), params.preset, pvqvae=args.pvqvae, transformer=transformer,
                             variant=variant, model_overrides=overrides)
    print(f"variant {result.variant}: {result.pvqvae}" + (f", {result.transformer}" if result.transformer else ""))


def cmd_bench(args: argparse.Namespace) -> list[dict]:
    from put import bench

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


def load_cli_params(args: argparse.Namespace):
    from put.config.params import load_params

    path = args.params if args.params is not None else ("params.yaml" if Path("params.yaml").is_file() else None)
    return load_params(path, preset=args.preset)


def cmd_split(args: argparse.Namespace) -> None:
    from put.stages.split import run_split

    report = run_split(load_cli_params(args), Path(args.out))
    counts = ", ".join(f"{k}: {v['usable']} usable of {v['listed']}" for k, v in report["splits"].items())
    print(f"{report['dataset']} split written to {args.out} ({counts}; {len(report['excluded'])} excluded)")


def cmd_masks(args: argparse.Namespace) -> None:
    from put.stages.masks import run_masks

    print(f"evaluation masks: {run_masks(load_cli_params(args), Path(args.split), Path(args.out))}")


def optional_path(value: str | None) -> Path | None:
    return Path(value) if value else None


def cmd_config(args: argparse.Namespace) -> None:
    from put.stages.config import run_config

    print(f"resolved parameters: {run_config(load_cli_params(args), Path(args.out))}")


def cmd_dag(args: argparse.Namespace) -> None:
    from put.dag import dvc_yaml

    if args.check:
        if not dvc_yaml.is_current():
            raise ValueError(f"{dvc_yaml.PATH} is stale: run `put dag --write` (it is generated from "
                             "put/dag/declaration.py and the code's imports)")
        print(f"{dvc_yaml.PATH} is up to date")
    else:
        print(f"{dvc_yaml.PATH} {'written' if dvc_yaml.write() else 'already up to date'}")


def parse_tags(pairs: list[str] | None) -> dict[str, str]:
    tags = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--tag expects KEY=VALUE, got {pair!r}")
        tags[key] = value
    return tags


def cmd_train_pvqvae(args: argparse.Namespace) -> None:
    from put.stages.train import train_pvqvae

    result = train_pvqvae(load_cli_params(args), args.variant, Path(args.split), Path(args.out), args.device,
                          parse_tags(args.tag), curves=optional_path(args.curves), restart=args.restart)
    print(f"P-VQVAE ({args.variant}) at {result.out}, {result.step} iterations")


def cmd_train_transformer(args: argparse.Namespace) -> None:
    from put.stages.train import train_transformer

    result = train_transformer(load_cli_params(args), args.variant, Path(args.pvqvae), Path(args.split),
                               Path(args.out), args.device, parse_tags(args.tag), curves=optional_path(args.curves),
                               restart=args.restart)
    print(f"UQ-Transformer ({args.variant}) at {result.out}, {result.step} iterations")


def cmd_sample(args: argparse.Namespace) -> None:
    from put.stages.sample import run_sample

    manifest = run_sample(load_cli_params(args), args.variant, Path(args.checkpoint), Path(args.masks),
                          Path(args.out), args.device, parse_tags(args.tag), pvqvae=optional_path(args.pvqvae))
    print(f"samples of {args.variant}: {manifest}")


def cmd_evaluate(args: argparse.Namespace) -> None:
    from put.stages.evaluate import run_evaluate

    result = run_evaluate(load_cli_params(args), args.variant, Path(args.samples), Path(args.masks), Path(args.out),
                          parse_tags(args.tag))
    cells = sum(len(groups) for mode, groups in result.items() if mode != "bins")
    print(f"metrics of {args.variant}: {args.out} ({cells} table cells, {len(result.get('bins', {}))} fine bins)")


def cmd_frontier(args: argparse.Namespace) -> None:
    from put.stages.frontier import run_frontier

    frame = run_frontier(load_cli_params(args), args.variant, Path(args.checkpoint), Path(args.masks), Path(args.out),
                         Path(args.samples), args.device, parse_tags(args.tag), optional_path(args.pvqvae))
    for row in frame.itertuples():
        print(f"{row.group:>6} {row.label:<22} K={'--' if row.top_k != row.top_k else int(row.top_k):<4} "
              f"{row.forward_passes:7.1f} forwards/image {1000 * row.seconds_per_image:9.2f} ms/image  "
              f"PSNR {row.psnr:.3f}  SSIM {row.ssim:.4f}  MAE {row.mae:.4f}")
    print(f"frontier of {args.variant}: {args.out}")


def cmd_report(args: argparse.Namespace) -> None:
    from put.stages.report import run_report

    params = load_cli_params(args)
    metrics = [Path(args.metrics_dir) / f"{label}.json" for label in params.evaluated_labels()]
    out = run_report(params, metrics, Path(args.samples), Path(args.masks), Path(args.benchmarks), Path(args.out),
                     parse_tags(args.tag), optional_path(args.frontier),
                     resolved_params=optional_path(args.resolved_params))
    print(f"report written to {out}")


def cmd_weights(args: argparse.Namespace) -> list[dict]:
    from put.pretrained import PRETRAINED_FILES, DownloadError, download, weights_report

    if args.download:
        failed = []
        for file in PRETRAINED_FILES:
            if file.path.is_file():
                print(f"present  {file.path}")
                continue
            try:
                print(f"fetched  {download(file)}")
            except DownloadError as err:
                print(f"FAILED   {file.filename}: {err}", file=sys.stderr)
                failed.append(file.filename)
        if failed:
            raise DownloadError(f"{len(failed)} file(s) not fetched: {', '.join(failed)}")
    rows = weights_report()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            state = "present" if row["present"] else "MISSING"
            print(f"{state:8} {row['name']:<28} {row['folder']}/{row['file']}\n         used by: {row['used_by']}"
                  + ("" if row["present"] else f"\n         get it from: {row['url']} (or: put weights --download)"))
    return rows


def add_params_arguments(parser: argparse.ArgumentParser, tags: bool = False) -> None:
    parser.add_argument("--params", help="parameter file (default: ./params.yaml if present, else the defaults)")
    parser.add_argument("--preset", choices=list(PRESETS), help="use this preset instead of the file's")
    parser.add_argument("--log", help="also write everything this command prints to this file (appended)")
    if tags:
        parser.add_argument("--tag", action="append", metavar="KEY=VALUE",
                            help="MLflow tag for this stage's run (e.g. the DVC stage or Snakemake rule); repeatable")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="put", description="PUT pluralistic image inpainting (CVPR 2022)")
    sub = parser.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="parameter counts and token grid of a preset x variant")
    info.add_argument("--preset", choices=list(PRESETS), default="ffhq")
    info.add_argument("--variant", choices=VARIANTS, default="put")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=cmd_info)

    inp = sub.add_parser("inpaint", help="inpaint one image: N diverse results as PNG files")
    inp.add_argument("--checkpoint", required=True, help="transformer checkpoint (.pt)")
    inp.add_argument("--pvqvae", help="P-VQVAE checkpoint, if not where the transformer checkpoint recorded it")
    inp.add_argument("--image", required=True, help="RGB, RGBA or grayscale image")
    inp.add_argument("--mask", required=True, help="binary mask image of the same size")
    inp.add_argument("--mask-polarity", choices=["hole-white", "keep-white"], default="hole-white",
                     help="which pixels of the mask file are white: the holes (default, as PConv masks) or the kept")
    inp.add_argument("--samples", type=positive_int, default=1, help="number of diverse results")
    inp.add_argument("--top-k", type=int, default=50)
    inp.add_argument("--temperature", type=float, default=1.0, help="multiplies the logits (released code)")
    inp.add_argument("--tokens-per-step", type=int, default=1, help="tokens sampled per forward pass")
    inp.add_argument("--steps", type=int, help="cosine schedule: every masked patch in exactly this many forward "
                                               "passes (replaces --tokens-per-step)")
    inp.add_argument("--position-rule", choices=["logit", "prob"], default="logit",
                     help="next position: largest max-logit (released code) or max probability (paper text)")
    inp.add_argument("--deterministic", action="store_true", help="all tokens at once by argmax (PUT_all)")
    inp.add_argument("--no-composite", dest="composite", action="store_false",
                     help="keep the decoder's output everywhere, as the paper's evaluation does")
    inp.add_argument("--pad", action="store_true", help="pad to a multiple of the patch size (result cropped back)")
    inp.add_argument("--seed", type=int, default=0)
    inp.add_argument("--batch-size", type=positive_int, help="samples per forward batch (default: all at once)")
    inp.add_argument("--device", type=device_name, default=default_device())
    inp.add_argument("--out", required=True, help="output folder")
    inp.set_defaults(func=cmd_inpaint, out_folder=True)

    config = sub.add_parser("config", help="write every parameter the stages use, resolved (the DAG tracks it)")
    add_params_arguments(config)
    config.add_argument("--out", required=True, help="YAML file")
    config.set_defaults(func=cmd_config, out_folder=False)

    dag = sub.add_parser("dag", help="generate dvc.yaml from the DAG declaration (put/dag/declaration.py)")
    dag.add_argument("--check", action="store_true", help="only check that dvc.yaml is up to date")
    dag.set_defaults(func=cmd_dag)

    imp = sub.add_parser("import-official", help="convert the authors' released checkpoints into ours")
    add_params_arguments(imp)  # --preset: the model sizes (their files hold none)
    imp.add_argument("--official", metavar="NAME", help="an entry of params.yaml's `official`: its file, variant "
                                                        "and model overrides")
    imp.add_argument("--pvqvae", help="their P-VQVAE checkpoint (.pth)")
    imp.add_argument("--transformer", help="their transformer checkpoint (.pth; holds its P-VQVAE as content_codec)")
    imp.add_argument("--model-overrides", help="YAML/JSON mapping of ModelConfig fields over the preset's, "
                                               "e.g. {pvqvae: {base_channels: 64}}")
    imp.add_argument("--variant", choices=VARIANTS,
                     help="default: read from the P-VQVAE's tensors (tok and qua0 must be given)")
    imp.add_argument("--out", required=True, help="folder for pvqvae.pt and transformer.pt")
    imp.set_defaults(func=cmd_import_official, out_folder=True)

    split = sub.add_parser("split", help="list the dataset's train/test images with checksums (builds the demo set)")
    add_params_arguments(split)
    split.add_argument("--out", default="data/splits", help="folder for train.csv, test.csv, split_report.json")
    split.set_defaults(func=cmd_split, out_folder=True)

    masks = sub.add_parser("masks", help="write the frozen evaluation masks and their manifest")
    add_params_arguments(masks)
    masks.add_argument("--split", default="data/splits", help="folder written by `put split`")
    masks.add_argument("--out", default="data/masks", help="output folder")
    masks.set_defaults(func=cmd_masks, out_folder=True)

    for name, func, variants, what in [
            ("train-pvqvae", cmd_train_pvqvae, PVQVAE_VARIANTS, "train a P-VQVAE (resumes if interrupted)"),
            ("train-transformer", cmd_train_transformer, VARIANTS, "train a UQ-Transformer on a frozen P-VQVAE")]:
        train = sub.add_parser(name, help=what)
        add_params_arguments(train, tags=True)
        train.add_argument("--variant", choices=variants, default="put")
        train.add_argument("--split", default="data/splits", help="folder written by `put split`")
        if name == "train-transformer":
            train.add_argument("--pvqvae", required=True, help="the P-VQVAE checkpoint to freeze and train on")
        train.add_argument("--out", required=True, help="final checkpoint (.pt); resumable state beside it")
        train.add_argument("--curves", help="folder for the loss and held-out metric curves (train.csv, eval.csv)")
        train.add_argument("--restart", action="store_true",
                           help="discard a saved state (e.g. one made with other settings) and train afresh")
        train.add_argument("--device", type=device_name, help="cuda or cpu (default: cuda when available)")
        train.add_argument("--gpus", type=int, default=0,
                           help="processes on this node, one per GPU: above 1 re-runs this command under torchrun "
                                "(DDP; gloo on CPU); 0 or 1: one process")
        train.set_defaults(func=func, out_folder=False)

    sample = sub.add_parser("sample", help="inpaint the evaluation set with one variant (deterministic, top-K, "
                                           "diversity samples)")
    add_params_arguments(sample, tags=True)
    sample.add_argument("--variant", type=evaluated_label, default="put", help="the variant, or official_NAME")
    sample.add_argument("--checkpoint", required=True, help="the variant's transformer checkpoint")
    sample.add_argument("--pvqvae", help="its P-VQVAE checkpoint (default: the one the transformer checkpoint records)")
    sample.add_argument("--masks", default="data/demo/masks", help="folder written by `put masks`")
    sample.add_argument("--out", required=True, help="output folder (samples.csv + PNGs)")
    sample.add_argument("--device", type=device_name)
    sample.set_defaults(func=cmd_sample, out_folder=True)

    evaluate = sub.add_parser("evaluate", help="metrics of one variant's samples (PSNR, SSIM, MAE, FID, LPIPS)")
    add_params_arguments(evaluate, tags=True)
    evaluate.add_argument("--variant", type=evaluated_label, default="put", help="the variant, or official_NAME")
    evaluate.add_argument("--samples", required=True, help="folder written by `put sample`")
    evaluate.add_argument("--masks", default="data/demo/masks", help="folder written by `put masks`")
    evaluate.add_argument("--out", required=True, help="metrics JSON")
    evaluate.set_defaults(func=cmd_evaluate, out_folder=False)

    frontier = sub.add_parser("frontier", help="quality against sampling cost: tokens per step, cosine schedules, "
                                               "top-K and argmax on the evaluation masks (metrics, table, figure)")
    add_params_arguments(frontier, tags=True)
    frontier.add_argument("--variant", choices=VARIANTS, default="put")
    frontier.add_argument("--checkpoint", required=True, help="the variant's transformer checkpoint")
    frontier.add_argument("--masks", required=True, help="folder written by `put masks`")
    frontier.add_argument("--pvqvae", help="its P-VQVAE checkpoint (default: the one the transformer records)")
    frontier.add_argument("--out", required=True, help="output folder (metrics.json, frontier.csv/.tex/.png)")
    frontier.add_argument("--samples", required=True, help="folder for the inpainted images")
    frontier.add_argument("--device", type=device_name)
    frontier.set_defaults(func=cmd_frontier, out_folder=True)

    report = sub.add_parser("report", help="LaTeX tables, plots, sample grids and the report document")
    add_params_arguments(report, tags=True)
    report.add_argument("--metrics-dir", required=True, help="folder of the `put evaluate` files: one per variant and "
                                                              "per entry of params.yaml's `official`")
    report.add_argument("--samples", required=True, help="PUT's samples folder (for the sample grid)")
    report.add_argument("--resolved-params", help="the `put config` file, copied into the report")
    report.add_argument("--masks", required=True, help="folder written by `put masks`")
    report.add_argument("--benchmarks", default="reports/benchmarks", help="folder of `put bench` JSON files")
    report.add_argument("--frontier", help="folder written by `put frontier` (its table and figure join the report)")
    report.add_argument("--out", required=True, help="report folder")
    report.set_defaults(func=cmd_report, out_folder=True)

    weights = sub.add_parser("weights", help="which pretrained files are present or missing, and where each belongs")
    weights.add_argument("--download", action="store_true",
                         help="fetch every missing file into torch's hub cache, checking its published SHA-256")
    weights.add_argument("--json", action="store_true")
    weights.set_defaults(func=cmd_weights)

    suite = sub.add_parser("bench-suite", help="the DAG's benchmarks of a preset's models (random weights)")
    add_params_arguments(suite)
    suite.add_argument("--out", required=True, help="folder for sampling.json and pvqvae.json")
    suite.set_defaults(func=cmd_bench_suite, out_folder=True)

    bench = sub.add_parser("bench", help="speed benchmarks (random weights)")
    bench.add_argument("what", choices=["sampling", "pvqvae"])
    bench.add_argument("--preset", choices=list(PRESETS), nargs="+", default=["ffhq"],
                       help="one or more presets, each timed with its own model size (one JSON list)")
    bench.add_argument("--steps", type=positive_int, default=5, help="sampling steps to time")
    bench.add_argument("--batch", type=positive_int, default=1)
    bench.add_argument("--tokens-per-step", type=positive_int, default=1)
    bench.add_argument("--device", type=device_name, default=default_device())
    bench.add_argument("--bf16", action="store_true", help="bf16 autocast (GPU)")
    bench.add_argument("--out", help="write the figures as JSON here")
    bench.set_defaults(func=cmd_bench, out_folder=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with tee_output(args.log) if getattr(args, "log", None) else nullcontext():
        try:
            if getattr(args, "out", None) is not None:  # before any work: a bad --out fails now, not hours later
                check_output(args.out, folder=args.out_folder)
            if getattr(args, "gpus", 0) > 1 and "WORLD_SIZE" not in os.environ:
                launch_torchrun(args.gpus, sys.argv[1:] if argv is None else argv)  # does not return
            if threads := threads_per_process():
                torch.set_num_threads(threads)
            args.func(args)
        except USER_ERRORS as err:
            print(f"put {args.command}: error: {describe(err)}", file=sys.stderr)
            return 2
    return 0

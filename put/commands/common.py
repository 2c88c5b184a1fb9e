"""Argument types and options shared by several subcommands."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from put.config import PRESETS
from put.errors import InputError
from put.sampling.precision import PRECISIONS


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:  # NaN included
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def nonnegative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or a positive integer, got {value}")
    return value


def device_name(text: str) -> str:
    """A device this machine has: checked when the command line is read, not after loading a model."""
    import torch  # not at the top: most commands never ask for a device

    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch device (expected cpu, cuda or cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text}: no CUDA device is available here (use --device cpu)")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(f"{text}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return text


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def evaluated_label(text: str) -> str:
    """A variant, official_<name> or external_<name> for an entry of params.yaml's `official` or `external` (the
    label of its files)."""
    from put.config import VARIANTS
    from put.config.external import EXTERNAL_PREFIX
    from put.config.params import OFFICIAL_PREFIX

    prefix = next((p for p in (OFFICIAL_PREFIX, EXTERNAL_PREFIX) if text.startswith(p)), "")
    name = text[len(prefix):] if prefix else ""
    if text in VARIANTS or name.replace("_", "").isalnum():
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: expected a variant ({', '.join(VARIANTS)}), {OFFICIAL_PREFIX}NAME "
                                     f"or {EXTERNAL_PREFIX}NAME")


def recorded_command(name: str) -> str:
    """The command line that made an output, as its tables record it (`put NAME` when not run from a shell)."""
    return "python -m put " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else f"put {name}"


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                        help="fp32, or bf16 autocast (nearest-code search, scores and top-K stay fp32; on a CPU: "
                             "one with bf16 units, AVX512-BF16 or AMX); auto: bf16 on CUDA, fp32 on the CPU (whose "
                             "bf16 would change the results from one machine to another)")


def optional_path(value: str | None) -> Path | None:
    return Path(value) if value else None


def parse_tags(pairs: list[str] | None) -> dict[str, str]:
    tags = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"--tag expects KEY=VALUE, got {pair!r}")
        tags[key] = value
    return tags


def add_params_arguments(parser: argparse.ArgumentParser, tags: bool = False) -> None:
    parser.add_argument("--params", help="parameter file (default: ./params.yaml if present, else the defaults)")
    parser.add_argument("--preset", choices=list(PRESETS), help="use this preset instead of the file's")
    parser.add_argument("--log", help="also write everything this command prints to this file (appended)")
    if tags:
        parser.add_argument("--tag", action="append", metavar="KEY=VALUE",
                            help="MLflow tag for this stage's run (e.g. the DVC stage or Snakemake rule); repeatable")


def load_cli_params(args: argparse.Namespace):
    """params.yaml (or --params) with --preset and --seed applied: the stages' one way of reading their knobs."""
    from put.config.params import load_params

    path = args.params if args.params is not None else ("params.yaml" if Path("params.yaml").is_file() else None)
    return load_params(path, preset=args.preset).replicate(getattr(args, "seed", 0))


def add_seed_argument(parser: argparse.ArgumentParser) -> None:
    """The seed replicate a stage runs (params.yaml's `seeds`): its files lie under <variant>_seed<S>."""
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="seed replicate: every training and sampling seed of the preset plus S "
                             "(0, the default: the base run; the DAG runs each of params.yaml's `seeds`)")


def add_training_arguments(parser: argparse.ArgumentParser, variants: tuple[str, ...]) -> None:
    """What both training stages take (`put train-pvqvae`, `put train-transformer`)."""
    add_params_arguments(parser, tags=True)
    parser.add_argument("--variant", choices=variants, default="put")
    parser.add_argument("--split", default="data/splits", help="folder written by `put split`")
    parser.add_argument("--prepared", help="folder written by `put prepare` (default: decode the original files)")
    parser.add_argument("--out", required=True, help="final checkpoint (.pt); resumable state beside it")
    parser.add_argument("--curves", help="folder for the loss and held-out metric curves (train.csv, eval.csv)")
    add_seed_argument(parser)
    parser.add_argument("--restart", action="store_true",
                        help="discard a saved state (e.g. one made with other settings) and train afresh")
    parser.add_argument("--device", type=device_name, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--gpus", type=nonnegative_int, default=0,
                        help="processes per node, one per GPU: above 1 re-runs this command under torchrun "
                             "(DDP; NCCL on GPUs, gloo on CPU); 0 or 1: one process per node")
    parser.add_argument("--nodes", type=positive_int, default=1,
                        help="nodes of the Slurm job this command runs in (its batch step): above 1, one torchrun "
                             "per node under srun, rendezvous on this node (put/train/launch.py); with --gpus 0 "
                             "or 1, one CPU or GPU process per node")
    parser.set_defaults(out_folder=False, before_launch=check_training_params)


def check_training_params(args: argparse.Namespace) -> None:
    """What a training's workers would each fail on first, checked once before they start: params.yaml read and
    validated, the preset resolved for the variant, a GPU for each process of this node."""
    from put.train.launch import check_gpus

    load_cli_params(args).resolved_for(args.variant)
    check_gpus(args.gpus, args.device)

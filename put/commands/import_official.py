"""`put import-official`: the authors' released checkpoints converted into ours."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import add_params_arguments, load_cli_params
from put.config import VARIANTS
from put.errors import InputError

HELP = "convert the authors' released checkpoints into ours"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser)  # --preset: the model sizes (their files hold none)
    parser.add_argument("--official", metavar="NAME", help="an entry of params.yaml's `official`: its file, variant "
                                                           "and model overrides")
    parser.add_argument("--pvqvae", help="their P-VQVAE checkpoint (.pth)")
    parser.add_argument("--transformer", help="their transformer checkpoint (.pth; holds its P-VQVAE as content_codec)")
    parser.add_argument("--model-overrides", help="YAML/JSON mapping of ModelConfig fields over the preset's, "
                                                  "e.g. {pvqvae: {base_channels: 64}}")
    parser.add_argument("--variant", choices=VARIANTS,
                        help="default: read from the P-VQVAE's tensors (tok and qua0 must be given)")
    parser.add_argument("--out", required=True, help="folder for pvqvae.pt and transformer.pt")
    parser.set_defaults(out_folder=True)


def run(args: argparse.Namespace) -> None:
    from put.official import import_official, read_overrides

    params = load_cli_params(args)
    overrides = read_overrides(args.model_overrides) if args.model_overrides else None
    transformer, variant = args.transformer, args.variant
    if args.official:  # an entry of params.yaml's `official` (what the DAG's import_official stage passes)
        if args.official not in params.official:
            raise InputError(f"{params.source}: official: no entry {args.official!r} (entries: "
                             f"{', '.join(params.official) or 'none'})")
        entry = params.official[args.official]
        differs = transformer not in (None, entry.transformer) or variant not in (None, entry.variant)
        if differs or overrides is not None:
            raise InputError(f"--official {args.official} takes the file, variant and model from params.yaml; "
                             "do not give --transformer, --variant or --model-overrides that differ")
        transformer, variant, overrides = entry.transformer, entry.variant, entry.model
        preset = entry.preset or params.preset
    else:
        preset = params.preset
    result = import_official(Path(args.out), preset, pvqvae=args.pvqvae, transformer=transformer,
                             variant=variant, model_overrides=overrides)
    print(f"variant {result.variant}: {result.pvqvae}" + (f", {result.transformer}" if result.transformer else ""))

"""`put masks-export`: a preset's frozen evaluation images and masks in LaMa's or ICT's layout or plain folders.
Not part of `put masks`, so that changing the export does not re-run the masks stage.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import add_params_arguments, load_cli_params

HELP = "export the frozen evaluation images and masks for other inpainting codebases (LaMa, ICT, plain folders)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from put.config.external import EXPORT_FORMATS
    from put.masks.layouts import HOLE_VALUES

    add_params_arguments(parser)
    parser.add_argument("--masks", help="folder written by `put masks` (default: the preset's, data/<preset>/masks)")
    parser.add_argument("--format", required=True, choices=EXPORT_FORMATS,
                        help="lama: <group>/<name>.png beside <name>_mask001.png, white = hole, as LaMa's "
                             "bin/predict.py reads them; folder: <group>/images/ and <group>/masks/, same names "
                             "(MAT: --hole-value 0); ict: as folder, white = hole, results <name>_0.png as ICT's "
                             "run.py writes them")
    parser.add_argument("--hole-value", type=int, choices=HOLE_VALUES, default=255,
                        help="grey level of a hole in the exported masks (folder only; lama and ict are always 255)")
    parser.add_argument("--blank", action="store_true",
                        help="zero the hole's pixels of the exported images, for a method that does not blank the "
                             "hole itself (LaMa and MAT do; docs/external.md)")
    parser.add_argument("--out", required=True,
                        help="export folder: new, empty, or an earlier export of this preset (replaced)")
    parser.set_defaults(out_folder=True)


def run(args: argparse.Namespace) -> None:
    from put.config.paths import masks_dir
    from put.masks.export import export_masks

    preset = load_cli_params(args).preset
    masks = Path(args.masks) if args.masks else masks_dir(preset)
    manifest = export_masks(masks, Path(args.out), args.format, preset, args.hole_value, blank=args.blank)
    print(f"masks export ({args.format}): {manifest}")

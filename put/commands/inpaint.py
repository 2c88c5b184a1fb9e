"""`put inpaint`: one image and mask, or folders of them paired by name; N diverse results each as PNG files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from put.commands.common import add_precision_argument, default_device, device_name, positive_int
from put.errors import InputError

HELP = "inpaint an image (or a folder of images): N diverse results each as PNG files"
SAMPLING = ("top_k", "temperature", "tokens_per_step", "steps", "schedule", "position_rule")
# Options that contradict each other (put/cli.py refuses them together): (option, the options it excludes, why).
CONFLICTS = (
    ("deterministic", ("samples",), "argmax gives one result; more samples would be identical copies"),
    ("deterministic", SAMPLING, "argmax takes every token at once, no sampling option applies"),
    ("steps", ("tokens_per_step", "schedule"), "a cosine schedule over S steps replaces a fixed number of tokens "
     "per step and the TPAMI release's schedules"),
    ("schedule", ("tokens_per_step",), "a schedule replaces a fixed number of tokens per step"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True,
                        help="transformer checkpoint (.pt), or a registered model: models:/NAME@ALIAS or "
                             "models:/NAME/VERSION (e.g. models:/put-demo-put-transformer@current) in the MLflow "
                             "store of MLFLOW_TRACKING_URI, else ./mlflow.db")
    parser.add_argument("--pvqvae", help="P-VQVAE checkpoint, if not where the transformer checkpoint recorded it")
    inputs = parser.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--image", help="RGB, RGBA or grayscale image")
    inputs.add_argument("--images", help="folder of images: each is paired with the mask of the same name stem in "
                                         "--masks (a.jpg with a.png); files that cannot be paired or read are "
                                         "skipped, listed with the reason at the end (exit status 1)")
    masks = parser.add_mutually_exclusive_group(required=True)
    masks.add_argument("--mask", help="binary mask image of the same size")
    masks.add_argument("--masks", help="folder of masks, with --images")
    parser.add_argument("--mask-polarity", choices=["hole-white", "keep-white"], default="hole-white",
                        help="which pixels of the mask file are white: the holes (default, as PConv masks) or the kept")
    parser.add_argument("--samples", type=positive_int, default=1, help="number of diverse results")
    parser.add_argument("--top-k", type=int, default=50)
    parser.add_argument("--temperature", type=float, default=1.0, help="multiplies the logits (released code)")
    parser.add_argument("--tokens-per-step", type=int, default=1, help="tokens sampled per forward pass")
    parser.add_argument("--steps", type=int, help="cosine schedule: every masked patch in exactly this many forward "
                                                  "passes (replaces --tokens-per-step)")
    parser.add_argument("--schedule", help="the TPAMI release's schedule: cosine_S, linear_S or average_S (S forward "
                                           "passes), or an integer (tokens per pass); replaces --tokens-per-step")
    parser.add_argument("--position-rule", choices=["logit", "prob"], default="logit",
                        help="next position: largest max-logit (released code) or max probability (paper text)")
    parser.add_argument("--deterministic", action="store_true", help="all tokens at once by argmax (PUT_all)")
    parser.add_argument("--no-composite", dest="composite", action="store_false",
                        help="keep the decoder's output everywhere, as the paper's evaluation does")
    parser.add_argument("--pad", action="store_true", help="pad to a multiple of the patch size (result cropped back)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=positive_int, help="samples per forward batch (default: all at once)")
    parser.add_argument("--device", type=device_name, default=default_device())
    add_precision_argument(parser)
    parser.add_argument("--out", required=True, help="output folder")
    parser.set_defaults(out_folder=True)


def run(args: argparse.Namespace) -> None:
    from put.sampling.inpaint import InpaintRequest, InpaintSettings, inpaint_file, inpaint_folder
    from put.sampling.inpainter import load_model
    from put.sampling.schedules import SamplingOptions

    folders = args.images is not None
    if folders != (args.masks is not None):
        raise InputError("--images needs --masks (folders), --image needs --mask (files)")
    settings = InpaintSettings(
        samples=args.samples, seed=args.seed, deterministic=args.deterministic, pad=args.pad,
        batch_size=args.batch_size, precision=args.precision, options=SamplingOptions(
            top_k=args.top_k, temperature=args.temperature, tokens_per_step=args.tokens_per_step,
            position_rule=args.position_rule, steps=args.steps, schedule=args.schedule))
    request = InpaintRequest(Path(args.images if folders else args.image), Path(args.masks if folders else args.mask),
                             Path(args.out), settings, args.composite, args.mask_polarity)
    model = load_model(args.checkpoint, args.pvqvae, args.device)
    if not folders:
        for path in inpaint_file(model, request):
            print(path)
        return
    report = inpaint_folder(model, request)
    print(f"inpainted {len(report.done)} of {report.images} images into {request.out} "
          f"({settings.samples} result(s) each)", file=sys.stderr)
    if report.skipped:
        print(f"skipped {len(report.skipped)} file(s):", file=sys.stderr)
        for name, why in report.skipped:
            print(f"  {name}: {why}", file=sys.stderr)
    if not report.done:
        raise InputError(f"{request.image}: no image could be inpainted ({len(report.skipped)} skipped, see above)")
    if report.skipped:
        raise SystemExit(1)  # some results written, some files skipped

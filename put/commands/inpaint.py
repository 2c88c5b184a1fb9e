"""`put inpaint`: one image and mask, N diverse results as PNG files."""

from __future__ import annotations

import argparse
from pathlib import Path

from put.commands.common import default_device, device_name, positive_int

HELP = "inpaint one image: N diverse results as PNG files"
SAMPLING = ("top_k", "temperature", "tokens_per_step", "steps", "position_rule")
# Options that contradict each other (put/cli.py refuses them together): (option, the options it excludes, why).
CONFLICTS = (
    ("deterministic", ("samples",), "argmax gives one result; more samples would be identical copies"),
    ("deterministic", SAMPLING, "argmax takes every token at once, no sampling option applies"),
    ("steps", ("tokens_per_step",), "a cosine schedule over S steps replaces a fixed number of tokens per step"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True, help="transformer checkpoint (.pt)")
    parser.add_argument("--pvqvae", help="P-VQVAE checkpoint, if not where the transformer checkpoint recorded it")
    parser.add_argument("--image", required=True, help="RGB, RGBA or grayscale image")
    parser.add_argument("--mask", required=True, help="binary mask image of the same size")
    parser.add_argument("--mask-polarity", choices=["hole-white", "keep-white"], default="hole-white",
                        help="which pixels of the mask file are white: the holes (default, as PConv masks) or the kept")
    parser.add_argument("--samples", type=positive_int, default=1, help="number of diverse results")
    parser.add_argument("--top-k", type=int, default=50)
    parser.add_argument("--temperature", type=float, default=1.0, help="multiplies the logits (released code)")
    parser.add_argument("--tokens-per-step", type=int, default=1, help="tokens sampled per forward pass")
    parser.add_argument("--steps", type=int, help="cosine schedule: every masked patch in exactly this many forward "
                                                  "passes (replaces --tokens-per-step)")
    parser.add_argument("--position-rule", choices=["logit", "prob"], default="logit",
                        help="next position: largest max-logit (released code) or max probability (paper text)")
    parser.add_argument("--deterministic", action="store_true", help="all tokens at once by argmax (PUT_all)")
    parser.add_argument("--no-composite", dest="composite", action="store_false",
                        help="keep the decoder's output everywhere, as the paper's evaluation does")
    parser.add_argument("--pad", action="store_true", help="pad to a multiple of the patch size (result cropped back)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=positive_int, help="samples per forward batch (default: all at once)")
    parser.add_argument("--device", type=device_name, default=default_device())
    parser.add_argument("--out", required=True, help="output folder")
    parser.set_defaults(out_folder=True)


def run(args: argparse.Namespace) -> None:
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

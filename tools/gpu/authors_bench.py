"""Time the authors' released sampling loop (`sample_largest` of their cvpr2022 branch: one token per forward,
top-50, fp32 as their code runs) on a device, with random weights at the FFHQ model's sizes, and write rows in
the format of `put bench sampling` (put/bench/common.py), so the report's speed table sets theirs beside ours.

Never imported by the package. The authors' code is read from a folder (exported from github.com/liuqk3/PUT,
branch cvpr2022, as tools/parity does) and imported with shims for current Python, numpy and torch, never
edited. Their loop has no per-step hook: a step is the marginal time of one more masked token,
(t(n masked) - t(1 masked)) / (n - 1), each the best of a few runs; t(1) (encoding, one step, decoding) is
reported as the fixed cost.

    python tools/gpu/authors_bench.py --official /path/to/PUT --device cuda --batch 1 10 --masked 48 \\
        --out reports/benchmarks/authors_sampling_cuda_h100.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from put.bench.common import environment, rate_fields  # noqa: E402
from put.config import model_config  # noqa: E402
from put.models.device import device_name, synchronize  # noqa: E402
from put.models.transformer import UQTransformer  # noqa: E402

CONFIG = "configs/put_cvpr2022/ffhq/transformer_ffhq.yaml"
PRESET = "ffhq"  # the sizes their FFHQ config gives (30 layers x 512, 256 px, 32 x 32 tokens)
TOP_K = 50


def install_shims() -> None:
    """Their code on current Python / numpy / torch, unedited: names it imports that no longer exist."""
    if not hasattr(importlib.util, "module_for_loader"):  # removed in Python 3.12; base_codec imports it, unused
        importlib.util.module_for_loader = lambda f: f
    if importlib.util.find_spec("audioop") is None:  # removed in Python 3.13; patch_vqgan imports `bias`, unused
        sys.modules["audioop"] = types.SimpleNamespace(bias=None)
    if importlib.util.find_spec("torch._six") is None:  # removed in torch 2.0; their lr_scheduler imports inf
        sys.modules["torch._six"] = types.SimpleNamespace(inf=float("inf"))
    for name, alias in (("bool", bool), ("int", int), ("float", float)):
        if name not in np.__dict__:
            setattr(np, name, alias)


def build(official: Path, device: torch.device):
    install_shims()
    sys.path.insert(0, str(official))
    from image_synthesis.utils.misc import instantiate_from_config

    config = yaml.load((official / CONFIG).read_text(), Loader=yaml.FullLoader)["model"]
    config["params"]["content_codec_config"]["params"]["ckpt_path"] = None  # random weights
    torch.manual_seed(0)
    cwd = os.getcwd()
    os.chdir(official)  # their code resolves some paths against the working directory
    try:
        return instantiate_from_config(config).eval().to(device)
    finally:
        os.chdir(cwd)


def keep_mask(batch: int, masked: int) -> torch.Tensor:
    """`masked` token-aligned 8x8 holes spread over the 32x32 token grid (True = known, as their code reads it)."""
    mask = torch.ones(batch, 1, 256, 256, dtype=torch.bool)
    for k in range(masked):
        row, col = 16 * (k // 16), 16 * (k % 16)
        mask[..., row:row + 8, col:col + 8] = False
    return mask


def timed_loop(model, device: torch.device, batch: int, masked: int, repeats: int) -> float:
    """Best of `repeats` runs of their whole loop with `masked` holes per image."""
    image, mask = torch.rand(batch, 3, 256, 256) * 255, keep_mask(batch, masked)
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        with torch.no_grad():
            model.sample_largest(batch={"image": image.clone(), "mask": mask.clone()}, filter_ratio=TOP_K,
                                 filter_type="count", num_token_per_iter=1, return_gt=False, return_mask_gt=False,
                                 return_reconstruction=False)
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


def bench(official: Path, device: torch.device, batch: int, masked: int, repeats: int, model=None) -> dict:
    started = time.perf_counter()
    model = model or build(official, device)
    timed_loop(model, device, batch, 2, 1)  # warm-up
    fixed = timed_loop(model, device, batch, 1, repeats)
    total = timed_loop(model, device, batch, masked, repeats)
    per_step = (total - fixed) / (masked - 1)
    config = model_config(PRESET)
    t = config.transformer
    flop = UQTransformer(t, config.pvqvae.embed_dim, config.pvqvae.codebook_size,
                         config.token_grid).flops_per_forward(config.token_grid[0] * config.token_grid[1]) * batch
    return {"benchmark": "sampling", "code": "authors", "engine": "released sample_largest (cvpr2022)",
            "preset": PRESET, "n_layer": t.n_layer, "n_embd": t.n_embd, "image_size": config.image_size,
            "parameters": sum(p.numel() for n, p in model.named_parameters() if not n.startswith("content_codec")),
            **environment(device, False), "authors_code": str(official), "batch": batch, "tokens_per_step": 1,
            "steps": masked - 1, "sequence_length": config.token_grid[0] * config.token_grid[1],
            "seconds_per_step": per_step, "seconds_fixed": fixed, "seconds_total": total,
            "tokens_per_second": batch / per_step, **rate_fields(flop, per_step, device),
            "wall_seconds": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--official", required=True, type=Path, help="the authors' code (cvpr2022 branch)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--masked", type=int, default=48, help="masked tokens per image (>= 2)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, help="JSON list of rows")
    args = parser.parse_args()
    if args.masked < 2:
        parser.error("--masked must be at least 2 (a step is the time of one more masked token)")
    device = torch.device(args.device)
    model = build(args.official.resolve(), device)
    rows = []
    for batch in args.batch:
        rows.append(bench(args.official.resolve(), device, batch, args.masked, args.repeats, model))
        r = rows[-1]
        print(f"authors' loop on {device_name(device)}, batch {batch}: {r['seconds_per_step'] * 1e3:.2f} ms/step, "
              f"{r['tokens_per_second']:.2f} tokens/s (fixed {r['seconds_fixed']:.2f} s)", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()

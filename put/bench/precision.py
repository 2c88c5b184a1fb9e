"""fp32 against bf16 autocast for sampling on one device: the speed of each (put/bench/sampling.py, the median
step) and the share of sampled tokens that agree with fp32's for the same seed (docs/speed-and-cost.md, "bf16
on the CPU"). Random weights, as the speed rows: the agreement of a trained model may differ."""

from __future__ import annotations

import statistics

import torch

from put.bench.sampling import bench_sampling, timed_model
from put.config import model_config
from put.models.device import autocast
from put.sampling.engine import Sampler
from put.sampling.schedules import SamplingOptions


def sampled_tokens(preset: str, holes: int, device: str, bf16: bool, seed: int) -> torch.Tensor:
    """The tokens one exact sampling run (one token a step, top-50) draws for the first `holes` positions of a
    batch-1 grid, from seeded random features."""
    dev = torch.device(device)
    config = model_config(preset)
    model = timed_model(preset, str(dev), seed)
    h, w = config.token_grid
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(1, config.pvqvae.embed_dim, h, w, generator=generator).to(dev)
    known = torch.ones(1, h * w, dtype=torch.bool, device=dev)
    known[:, :holes] = False
    known = known.view(1, h, w)
    with autocast(dev, bf16):
        tokens = Sampler(model, "eager")(features, known, torch.zeros(1, h, w, dtype=torch.long, device=dev),
                                         SamplingOptions(top_k=50), seed, known_fraction=known.float())
    return tokens.flatten()[:holes].cpu()


def bench_precision(preset: str, steps: int, holes: int, device: str = "cpu", seed: int = 0, rounds: int = 3) -> dict:
    """Both precisions' sampling rows (`steps` timed steps each), alternated for `rounds` rounds so that a shared
    machine's load weighs on both alike (the median round's seconds per step of each), and the share of `holes`
    tokens of one run that bf16 samples as fp32 does (same model, features, mask and seed)."""
    runs = [bench_sampling(preset, steps, device=device, bf16=bf16, engine="eager", seed=seed)
            for _ in range(rounds) for bf16 in (False, True)]
    rows = {name: sorted((r for r in runs if r["precision"] == label), key=lambda r: r["seconds_per_step"])[rounds // 2]
            for name, label in (("fp32", "fp32"), ("bf16", "bf16-autocast"))}  # each one's median round
    pairs = [a["seconds_per_step"] / b["seconds_per_step"] for a, b in zip(runs[::2], runs[1::2])]
    fp32, bf16 = (sampled_tokens(preset, holes, device, b, seed) for b in (False, True))
    # A token drawn differently changes the context of every later step: agreement falls along the run.
    first = int((fp32 != bf16).nonzero()[0]) if bool((fp32 != bf16).any()) else holes
    return {"benchmark": "precision", "preset": preset, "device_name": rows["fp32"]["device_name"],
            "precision": "fp32 vs bf16-autocast", "steps": steps, "holes": holes, "seed": seed,
            "fp32_tokens_per_second": rows["fp32"]["tokens_per_second"],
            "bf16_tokens_per_second": rows["bf16"]["tokens_per_second"],
            # each round's fp32 over bf16 seconds per step, measured back to back: the load of that moment cancels
            "speedup": statistics.median(pairs), "round_speedups": pairs,
            "tokens_agreeing": float((fp32 == bf16).float().mean()), "first_disagreement": first,
            "rounds": rounds, "rows": runs, "command": rows["fp32"]["command"], "commit": rows["fp32"]["commit"]}

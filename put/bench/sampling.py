"""One sampling step of a paper-size transformer (random weights: the speed does not depend on them) by each
engine: the median of consecutive steps of one run."""

from __future__ import annotations

import statistics
import time
from functools import lru_cache

import torch

from put.bench.common import environment, network, peak_memory_fields, rate_fields
from put.config import model_config
from put.errors import InputError
from put.models.device import autocast, synchronize
from put.models.put_model import PUTModel
from put.sampling.engine import Sampler
from put.sampling.schedules import SamplingOptions


@lru_cache(maxsize=1)
def timed_model(preset: str, device: str, seed: int = 0) -> PUTModel:
    """The preset's model with seeded random weights, kept for the next row of the same preset (building the
    ImageNet transformer takes seconds); one at a time."""
    torch.manual_seed(seed)
    return PUTModel(model_config(preset)).eval().to(device)


class StepClock:
    """Marks the end of each step without stalling the device (CUDA events on GPUs, the wall clock elsewhere),
    so that a captured engine's replays are timed as they run: back to back."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def mark(self, *progress: int) -> None:  # a sampler progress callback (done, total)
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def intervals(self) -> list[float]:
        """Seconds between consecutive marks."""
        if self.cuda:
            self.marks[-1].synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in zip(self.marks, self.marks[1:])]
        return [b - a for a, b in zip(self.marks, self.marks[1:])]


def bench_sampling(preset: str, steps: int, batch: int = 1, tokens_per_step: int = 1, device: str = "cpu",
                   bf16: bool = False, engine: str = "eager", seed: int = 0) -> dict:
    """Time `steps` consecutive steps of one sampling run (one full forward each, top-50) by `engine`.

    A one-step run warms up (allocations, capture or compilation); then each step is timed on its own and the
    median reported, so that a noisy neighbour does not decide the figure. The first step carries the run's
    fixed cost."""
    started = time.perf_counter()
    dev = torch.device(device)
    config = model_config(preset)
    model = timed_model(preset, str(dev), seed)
    sampler = Sampler(model, engine)
    h, w = config.token_grid
    length = h * w
    if steps * tokens_per_step > length:
        raise InputError(f"{preset}: {steps} steps of {tokens_per_step} tokens exceed the {length} positions")
    features = torch.randn(batch, config.pvqvae.embed_dim, h, w, device=dev)
    tokens = torch.zeros(batch, h, w, dtype=torch.long, device=dev)
    options = SamplingOptions(top_k=50, tokens_per_step=tokens_per_step)

    def known(n_steps: int) -> torch.Tensor:
        mask = torch.ones(batch, length, dtype=torch.bool, device=dev)
        mask[:, :n_steps * tokens_per_step] = False
        return mask.view(batch, h, w)

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    with autocast(dev, bf16):
        sampler(features, known(1), tokens, options, seed, known_fraction=known(1).float())
        synchronize(dev)
        warmup = time.perf_counter() - started
        clock = StepClock(dev)
        clock.mark()
        sampler(features, known(steps), tokens, options, seed, progress=clock.mark,
                known_fraction=known(steps).float())
    kind = sampler.kind  # "eager" when building or capturing the engine failed (said on stderr)
    times = clock.intervals()
    per_step = statistics.median(times)
    memory = peak_memory_fields(dev)
    flop = model.transformer.flops_per_forward(length) * batch
    return {
        "benchmark": "sampling", "code": "ours", "engine": kind, "captured": kind != "eager" and dev.type == "cuda",
        "preset": preset, **network(config, model.transformer), **environment(dev, bf16),
        "batch": batch, "tokens_per_step": tokens_per_step, "steps": steps, "sequence_length": length,
        "seconds_per_step": per_step, "seconds_per_step_mean": statistics.fmean(times),
        "seconds_first_step": times[0], "tokens_per_second": tokens_per_step * batch / per_step,
        **rate_fields(flop, per_step, dev), **memory, "warmup_seconds": warmup,
        "wall_seconds": time.perf_counter() - started,
    }

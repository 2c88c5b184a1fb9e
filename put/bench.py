"""Benchmarks of the paper-size models (random weights: the speed does not depend on them): one sampling step
by each engine, P-VQVAE inference, and (put/bench_train.py) one training step of each stage.

Every result row says what it compares: the network timed (layers, width, image size, parameters), the device,
torch, the precision, the code's commit, the achieved TFLOP/s and its fraction of this device's dense matmul
rate -- bf16 on GPUs, fp32 on CPUs -- measured in the same process right after (on a shared machine the load
drifts: a rate measured minutes apart would not compare).
"""

from __future__ import annotations

import platform
import statistics
import sys
import time
from contextlib import nullcontext
from functools import lru_cache
from pathlib import Path

import torch

from put.config import model_config
from put.errors import InputError
from put.models.put_model import PUTModel
from put.sampling import SamplingOptions
from put.sampling_engine import Sampler
from put.tracking.source import git_commit


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(device: torch.device, bf16: bool):
    return torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()


def precision(bf16: bool) -> str:
    return "bf16-autocast" if bf16 else "fp32"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"


def matmul_tflops(device: torch.device, seconds: float = 1.0) -> tuple[float, str]:
    """This device's measured dense matmul rate, TFLOP/s, and what was multiplied: bf16 8192^3 on GPUs (the
    precision their tensor cores are rated in), fp32 2048^3 on CPUs."""
    dtype, size = (torch.bfloat16, 8192) if device.type == "cuda" else (torch.float32, 2048)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    synchronize(device)
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        runs += 1
        synchronize(device)
    rate = 2 * size ** 3 * runs / (time.perf_counter() - start) / 1e12
    return rate, f"{str(dtype).removeprefix('torch.')} {size}x{size}x{size}"


def rate_fields(flop: float, seconds: float, device: torch.device) -> dict:
    """TFLOP/s of `flop` done in `seconds`, beside the matmul rate measured now."""
    reference, what = matmul_tflops(device)
    achieved = flop / seconds / 1e12
    return {"tflop_per_step": flop / 1e12, "achieved_tflops": achieved, "matmul_tflops": reference,
            "matmul_reference": what, "fraction_of_matmul": achieved / reference}


def environment(device: torch.device, bf16: bool) -> dict:
    """Where and with what a row was measured."""
    return {"device": str(device), "device_name": device_name(device), "precision": precision(bf16),
            "torch": torch.__version__, "python": platform.python_version(), "threads": torch.get_num_threads(),
            "commit": git_commit() or "unknown", "command": " ".join([program(), *sys.argv[1:]])}


def program() -> str:
    """How this process was started: `put`, `python -m put`, or a script's name."""
    name = Path(sys.argv[0]).name
    return "python -m put" if name == "__main__.py" else name


def network(config, module: torch.nn.Module) -> dict:
    """What was timed: the release whose architecture it is, the transformer's depth and width, the image size and
    the module's parameters."""
    t = config.transformer
    return {"generation": config.generation, "n_layer": t.n_layer, "n_embd": t.n_embd,
            "image_size": config.image_size, "parameters": sum(p.numel() for p in module.parameters())}


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


def peak_memory_fields(device: torch.device) -> dict:
    """Peak memory: the CUDA allocator's since its last reset, or on CPUs this process's peak resident size."""
    if device.type == "cuda":
        return {"peak_gib": torch.cuda.max_memory_allocated(device) / 2 ** 30,
                "peak_memory_kind": "CUDA max_memory_allocated"}
    import resource

    return {"peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20,
            "peak_memory_kind": "process max RSS (all of the process so far)"}


def bench_sampling(preset: str, steps: int, batch: int = 1, tokens_per_step: int = 1, device: str = "cpu",
                   bf16: bool = False, engine: str = "eager", seed: int = 0) -> dict:
    """Time `steps` consecutive steps of one sampling run (one full forward each, top-50) by `engine`.

    A first run of one step warms up (allocations, the graph capture or compilation); then each step of the
    timed run is timed on its own and the median reported, so that a noisy neighbour on a shared machine does
    not decide the figure. The first step also carries the run's fixed cost (input embedding, the plan,
    the noise)."""
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


def bench_pvqvae(preset: str, batch: int = 8, repeats: int = 3, device: str = "cpu", bf16: bool = False) -> dict:
    """Images/s of P-VQVAE inference: encode, quantize, decode (the paper's supplementary speed table)."""
    from torch.utils.flop_counter import FlopCounterMode

    started = time.perf_counter()
    dev = torch.device(device)
    config = model_config(preset)
    model = PUTModel(config).pvqvae.eval().to(dev)
    size = config.image_size
    images = torch.rand(batch, 3, size, size, device=dev) * 2 - 1
    keep = torch.ones(batch, 1, size, size, device=dev)
    keep[..., size // 4: size // 2, size // 4: size // 2] = 0

    def run() -> None:
        q = model.quantize(model.encode(images, keep), keep)
        model.decode(q.vectors, keep, images)

    with torch.inference_mode(), autocast(dev, bf16):
        counter = FlopCounterMode(display=False)
        with counter:
            run()
        synchronize(dev)
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        synchronize(dev)
        elapsed = (time.perf_counter() - start) / repeats
    return {"benchmark": "pvqvae", "code": "ours", "preset": preset, **network(config, model),
            **environment(dev, bf16), "batch": batch, "repeats": repeats, "seconds_per_batch": elapsed,
            "images_per_second": batch / elapsed, **rate_fields(counter.get_total_flops(), elapsed, dev),
            "wall_seconds": time.perf_counter() - started}

"""Benchmarks: sampling-step speed of a preset's transformer against the machine's matmul rate, and
P-VQVAE throughput. Random weights are fine for timing. Each result names the network it timed (layers,
width, image size, parameters) so that a table can say what it compares."""

from __future__ import annotations

import platform
import statistics
import time
from contextlib import nullcontext

import torch

from put.config import model_config
from put.models.put_model import PUTModel
from put.sampling import SamplingOptions, sample_iterative


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def autocast(device: torch.device, bf16: bool):
    return torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()


def matmul_gflops(device: torch.device, dtype: torch.dtype = torch.float32, size: int = 2048,
                  seconds: float = 2.0) -> float:
    """Measured dense matmul rate (size x size x size) of this machine, GFLOP/s."""
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
    return 2 * size ** 3 * runs / (time.perf_counter() - start) / 1e9


def bench_sampling(preset: str, steps: int, batch: int = 1, tokens_per_step: int = 1, device: str = "cpu",
                   bf16: bool = False, seed: int = 0) -> dict:
    """Time `steps` iterative sampling steps (one full forward each) of the preset's transformer.

    Each step is timed on its own and the median reported, so that a noisy neighbour on a shared
    machine does not decide the figure; the matmul rate is measured right after, in the same process
    (on a shared machine the load drifts: a rate measured minutes apart would not compare)."""
    started = time.perf_counter()
    dev = torch.device(device)
    torch.manual_seed(seed)
    config = model_config(preset)
    model = PUTModel(config).eval().to(dev)
    h, w = config.token_grid
    length = h * w
    features = torch.randn(batch, config.pvqvae.embed_dim, h, w, device=dev)
    tokens = torch.zeros(batch, h, w, dtype=torch.long, device=dev)
    known = torch.ones(batch, length, dtype=torch.bool, device=dev)
    known[:, :tokens_per_step] = False  # exactly one step of the loop per call
    known = known.view(batch, h, w)
    options = SamplingOptions(top_k=50, tokens_per_step=tokens_per_step)
    generator = torch.Generator(dev).manual_seed(seed)

    times = []
    with autocast(dev, bf16):
        for i in range(steps + 1):  # the first call warms up
            synchronize(dev)
            start = time.perf_counter()
            sample_iterative(model, features, known, tokens, options, generator)
            synchronize(dev)
            if i:
                times.append(time.perf_counter() - start)
    per_step = statistics.median(times)
    flops = model.transformer.flops_per_forward(length) * batch
    peak = matmul_gflops(dev, torch.bfloat16 if bf16 else torch.float32)
    achieved = flops / per_step / 1e9
    return {
        "benchmark": "sampling", "preset": preset, **network(config, model.transformer),
        "device": str(dev), "device_name": device_name(dev),
        "dtype": "bf16-autocast" if bf16 else "fp32", "threads": torch.get_num_threads(),
        "batch": batch, "tokens_per_step": tokens_per_step, "steps": steps, "sequence_length": length,
        "seconds_per_step": per_step, "seconds_per_step_mean": statistics.fmean(times),
        "tokens_per_second": tokens_per_step * batch / per_step,
        "gflop_per_step": flops / 1e9, "achieved_gflops": achieved,
        "matmul_gflops": peak, "fraction_of_matmul": achieved / peak, "torch": torch.__version__,
        "wall_seconds": time.perf_counter() - started,
    }


def network(config, module: torch.nn.Module) -> dict:
    """What was timed: the transformer's depth and width, the image size and the module's parameters."""
    t = config.transformer
    return {"n_layer": t.n_layer, "n_embd": t.n_embd, "image_size": config.image_size,
            "parameters": sum(p.numel() for p in module.parameters())}


def bench_pvqvae(preset: str, batch: int = 8, repeats: int = 3, device: str = "cpu", bf16: bool = False) -> dict:
    """Images/s of P-VQVAE inference: encode, quantize, decode (the paper's supplementary speed table)."""
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
        run()
        synchronize(dev)
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        synchronize(dev)
        elapsed = time.perf_counter() - start
    return {"benchmark": "pvqvae", "preset": preset, **network(config, model), "device": str(dev),
            "device_name": device_name(dev), "dtype": "bf16-autocast" if bf16 else "fp32", "batch": batch,
            "images_per_second": batch * repeats / elapsed, "torch": torch.__version__,
            "wall_seconds": time.perf_counter() - started}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"

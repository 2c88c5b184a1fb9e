"""Benchmarks: sampling-step speed of a preset's transformer against the machine's matmul rate, and
P-VQVAE throughput. Random weights are fine for timing."""

from __future__ import annotations

import platform
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
    """Time `steps` iterative sampling steps (one full forward each) of the preset's transformer."""
    dev = torch.device(device)
    torch.manual_seed(seed)
    config = model_config(preset)
    model = PUTModel(config).eval().to(dev)
    h, w = config.token_grid
    length = h * w
    masked = min(steps * tokens_per_step, length)
    features = torch.randn(batch, config.pvqvae.embed_dim, h, w, device=dev)
    tokens = torch.zeros(batch, h, w, dtype=torch.long, device=dev)

    def known_with(n_masked: int) -> torch.Tensor:
        known = torch.ones(batch, length, dtype=torch.bool, device=dev)
        known[:, :n_masked] = False
        return known.view(batch, h, w)

    options = SamplingOptions(top_k=50, tokens_per_step=tokens_per_step)
    generator = torch.Generator(dev).manual_seed(seed)
    with autocast(dev, bf16):
        sample_iterative(model, features, known_with(tokens_per_step), tokens, options, generator)  # warm-up
        synchronize(dev)
        start = time.perf_counter()
        sample_iterative(model, features, known_with(masked), tokens, options, generator)
        synchronize(dev)
        elapsed = time.perf_counter() - start
    n_steps = -(-masked // tokens_per_step)
    flops = model.transformer.flops_per_forward(length) * batch * n_steps
    matmul_dtype = torch.bfloat16 if bf16 else torch.float32
    peak = matmul_gflops(dev, matmul_dtype)
    achieved = flops / elapsed / 1e9
    return {
        "benchmark": "sampling", "preset": preset, "device": str(dev), "device_name": device_name(dev),
        "dtype": "bf16-autocast" if bf16 else "fp32", "threads": torch.get_num_threads(),
        "batch": batch, "tokens_per_step": tokens_per_step, "steps": n_steps, "sequence_length": length,
        "seconds_per_step": elapsed / n_steps, "tokens_per_second": masked * batch / elapsed,
        "gflop_per_step": flops / n_steps / 1e9, "achieved_gflops": achieved,
        "matmul_gflops": peak, "fraction_of_matmul": achieved / peak, "torch": torch.__version__,
    }


def bench_pvqvae(preset: str, batch: int = 8, repeats: int = 3, device: str = "cpu", bf16: bool = False) -> dict:
    """Images/s of P-VQVAE inference: encode, quantize, decode (the paper's supplementary speed table)."""
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
    return {"benchmark": "pvqvae", "preset": preset, "device": str(dev), "device_name": device_name(dev),
            "dtype": "bf16-autocast" if bf16 else "fp32", "batch": batch, "image_size": size,
            "images_per_second": batch * repeats / elapsed, "torch": torch.__version__}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"

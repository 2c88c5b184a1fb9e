"""What every benchmark row carries: the network, device, torch, precision, commit, and the achieved TFLOP/s as a
fraction of the device's matmul rate, measured right after in the same process (a shared machine's load drifts).
"""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

import torch

from put.models.device import device_name, precision, synchronize
from put.tracking.source import git_commit


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


def peak_memory_fields(device: torch.device) -> dict:
    """Peak memory: the CUDA allocator's since its last reset, or on CPUs this process's peak resident size."""
    if device.type == "cuda":
        return {"peak_gib": torch.cuda.max_memory_allocated(device) / 2 ** 30,
                "peak_memory_kind": "CUDA max_memory_allocated"}
    import resource

    return {"peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20,
            "peak_memory_kind": "process max RSS (all of the process so far)"}

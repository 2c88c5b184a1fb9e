"""Where a model runs: its precision (bf16 autocast on GPUs, fp32 on the CPU, where runs must be
bit-reproducible), the device's name, and a barrier for timing. Training, inference and benchmarks share it."""

from __future__ import annotations

import platform
from contextlib import AbstractContextManager, nullcontext

import torch


def autocast(device: torch.device, bf16: bool | None = None) -> AbstractContextManager:
    """bf16 autocast when `bf16` (by default: on CUDA; no loss scaling is needed), else full fp32."""
    if bf16 is None:
        bf16 = device.type == "cuda"
    return torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()


def precision(bf16: bool) -> str:
    """The precision's name in result rows."""
    return "bf16-autocast" if bf16 else "fp32"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"


def synchronize(device: torch.device) -> None:
    """Waits for the device's queued work (a CUDA clock reads nothing before it)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)

"""Inference precision: fp32, bf16 autocast, or auto (bf16 on CUDA, fp32 on CPUs, where bf16 units would change
the images). Under bf16 the nearest-code search, logits, scores and top-K stay fp32 (docs/speed-and-cost.md, "bf16
on the CPU")."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from put.errors import InputError

if TYPE_CHECKING:  # torch is not imported to parse the command line (put/commands/common.py)
    import torch

Precision = Literal["fp32", "bf16", "auto"]
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "auto")
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of units that multiply bf16 natively


@functools.cache
def cpu_has_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU has bf16 matrix units (AVX512-BF16 or AMX); False where /proc/cpuinfo cannot be read."""
    try:
        flags = set(cpuinfo.read_text().split())
    except OSError:
        return False
    return any(flag in flags for flag in CPU_BF16_FLAGS)


def use_bf16(precision: str, device: torch.device | str) -> bool:
    """Whether to sample under bf16 autocast: `bf16`, or `auto` on CUDA. bf16 asked of a CPU without bf16 units is
    refused (PyTorch would emulate it, slower than fp32)."""
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    import torch

    device = torch.device(device)
    supported = device.type == "cuda" or (device.type == "cpu" and cpu_has_bf16())
    if precision == "bf16" and not supported:
        raise InputError(f"--precision bf16: this {device.type} has no bf16 units ({' or '.join(CPU_BF16_FLAGS)} in "
                         "/proc/cpuinfo): bf16 would be emulated, slower than fp32; use fp32 or auto")
    return precision == "bf16" or (precision == "auto" and device.type == "cuda")

"""P-VQVAE inference of a preset's model (random weights): encode, quantize, decode, in images/s."""

from __future__ import annotations

import time

import torch

from put.bench.common import environment, network, rate_fields
from put.config import model_config
from put.models.device import autocast, synchronize
from put.models.put_model import PUTModel


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

"""What `put serve` accepts and keeps: the limits its API enforces and its page shows, set by `put serve` options.
Memory is bounded by them: the uploads kept (`store_bytes`), the finished results kept (`results_bytes`), the
work done at once (`parallel_work` uploads, PNGs or zips, each within `max_upload_bytes` and `max_pixels`), the
requests waiting (`max_queued` per model) and the one sampled per model (`max_job_pixels`)."""

from __future__ import annotations

from dataclasses import dataclass

from put.errors import InputError

MiB = 2**20
ITEM_OVERHEAD = 1024  # bytes counted per kept upload or result besides its pixels (the Python objects around them)


@dataclass(frozen=True)
class Limits:
    max_upload_bytes: int = 32 * MiB  # one upload's bytes, as sent
    max_pixels: int = 1024 * 1024     # one image's decoded pixels (width x height), refused from its header
    max_job_pixels: int = 64 * 256 * 256  # image pixels x samples of one request to one model
    max_samples: int = 64
    max_models: int = 8               # variants compared at once
    max_queued: int = 16              # requests waiting per model; more get 429
    store_bytes: int = 256 * MiB      # uploads kept: decoded images (3 bytes a pixel) and masks (1 byte a pixel)
    results_bytes: int = 256 * MiB    # finished requests kept: their PNGs
    parallel_work: int = 4            # uploads read and decoded, images encoded, zips made at once; more get 429

    def __post_init__(self) -> None:
        needed = 4 * self.max_pixels + 2 * ITEM_OVERHEAD
        if self.store_bytes < needed:
            raise InputError(f"--max-store-mb {self.store_bytes / MiB:g} cannot hold one image of --max-pixels "
                             f"{self.max_pixels} and its mask ({needed / MiB:.1f} MiB)")
        if self.max_job_pixels < self.max_pixels:
            raise InputError(f"--max-job-pixels {self.max_job_pixels} is below --max-pixels {self.max_pixels}: "
                             "the largest image allowed could not be sampled once")

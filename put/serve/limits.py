"""What `put serve` accepts and keeps: the limits its API enforces and its page shows, set by `put serve` options.
They bound memory (uploads, results, work at once, queued requests, loaded models, running requests) and time
(`upload_seconds`, `job_seconds`)."""

from __future__ import annotations

from dataclasses import dataclass

from put.config import PVQVAEConfig
from put.errors import InputError

MiB = 2**20
ITEM_OVERHEAD = 1024  # bytes counted per kept upload or result besides its pixels (the Python objects around them)
PATCH = PVQVAEConfig.model_fields["patch_size"].default  # pixels per token side when a checkpoint does not say


def tokens(width: int, height: int, patch: int = PATCH) -> int:
    """Tokens of an image once padded to the patch size, as the server samples it."""
    return -(-width // patch) * -(-height // patch)


def attention_cost(width: int, height: int, samples: int, patch: int = PATCH) -> int:
    """What one request costs the transformer: samples x tokens², as self-attention compares every token with
    every other one at each forward pass (pixels alone, linear, would let one large image through at 64 times
    the cost of many small ones)."""
    return samples * tokens(width, height, patch) ** 2


@dataclass(frozen=True)
class Limits:
    max_upload_bytes: int = 32 * MiB  # one upload's bytes, as sent
    max_pixels: int = 1024 * 1024     # one image's decoded pixels (width x height), refused from its header
    max_job_pixels: int = 64 * 256 * 256  # image pixels x samples of one request to one model (its outputs' memory)
    max_job_attention: int = 2**28    # samples x tokens² of one request to one model: one 1024x1024 sample
    max_samples: int = 64
    max_compared: int = 8             # variants compared at once (models in one request)
    max_queued: int = 16              # requests waiting per model; more get 429
    max_loaded: int = 4               # models kept in memory; the least recently used is unloaded beyond it
    max_running: int = 2              # requests sampled at once, all models together (one shared pool of workers)
    job_seconds: float = 600.0        # one request's time from its start; then it fails, timed out
    upload_seconds: float = 30.0      # one upload's body; a client slower than this is answered 408
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
        largest = (self.max_pixels // PATCH**2) ** 2
        if self.max_job_attention < largest:
            raise InputError(f"--max-job-attention {self.max_job_attention} is below {largest} (one sample of an "
                             f"image of --max-pixels {self.max_pixels}): the largest image allowed could not be "
                             "sampled once")
        if self.max_loaded < self.max_running:
            raise InputError(f"--max-models {self.max_loaded} is below --max-running {self.max_running}: each "
                             "request sampled needs its model loaded")
        for option, value in (("--max-job-seconds", self.job_seconds), ("--upload-timeout", self.upload_seconds)):
            if not value > 0:
                raise InputError(f"{option} must be positive, got {value:g}")

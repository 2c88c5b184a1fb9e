"""Sampling requests: one at a time per model, the others queued in order; progress, results and errors kept
for the page to poll. A request that fails records its message; the server goes on."""

from __future__ import annotations

import io
import json
import secrets
import sys
import threading
import time
import traceback
import zipfile
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from put.errors import PutError, describe
from put.inpaint import InpaintSettings, inpaint_tensors
from put.models.put_model import paste_known
from put.serve.catalog import ModelEntry
from put.serve.store import StoredMask, UnknownId, image_png, mask_png

KEEP_JOBS = 64  # finished requests kept for the page (the oldest forgotten first)


class QueueFull(RuntimeError):
    pass


@dataclass
class Job:
    id: str
    model: ModelEntry
    mask: StoredMask
    settings: InpaintSettings
    state: str = "queued"  # queued | running | done | failed
    done: int = 0          # forward passes done of `total`
    total: int = 0
    error: str = ""
    created: float = field(default_factory=time.monotonic)
    started: float | None = None
    load_seconds: float | None = None
    sample_seconds: float | None = None
    results: list[bytes] = field(default_factory=list)  # PNGs, known pixels pasted back
    raw: list[bytes] = field(default_factory=list)      # PNGs, the decoder's output everywhere

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")

    @property
    def stem(self) -> str:
        return self.mask.image.stem

    def describe(self, position: int) -> dict:
        return {"id": self.id, "model": self.model.describe(), "state": self.state, "position": position,
                "done": self.done, "total": self.total, "error": self.error, "samples": self.settings.samples,
                "seed": self.settings.seed, "mask": self.mask.id, "image": self.mask.image.id,
                "waited_seconds": None if self.started is None else self.started - self.created,
                "load_seconds": self.load_seconds, "sample_seconds": self.sample_seconds,
                "results": len(self.results), "names": [f"{self.stem}_{i:03d}.png" for i in range(len(self.results))]}


def describe_error(err: Exception) -> str:
    """The user's error as the CLI prints it; anything else as an internal error (its traceback to the log)."""
    if isinstance(err, PutError):
        return describe(err)
    traceback.print_exception(err, file=sys.stderr)
    return f"internal error ({type(err).__name__}: {err}); the server keeps running, see its log"


class Runner:
    """One worker thread per model, so each model serves one request at a time, in the order received."""

    def __init__(self, device: str, max_queued: int = 16) -> None:
        self.device = device
        self.max_queued = max_queued
        self._workers: dict[str, ThreadPoolExecutor] = {}
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()

    def submit(self, model: ModelEntry, mask: StoredMask, settings: InpaintSettings) -> Job:
        with self._lock:
            waiting = sum(1 for job in self._jobs.values() if job.model is model and job.state == "queued")
            if waiting >= self.max_queued:
                raise QueueFull(f"{model.id}: {waiting} requests are already waiting for this model; try again later")
            job = Job(secrets.token_hex(8), model, mask, settings)
            self._jobs[job.id] = job
            finished = [j.id for j in self._jobs.values() if j.finished]
            for old in finished[:max(0, len(finished) - KEEP_JOBS)]:
                del self._jobs[old]
            worker = self._workers.setdefault(model.id, ThreadPoolExecutor(1, thread_name_prefix=f"put-{model.id}"))
        worker.submit(self._run, job)
        return job

    def job(self, job_id: str) -> Job:
        with self._lock:
            if job_id not in self._jobs:
                raise UnknownId(f"request {job_id!r} is not (or no longer) on the server")
            return self._jobs[job_id]

    def position(self, job: Job) -> int:
        """How many requests for the same model run or wait before this one."""
        with self._lock:
            return sum(1 for other in self._jobs.values() if other.model is job.model and not other.finished
                       and other.created < job.created)

    def _run(self, job: Job) -> None:
        job.started = time.monotonic()
        job.state = "running"
        try:
            model = job.model.load(self.device)
            job.load_seconds = time.monotonic() - job.started
            image = job.mask.image
            start = time.monotonic()
            raw = inpaint_tensors(model, image.pixels, job.mask.keep, job.settings, str(image.name), self._progress(job))
            job.sample_seconds = time.monotonic() - start
            job.raw = [image_png(r) for r in raw]
            job.results = [image_png(r) for r in paste_known(raw, job.mask.keep, image.pixels)]
            job.state = "done"
        except Exception as err:  # the request fails, the server goes on
            job.error = describe_error(err)
            job.state = "failed"

    @staticmethod
    def _progress(job: Job):
        def report(done: int, total: int) -> None:
            job.done, job.total = done, total
        return report

    def shutdown(self) -> None:
        for worker in self._workers.values():
            worker.shutdown(wait=False, cancel_futures=True)


def results_zip(jobs: list[Job]) -> bytes:
    """Each request's results (and raw/), its input, mask and settings; one folder per model when several."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for job in jobs:
            folder = f"{job.model.id}/" if len(jobs) > 1 else ""
            for i, (result, raw) in enumerate(zip(job.results, job.raw)):
                archive.writestr(f"{folder}{job.stem}_{i:03d}.png", result)
                archive.writestr(f"{folder}raw/{job.stem}_{i:03d}.png", raw)
            archive.writestr(f"{folder}input.png", image_png(job.mask.image.pixels))
            archive.writestr(f"{folder}mask.png", mask_png(job.mask.keep))
            archive.writestr(f"{folder}settings.json", json.dumps({
                "model": job.model.id, "preset": job.model.preset, "variant": job.model.variant,
                "checkpoint": str(job.model.transformer), "image": job.mask.image.name,
                **asdict(job.settings), "sample_seconds": job.sample_seconds}, indent=2))
    return buffer.getvalue()

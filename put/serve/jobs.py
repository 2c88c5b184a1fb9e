"""Sampling requests: one at a time per model, the others queued in order (a bounded queue); progress, results
and errors kept for the page to poll, the finished requests within a byte budget (the oldest forgotten first). A
request that fails records its message; the server goes on. Each model's worker thread owns its sampler."""

from __future__ import annotations

import io
import json
import math
import secrets
import sys
import threading
import time
import traceback
import zipfile
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from put.errors import PutError, ServiceError, describe
from put.models.put_model import paste_known
from put.sampling.engine import Sampler
from put.sampling.inpaint import InpaintSettings, inpaint_tensors
from put.serve.catalog import ModelEntry
from put.serve.limits import ITEM_OVERHEAD, Limits
from put.serve.store import StoredMask, UnknownId, image_png, mask_png


class QueueFull(ServiceError):
    """Too many requests wait for a model; `retry_after`: seconds until one is likely done."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


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
    def nbytes(self) -> int:
        """What a finished request keeps: its PNGs (the input it shares with the store is counted there)."""
        return sum(map(len, self.results)) + sum(map(len, self.raw)) + ITEM_OVERHEAD

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
    """One worker thread per model, so each model serves one request at a time, in the order received, with the
    sampler that thread owns; at most `limits.max_queued` requests wait per model; the finished ones are kept
    within `limits.results_bytes` (the newest always)."""

    def __init__(self, device: str, limits: Limits = Limits()) -> None:
        self.device = device
        self.max_queued, self.keep_bytes = limits.max_queued, limits.results_bytes
        self._workers: dict[str, ThreadPoolExecutor] = {}
        self._samplers: dict[str, Sampler] = {}  # model id -> the sampler of its worker thread
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()

    def submit(self, model: ModelEntry, mask: StoredMask, settings: InpaintSettings) -> Job:
        with self._lock:
            waiting = sum(1 for job in self._jobs.values() if job.model is model and job.state == "queued")
            if waiting >= self.max_queued:
                raise QueueFull(f"{model.id}: {waiting} requests are already waiting for this model; try again later",
                                self._retry_after(model))
            job = Job(secrets.token_hex(8), model, mask, settings)
            self._jobs[job.id] = job
            worker = self._workers.setdefault(model.id, ThreadPoolExecutor(1, thread_name_prefix=f"put-{model.id}"))
        worker.submit(self._run, job)
        return job

    def _retry_after(self, model: ModelEntry) -> int:
        """Seconds until the running request is likely done: the last finished one's time for this model."""
        took = [j.sample_seconds for j in self._jobs.values() if j.model is model and j.sample_seconds is not None]
        return max(1, math.ceil(took[-1])) if took else 5

    def _forget_finished(self) -> None:
        """The oldest finished requests forgotten until those kept fit `keep_bytes`; the newest always stays."""
        finished = [job for job in self._jobs.values() if job.finished]
        kept = sum(job.nbytes for job in finished)
        for job in finished[:-1]:
            if kept <= self.keep_bytes:
                break
            kept -= job.nbytes
            del self._jobs[job.id]

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
            sampler = self._samplers.get(job.model.id)
            if sampler is None or sampler.model is not model:
                sampler = self._samplers[job.model.id] = Sampler(model)
            job.load_seconds = time.monotonic() - job.started
            image = job.mask.image
            start = time.monotonic()
            raw = inpaint_tensors(model, image.pixels, job.mask.keep, job.settings, str(image.name),
                                  self._progress(job), sampler)
            job.sample_seconds = time.monotonic() - start
            job.raw = [image_png(r) for r in raw]
            job.results = [image_png(r) for r in paste_known(raw, job.mask.keep, image.pixels)]
            job.state = "done"
        except Exception as err:  # the request fails, the server goes on
            job.error = describe_error(err)
            job.state = "failed"
        with self._lock:
            self._forget_finished()

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
            archive.writestr(f"{folder}input.png", image_png(job.mask.image.rgb))
            archive.writestr(f"{folder}mask.png", mask_png(job.mask.hole))
            archive.writestr(f"{folder}settings.json", json.dumps({
                "model": job.model.id, "preset": job.model.preset, "variant": job.model.variant,
                "checkpoint": str(job.model.transformer), "image": job.mask.image.name,
                **asdict(job.settings), "sample_seconds": job.sample_seconds}, indent=2))
    return buffer.getvalue()

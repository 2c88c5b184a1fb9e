"""Sampling requests: a shared pool of workers, one request at a time per model, others in a bounded queue (a
multi-model request is queued or refused whole). Progress and results are kept for polling within a byte budget;
a request may be cancelled, and stops at its next forward pass past `limits.job_seconds`."""

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
from dataclasses import asdict, dataclass, field, replace

from put.errors import InputError, PutError, ServiceError, describe
from put.models.put_model import paste_known
from put.sampling.inpaint import InpaintSettings, inpaint_tensors
from put.serve.catalog import ModelEntry
from put.serve.limits import ITEM_OVERHEAD, Limits
from put.serve.loaded import LoadedModels
from put.serve.store import StoredMask, UnknownId, image_png, mask_png

FINISHED = ("done", "failed", "cancelled")
class QueueFull(ServiceError):
    """Too many requests wait for a model; `retry_after`: seconds until one is likely done."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class AlreadyFinished(InputError):
    """A request that cannot be cancelled: it has finished (409)."""


class Stopped(Exception):
    """Raised between forward passes to end a running request; `state`: what the request becomes."""

    def __init__(self, message: str, state: str):
        super().__init__(message)
        self.state = state


@dataclass
class Job:
    id: str
    model: ModelEntry
    mask: StoredMask
    settings: InpaintSettings
    state: str = "queued"  # queued | running | done | failed | cancelled
    done: int = 0          # forward passes done of `total`
    total: int = 0
    error: str = ""
    created: float = field(default_factory=time.monotonic)
    started: float | None = None
    load_seconds: float | None = None
    sample_seconds: float | None = None
    cancel: bool = False   # asked to stop at the next forward pass
    results: list[bytes] = field(default_factory=list)  # PNGs, known pixels pasted back
    raw: list[bytes] = field(default_factory=list)      # PNGs, the decoder's output everywhere

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

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
    """`limits.max_running` worker threads shared by all models (one per model would let eight run at once); each
    takes the oldest request whose model is idle, so a model serves one request at a time, in order. Bounded by
    `max_queued`, `max_loaded` and `results_bytes` (the newest result always kept)."""

    def __init__(self, device: str, limits: Limits = Limits(), engine: str = "auto", precision: str = "auto") -> None:
        self.device, self.limits, self.precision = device, limits, precision
        self.models = LoadedModels(device, limits.max_loaded, engine)
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._queue: list[Job] = []
        self._sampling: set[str] = set()  # ids of the models a worker is sampling
        self._stopping = False
        self._changed = threading.Condition()
        self._workers = [threading.Thread(target=self._work, name=f"put-sampler-{i}", daemon=True)
                         for i in range(limits.max_running)]
        for worker in self._workers:
            worker.start()

    def submit(self, model: ModelEntry, mask: StoredMask, settings: InpaintSettings) -> Job:
        return self.submit_all([model], mask, settings)[0]

    def submit_all(self, models: list[ModelEntry], mask: StoredMask, settings: InpaintSettings) -> list[Job]:
        """One request per model, all queued or none: a full queue refuses the whole (QueueFull), so a client
        told 429 has nothing left running for it."""
        with self._changed:
            for model in models:
                waiting = sum(1 for job in self._queue if job.model is model)
                if waiting >= self.limits.max_queued:
                    also = " (nothing was queued for the other models asked either)" if len(models) > 1 else ""
                    raise QueueFull(f"{model.id}: {waiting} requests are already waiting for this model{also}; "
                                    "try again later", self._retry_after(model))
            jobs = [Job(secrets.token_hex(8), model, mask, settings) for model in models]
            for job in jobs:
                self._jobs[job.id] = job
                self._queue.append(job)
            self._changed.notify_all()
        return jobs

    def cancel(self, job_id: str) -> Job:
        """A queued request is removed (then unknown: 404); a running one stops at its next forward pass (state
        cancelled); a finished one cannot be: AlreadyFinished (409)."""
        with self._changed:
            job = self._get(job_id)
            if job.state == "queued":
                self._queue.remove(job)
                del self._jobs[job.id]
                job.state = "cancelled"
            elif job.state == "running":
                job.cancel = True
            else:
                raise AlreadyFinished(f"request {job_id} has already finished ({job.state}): nothing to cancel")
            return job

    def _retry_after(self, model: ModelEntry) -> int:
        """Seconds until the running request is likely done: the last finished one's time for this model."""
        took = [j.sample_seconds for j in self._jobs.values() if j.model is model and j.sample_seconds is not None]
        return max(1, math.ceil(took[-1])) if took else 5

    def _forget_finished(self) -> None:
        """The oldest finished requests forgotten until those kept fit `results_bytes`; the newest always stays."""
        finished = [job for job in self._jobs.values() if job.finished]
        kept = sum(job.nbytes for job in finished)
        for job in finished[:-1]:
            if kept <= self.limits.results_bytes:
                break
            kept -= job.nbytes
            del self._jobs[job.id]

    def _get(self, job_id: str) -> Job:
        if job_id not in self._jobs:
            raise UnknownId(f"request {job_id!r} is not (or no longer) on the server")
        return self._jobs[job_id]

    def job(self, job_id: str) -> Job:
        with self._changed:
            return self._get(job_id)

    def position(self, job: Job) -> int:
        """How many requests for the same model run or wait before this one."""
        with self._changed:
            return sum(1 for other in self._jobs.values() if other.model is job.model and not other.finished
                       and other.created < job.created)

    def _next(self) -> Job | None:
        return next((job for job in self._queue if job.model.id not in self._sampling), None)

    def _work(self) -> None:
        while True:
            with self._changed:
                while (job := self._next()) is None:
                    if self._stopping:
                        return
                    self._changed.wait()
                self._queue.remove(job)
                self._sampling.add(job.model.id)
                job.started, job.state = time.monotonic(), "running"
            try:
                self._run(job)
            finally:
                with self._changed:
                    self._sampling.discard(job.model.id)
                    self._forget_finished()
                    self._changed.notify_all()

    def _run(self, job: Job) -> None:
        try:
            with self.models.use(job.model) as (model, sampler):
                job.load_seconds = time.monotonic() - job.started
                self._check(job)  # cancelled, or out of time, while the model loaded
                image = job.mask.image
                start = time.monotonic()
                settings = replace(job.settings, precision=self.precision)  # the server's, for every request
                raw = inpaint_tensors(model, image.pixels, job.mask.keep, settings, str(image.name),
                                      self._progress(job), sampler)
                job.sample_seconds = time.monotonic() - start
            job.raw = [image_png(r) for r in raw]
            job.results = [image_png(r) for r in paste_known(raw, job.mask.keep, image.pixels)]
            job.state = "done"
        except Stopped as stop:
            job.error, job.state = str(stop), stop.state
        except Exception as err:  # the request fails, the server goes on
            job.error = describe_error(err)
            job.state = "failed"

    def _check(self, job: Job) -> None:
        where = f"after {job.done} of {job.total} forward passes" if job.total else "before sampling"
        if job.cancel:
            raise Stopped(f"cancelled {where}", "cancelled")
        if time.monotonic() - job.started > self.limits.job_seconds:
            raise Stopped(f"timed out: stopped {where}, past the {self.limits.job_seconds:g} s one request may take "
                          "(put serve --max-job-seconds)", "failed")

    def _progress(self, job: Job):
        def report(done: int, total: int) -> None:
            job.done, job.total = done, total
            self._check(job)
        return report

    def shutdown(self, wait_s: float = 30) -> None:
        """The queue dropped, the running requests stopped at their next forward pass, the workers ended."""
        with self._changed:
            self._stopping = True
            self._queue.clear()
            for job in self._jobs.values():
                job.cancel = True
            self._changed.notify_all()
        for worker in self._workers:
            worker.join(wait_s)


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

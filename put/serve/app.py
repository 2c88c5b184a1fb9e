"""The web app: the page (static files shipped in this package, nothing fetched from elsewhere) and a small JSON
API over the store, the catalogue and the runner, within the server's limits (put/serve/limits.py). Every error is
a response with one clear message: the package's own errors a 4xx, a refusal for load a 429 with Retry-After."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from importlib import resources
from typing import Literal
from urllib.parse import unquote

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.middleware.trustedhost import TrustedHostMiddleware

from put.data.images import ImageTooLargeError
from put.errors import PutError, describe
from put.masks.io import POLARITIES
from put.sampling.inpaint import InpaintSettings
from put.sampling.schedules import SamplingOptions
from put.serve.auth import LOOPBACK, RequireToken
from put.serve.catalog import ModelEntry
from put.serve.jobs import AlreadyFinished, QueueFull, Runner, results_zip
from put.serve.limits import Limits, MiB, attention_cost, tokens
from put.serve.store import Store, UnknownId, image_png, mask_png

STATIC = resources.files("put.serve") / "static"
UPLOAD_TYPE = "application/octet-stream"  # not a type a cross-site form can send without the browser asking first
DRAIN_BYTES = 64 * MiB  # an oversized upload up to this size is read and dropped before its 413 (read_upload)
BUSY_RETRY_S = 1  # Retry-After of a request refused because `parallel_work` requests are being served


class RunRequest(BaseModel):
    """One sampling request, for one model or several ("compare variants": same hole, same seed)."""
    model_config = ConfigDict(extra="forbid")

    mask: str
    models: list[str] = Field(min_length=1)
    samples: int = Field(4, ge=1)
    top_k: int = Field(SamplingOptions.top_k, ge=1)
    temperature: float = Field(SamplingOptions.temperature, gt=0)
    tokens_per_step: int = Field(SamplingOptions.tokens_per_step, ge=1)
    steps: int | None = Field(None, ge=1, description="cosine schedule over this many steps (replaces tokens_per_step)")
    position_rule: Literal["logit", "prob"] = SamplingOptions.position_rule
    deterministic: bool = False
    seed: int = Field(0, ge=0, lt=2**63)


class TestImageRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    preset: str
    index: int = Field(ge=0)


def validation_message(err: RequestValidationError) -> str:
    """One line naming each bad field; a body that is not JSON at all is said so, with where it breaks."""
    def one(e: dict) -> str:
        if e["type"] == "json_invalid":  # loc: ("body", the character where decoding failed)
            return (f"the request body is not valid JSON ({e.get('ctx', {}).get('error', 'unreadable')}, at "
                    f"character {e['loc'][-1]})")
        return f"{'.'.join(str(part) for part in e['loc'][1:]) or 'request'}: {e['msg']}"

    return "; ".join(one(e) for e in err.errors())


def create_app(models: dict[str, ModelEntry], test_images: dict, runner: Runner, host: str = "127.0.0.1",
               limits: Limits = Limits(), token: str | None = None) -> FastAPI:
    """The app; `token`: the one every request must carry (put/serve/auth.py), None for none."""
    app = FastAPI(title="PUT inpainting", docs_url=None, redoc_url=None, openapi_url=None)
    if token is not None:
        app.add_middleware(RequireToken, token=token)
    if host in LOOPBACK:  # a page elsewhere cannot reach this server by a name that resolves here (DNS rebinding)
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost", "[::1]"])
    store = Store(limits.store_bytes, limits.max_pixels)
    work = threading.BoundedSemaphore(limits.parallel_work)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": validation_message(err)}, status_code=422)

    @app.exception_handler(PutError)
    async def user_error(request: Request, err: PutError) -> JSONResponse:
        """The package's own errors: 404 for an id it does not hold, 409 to cancel a finished request, 413 for
        an image over the pixel limit, 429 (with Retry-After) for a full queue, 400 for the rest (unreadable image,
        mask of another size, ...)."""
        if isinstance(err, UnknownId):
            return JSONResponse({"detail": describe(err)}, status_code=404)
        if isinstance(err, AlreadyFinished):
            return JSONResponse({"detail": describe(err)}, status_code=409)
        if isinstance(err, ImageTooLargeError):
            return JSONResponse({"detail": f"{err} (put serve --max-pixels)"}, status_code=413)
        if isinstance(err, QueueFull):
            return JSONResponse({"detail": describe(err)}, status_code=429,
                                headers={"Retry-After": str(err.retry_after)})
        return JSONResponse({"detail": describe(err)}, status_code=400)

    @contextmanager
    def working() -> Iterator[None]:
        """One of the `parallel_work` slots for memory-heavy work (an upload read and decoded, a PNG or a zip
        made), or 429: the memory such work takes is bounded by the slots. (A body left unread by a refusal is
        read and dropped by the HTTP server, which keeps the connection.)"""
        if not work.acquire(blocking=False):
            raise HTTPException(429, f"the server is busy ({limits.parallel_work} uploads or downloads at once); "
                                     "try again", headers={"Retry-After": str(BUSY_RETRY_S)})
        try:
            yield
        finally:
            work.release()

    async def read_upload(request: Request) -> tuple[bytes, str]:
        too_large = HTTPException(413, f"upload refused: larger than {limits.max_upload_bytes / MiB:g} MiB "
                                       "(put serve --max-upload-mb)")
        if request.headers.get("content-type", "").split(";")[0].strip() != UPLOAD_TYPE:
            raise HTTPException(415, f"uploads are sent as {UPLOAD_TYPE}")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max(limits.max_upload_bytes, DRAIN_BYTES):
            raise too_large
        # Past the limit the body is drained (up to DRAIN_BYTES), not kept, so that a client that sends it all
        # before reading (urllib, curl) gets the 413, not a broken pipe. `upload_seconds` bounds a stalled client.
        data, received = bytearray(), 0
        chunks = request.stream().__aiter__()
        deadline = asyncio.get_running_loop().time() + limits.upload_seconds
        while True:
            try:
                chunk = await asyncio.wait_for(chunks.__anext__(), deadline - asyncio.get_running_loop().time())
            except StopAsyncIteration:
                break
            except TimeoutError:
                raise HTTPException(408, f"upload refused: its body took longer than {limits.upload_seconds:g} s "
                                         "(put serve --upload-timeout)", headers={"Connection": "close"}) from None
            received += len(chunk)
            if received > max(limits.max_upload_bytes, DRAIN_BYTES):
                raise too_large
            if received <= limits.max_upload_bytes:
                data += chunk
        if received > limits.max_upload_bytes:
            raise too_large
        return bytes(data), unquote(request.headers.get("x-filename", "upload"))

    def model(model_id: str) -> ModelEntry:
        if model_id not in models:
            raise HTTPException(404, f"no model {model_id!r} on this server")
        if models[model_id].problem:
            raise HTTPException(409, models[model_id].problem)
        return models[model_id]

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/api/info")
    def info() -> dict:
        return {"models": [{**entry.describe(), **runner.models.describe(entry.id)} for entry in models.values()],
                "test_images": {preset: [p.name for p in paths] for preset, paths in test_images.items()},
                "polarities": list(POLARITIES), "limits": asdict(limits),
                "defaults": RunRequest.model_construct(mask="", models=[]).model_dump(exclude={"mask", "models"})}

    @app.post("/api/images")
    async def upload_image(request: Request) -> dict:
        with working():
            data, name = await read_upload(request)
            return (await run_in_threadpool(store.add_image, data, name)).describe()

    @app.post("/api/images/test")
    def test_image(request: TestImageRequest) -> dict:
        images = test_images.get(request.preset, [])
        if request.index >= len(images):
            raise HTTPException(404, f"preset {request.preset!r} has no test image {request.index} on this server")
        path = images[request.index]
        with working():
            return store.add_image(path, path.name).describe()

    @app.get("/api/images/{image_id}")
    def image(image_id: str) -> Response:
        found = store.image(image_id)
        with working():
            return Response(image_png(found.rgb), media_type="image/png")

    @app.post("/api/masks")
    async def upload_mask(request: Request, image: str, polarity: Literal["hole-white", "keep-white"]) -> dict:
        found = store.image(image)
        with working():
            data, name = await read_upload(request)
            mask = await run_in_threadpool(store.add_mask, found, data, name, polarity)
        return {"id": mask.id, "image": image}

    @app.get("/api/masks/{mask_id}")
    def mask(mask_id: str) -> Response:
        return Response(mask_png(store.mask(mask_id).hole), media_type="image/png")

    @app.post("/api/jobs")
    def run(request: RunRequest) -> dict:
        if request.samples > limits.max_samples:
            raise HTTPException(422, f"samples: at most {limits.max_samples} per request (put serve --max-samples)")
        if len(request.models) > limits.max_compared:
            raise HTTPException(422, f"models: at most {limits.max_compared} compared at once")
        entries = [model(model_id) for model_id in dict.fromkeys(request.models)]
        mask = store.mask(request.mask)
        height, width = mask.hole.shape
        if width * height * request.samples > limits.max_job_pixels:
            raise HTTPException(422, f"samples: {request.samples} samples of a {width}x{height} image are "
                                     f"{width * height * request.samples:,} pixels, more than the "
                                     f"{limits.max_job_pixels:,} one request samples at most (put serve "
                                     "--max-job-pixels)")
        for entry in entries:  # attention compares every token with every other: the cost is quadratic
            cost = attention_cost(width, height, request.samples, entry.patch)
            if cost > limits.max_job_attention:
                raise HTTPException(422, f"samples: {request.samples} samples of a {width}x{height} image "
                                         f"({tokens(width, height, entry.patch):,} tokens) cost {cost:,} in "
                                         f"attention (samples x tokens²), more than the {limits.max_job_attention:,}"
                                         " one request may (put serve --max-job-attention)")
        settings = InpaintSettings(
            samples=request.samples, seed=request.seed, deterministic=request.deterministic, pad=True,
            options=SamplingOptions(top_k=request.top_k, temperature=request.temperature,
                                    tokens_per_step=request.tokens_per_step, steps=request.steps,
                                    position_rule=request.position_rule))
        return {"jobs": [job.id for job in runner.submit_all(entries, mask, settings)]}

    @app.get("/api/jobs/{job_id}")
    def job(job_id: str) -> dict:
        found = runner.job(job_id)
        return found.describe(runner.position(found))

    @app.delete("/api/jobs/{job_id}")
    def cancel(job_id: str) -> JSONResponse:
        """Queued: removed (200, then 404); running: stopped at its next forward pass (202, then state
        cancelled); finished: 409; unknown or forgotten: 404."""
        found = runner.cancel(job_id)
        return JSONResponse({"id": found.id, "state": found.state}, status_code=200 if found.finished else 202)

    @app.get("/api/jobs/{job_id}/results/{index}")
    def result(job_id: str, index: int, raw: bool = False) -> Response:
        found = runner.job(job_id)
        pngs = found.raw if raw else found.results
        if not 0 <= index < len(pngs):
            raise HTTPException(404, f"request {job_id} has no result {index}")
        return Response(pngs[index], media_type="image/png")

    @app.get("/api/zip")
    def zip_results(jobs: list[str] = Query(min_length=1)) -> Response:
        if len(jobs) > limits.max_compared:
            raise HTTPException(422, f"jobs: at most {limits.max_compared} requests in one zip")
        found = [runner.job(job_id) for job_id in jobs]
        if not all(j.state == "done" for j in found):
            raise HTTPException(409, "results are zipped once every request is done")
        with working():
            return Response(results_zip(found), media_type="application/zip",
                            headers={"Content-Disposition": 'attachment; filename="put_results.zip"'})

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    return app

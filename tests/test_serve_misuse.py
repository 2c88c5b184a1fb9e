"""`put serve` under misuse (issue 36): a request to several models queued whole or refused whole, a bound on the
models loaded and on the requests sampled at once, attention's quadratic cost in the job budget, a time limit and
cancellation, a read timeout on upload bodies, a failed graph capture reported and retried, and the token a server
beyond the loopback requires. The app runs in this process (uvicorn on a free loopback port, in a thread) on tiny
random-weight models, except for the token's end-to-end test, which starts `put serve` as a user would."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TINY
from tests.serving import photo, png, save_tiny_run, start_serve, wait_for


@pytest.fixture(scope="module")
def tiny_model():
    from put.models.put_model import PUTModel

    return PUTModel(TINY).eval()


def entry(name: str, model, gate: threading.Event | None = None, loads: list | None = None):
    """A catalogue entry whose load returns `model` (after `gate` opens), kept and unloaded as a real one is."""
    from put.serve.catalog import ModelEntry

    found = ModelEntry(name, Path("t.pt"), "tiny", "put", False)

    def load(device: str):
        if gate is not None:
            assert gate.wait(30)
        if found._model is None and loads is not None:
            loads.append(name)
        found._model = model
        return model

    found.load = load
    return found


def slowed(model, seconds: float):
    """The model with each forward pass of its transformer taking at least `seconds`."""
    import copy

    slow = copy.deepcopy(model)
    forward = slow.transformer.forward_embedded  # what each step of the iterative sampler calls

    def slow_forward(*args, **kwargs):
        time.sleep(seconds)
        return forward(*args, **kwargs)

    slow.transformer.forward_embedded = slow_forward
    return slow


@contextmanager
def serving(app) -> Iterator[str]:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)


def call(url: str, method: str = "GET", body: bytes | None = None, headers: dict | None = None):
    req = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, decoded(response), response.headers
    except urllib.error.HTTPError as err:
        return err.code, decoded(err), err.headers


def decoded(response) -> dict | bytes:
    """A JSON answer as data, any other as its bytes."""
    body = response.read()
    return json.loads(body) if response.headers.get("Content-Type", "").startswith("application/json") else body


def app_for(models: dict, runner, **kwargs):
    from put.serve.app import create_app

    return create_app(models, {}, runner, **kwargs)


def upload_mask(url: str, width: int = 32, height: int = 32) -> str:
    kind = {"Content-Type": "application/octet-stream"}
    _, image, _ = call(f"{url}/api/images", "POST", png(photo(width, height)), kind)
    hole = np.zeros((height, width), np.uint8)
    hole[4:height - 4, 4:width - 4] = 255
    _, mask, _ = call(f"{url}/api/masks?image={image['id']}&polarity=hole-white", "POST", png(hole), kind)
    return mask["id"]


def post_job(url: str, mask: str, models: list[str], **settings) -> tuple[int, dict]:
    status, body, _ = call(f"{url}/api/jobs", "POST", json.dumps({"mask": mask, "models": models, **settings}).encode(),
                           {"Content-Type": "application/json"})
    return status, body


# ---------------------------------------------------------------- 1. several models: all queued or none

def test_a_request_to_several_models_is_queued_whole_or_refused_whole(tiny_model):
    from put.serve.jobs import Runner
    from put.serve.limits import Limits

    gate = threading.Event()
    models = {"a": entry("a", tiny_model), "b": entry("b", tiny_model, gate)}
    runner = Runner("cpu", Limits(max_queued=1))
    with serving(app_for(models, runner)) as url:
        mask = upload_mask(url)
        first = runner.submit(models["b"], stored_mask(), settings())
        wait_for(lambda: first.state == "running")
        runner.submit(models["b"], first.mask, settings())  # b's queue is now full
        jobs_before = len(runner._jobs)
        status, body = post_job(url, mask, ["a", "b"], samples=1)
        assert len(runner._jobs) == jobs_before  # nothing queued for a, nothing left running for the client
        assert status == 429 and body["detail"] == ("b: 1 requests are already waiting for this model (nothing was "
                                                     "queued for the other models asked either); try again later")
        gate.set()
        wait_for(lambda: not runner._queue and not runner._sampling)
        status, body = post_job(url, mask, ["a", "b"], samples=1)
        assert status == 200 and len(body["jobs"]) == 2
    runner.shutdown()


def stored_mask(size: int = 32):
    """A mask made outside the app, for submitting to the runner directly (it reads only the pixels)."""
    from put.serve.store import Store

    store = Store(2**20, size * size)
    image = store.add_image(png(photo(size, size)), "a.png")
    hole = np.zeros((size, size), np.uint8)
    hole[4:size - 4, 4:size - 4] = 255
    return store.add_mask(image, png(hole), "m.png", "hole-white")


def settings(**kwargs):
    from put.sampling.inpaint import InpaintSettings

    return InpaintSettings(samples=1, pad=True, **kwargs)


# ---------------------------------------------------------------- 2. models loaded, and samplings at once, bounded

def test_models_beyond_max_models_are_unloaded_least_recently_used_first(tiny_model):
    from put.serve.jobs import Runner
    from put.serve.limits import Limits

    loads = []
    models = {name: entry(name, tiny_model, loads=loads) for name in "abcd"}
    runner = Runner("cpu", Limits(max_loaded=2, max_running=1))

    def run(name: str) -> None:
        job = runner.submit(models[name], stored_mask(), settings(options=few_steps()))
        wait_for(lambda: job.finished)
        assert job.state == "done", job.error

    for name in "abcb":
        run(name)
    assert runner.models.loaded == ["c", "b"]  # a went when c came; b used since
    assert models["a"]._model is None and models["c"]._model is not None
    run("d")
    assert runner.models.loaded == ["b", "d"] and models["c"]._model is None  # c was the least recently used
    assert loads == ["a", "b", "c", "d"]  # b stayed loaded
    runner.shutdown()


def test_requests_of_all_models_share_one_bounded_pool_of_workers(tiny_model):
    from put.serve.jobs import Runner
    from put.serve.limits import Limits

    gate = threading.Event()
    models = [entry(name, tiny_model, gate) for name in "abcd"]
    runner = Runner("cpu", Limits(max_running=2, max_loaded=4))
    jobs = [runner.submit(model, stored_mask(), settings(options=few_steps())) for model in models]
    wait_for(lambda: sum(job.state == "running" for job in jobs) >= 2)
    time.sleep(0.3)  # a worker per model would have started the other two by now
    assert [job.state for job in jobs] == ["running", "running", "queued", "queued"]
    gate.set()
    wait_for(lambda: all(job.finished for job in jobs))
    assert [job.state for job in jobs] == ["done"] * 4
    runner.shutdown()


def few_steps():
    from put.sampling.schedules import SamplingOptions

    return SamplingOptions(steps=2)


# ---------------------------------------------------------------- 3. attention's quadratic cost in the job budget

def test_the_job_budget_counts_attention_quadratic_in_tokens(tiny_model):
    from put.serve.jobs import Runner
    from put.serve.limits import Limits, attention_cost

    # 96x92 pads to 96x96, 144 tokens: 4 samples cost 82,944; 100x100 pads to 104x104, 169 tokens: 3 samples
    # are 30,000 pixels (within --max-job-pixels) but cost 85,683
    limits = Limits(max_pixels=10_000, max_job_pixels=40_000, max_job_attention=83_000, store_bytes=2**20)
    assert attention_cost(96, 92, 4) == 82_944 and attention_cost(100, 100, 3) == 85_683
    runner = Runner("cpu", limits)
    with serving(app_for({"a": entry("a", tiny_model)}, runner, limits=limits)) as url:
        status, body = post_job(url, upload_mask(url, 100, 100), ["a"], samples=3)
        assert status == 422 and body["detail"] == (
            "samples: 3 samples of a 100x100 image (169 tokens) cost 85,683 in attention (samples x tokens²), more "
            "than the 83,000 one request may (put serve --max-job-attention)")
        status, body = post_job(url, upload_mask(url, 96, 92), ["a"], samples=4, steps=1)
        assert status == 200
    runner.shutdown()


# ---------------------------------------------------------------- 4. a time limit per request, and cancelling

def test_a_request_past_its_time_limit_is_stopped_at_its_next_forward_pass(tiny_model):
    from put.serve.jobs import Runner
    from put.serve.limits import Limits

    runner = Runner("cpu", Limits(job_seconds=0.5))
    job = runner.submit(entry("slow", slowed(tiny_model, 0.1)), stored_mask(), settings())  # 16 passes: 1.6 s
    wait_for(lambda: job.finished)
    assert job.state == "failed" and job.error.startswith("timed out: stopped after ")
    assert job.error.endswith("forward passes, past the 0.5 s one request may take (put serve --max-job-seconds)")
    assert 0 < job.done < job.total == 16
    runner.shutdown()


def test_delete_cancels_a_queued_or_running_request_and_refuses_a_finished_one(tiny_model):
    from put.serve.jobs import Runner

    runner = Runner("cpu")
    with serving(app_for({"slow": entry("slow", slowed(tiny_model, 0.1))}, runner)) as url:
        mask = upload_mask(url)
        _, running = post_job(url, mask, ["slow"], samples=1)
        _, queued = post_job(url, mask, ["slow"], samples=1)
        running, queued = running["jobs"][0], queued["jobs"][0]
        wait_for(lambda: runner.job(running).state == "running" and runner.job(running).done > 0)

        status, body, _ = call(f"{url}/api/jobs/{queued}", "DELETE")
        assert status == 200 and body == {"id": queued, "state": "cancelled"}
        assert call(f"{url}/api/jobs/{queued}")[0] == 404  # removed

        status, body, _ = call(f"{url}/api/jobs/{running}", "DELETE")
        assert status == 202 and body == {"id": running, "state": "running"}
        wait_for(lambda: runner.job(running).finished)
        status, body, _ = call(f"{url}/api/jobs/{running}")
        assert body["state"] == "cancelled" and body["error"].startswith("cancelled after ")
        assert body["done"] < body["total"] == 16  # stopped, not run to its end

        status, body, _ = call(f"{url}/api/jobs/{running}", "DELETE")
        assert status == 409
        assert body["detail"] == f"request {running} has already finished (cancelled): nothing to cancel"
        assert call(f"{url}/api/jobs/feedfeedfeedfeed", "DELETE")[0] == 404
    runner.shutdown()


# ---------------------------------------------------------------- 5. a read timeout on upload bodies

def test_a_stalled_upload_is_answered_408_and_frees_its_work_slot(tiny_model):
    from put.serve.jobs import Runner
    from put.serve.limits import Limits

    limits = Limits(upload_seconds=1, parallel_work=1)
    runner = Runner("cpu", limits)
    with serving(app_for({}, runner, limits=limits)) as url:
        port = int(url.rsplit(":", 1)[1])
        stalled = socket.create_connection(("127.0.0.1", port), timeout=10)
        stalled.sendall(b"POST /api/images HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
                        b"Content-Length: 100000\r\n\r\n" + bytes(100))  # then nothing more
        time.sleep(0.3)
        kind = {"Content-Type": "application/octet-stream"}
        status, body, _ = call(f"{url}/api/images", "POST", png(photo(16, 16)), kind)
        assert status == 429  # the one work slot is held by the stalled upload ...
        began = time.monotonic()
        answer = b""
        while chunk := stalled.recv(4096):  # until the server closes the connection
            answer += chunk
        answer = answer.decode()
        assert answer.startswith("HTTP/1.1 408") and time.monotonic() - began < 5  # ... for at most 1 s
        assert "upload refused: its body took longer than 1 s (put serve --upload-timeout)" in answer
        stalled.close()
        assert call(f"{url}/api/images", "POST", png(photo(16, 16)), kind)[0] == 200  # and then freed
    runner.shutdown()


# ---------------------------------------------------------------- 6. a failed capture: reported, retried

def test_a_failed_capture_is_reported_in_info_and_retried_on_the_next_request(tiny_model, monkeypatch):
    from put.sampling.engine import SamplingEngine
    from put.serve.jobs import Runner

    captures = []
    real_capture = SamplingEngine.capture

    def capture(self) -> None:
        captures.append(1)
        if len(captures) == 1:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        real_capture(self)

    monkeypatch.setattr(SamplingEngine, "capture", capture)
    runner = Runner("cpu", engine="graph")  # the graph engine's buffers and step, on CPU without a CUDA graph
    with serving(app_for({"a": entry("a", tiny_model)}, runner)) as url:
        mask = upload_mask(url)

        def sampled() -> dict:
            _, body = post_job(url, mask, ["a"], samples=1, steps=2)
            wait_for(lambda: runner.job(body["jobs"][0]).finished)
            assert runner.job(body["jobs"][0]).state == "done"
            return call(f"{url}/api/info")[1]["models"][0]

        assert call(f"{url}/api/info")[1]["models"][0]["sampler"] is None
        first = sampled()
        assert first["loaded"] and first["sampler"] == "eager"
        assert first["why"] == ("the graph engine failed on the last request (RuntimeError: CUDA error: operation not "
                                "permitted when stream is capturing); the next request tries it again")
        second = sampled()
        assert len(captures) > 1 and second["sampler"] == "graph"  # retried, and now captured
    runner.shutdown()


# ---------------------------------------------------------------- 7. a token beyond the loopback

def test_beyond_the_loopback_every_request_needs_the_token(tiny_model):
    from put.serve.jobs import Runner

    runner = Runner("cpu")
    with serving(app_for({"a": entry("a", tiny_model)}, runner, host="0.0.0.0", token="s3cret")) as url:
        for path in ("/", "/api/info", "/static/app.js", "/api/jobs/feedfeedfeedfeed"):
            status, body, headers = call(url + path)
            assert status == 401 and headers["WWW-Authenticate"] == "Bearer", path
            assert body["detail"].startswith("this server requires its token")
            assert call(url + path, headers={"Authorization": "Bearer wrong"})[0] == 401
        assert call(f"{url}/api/info?token=wrong")[0] == 401
        assert call(f"{url}/api/info", headers={"Authorization": "Bearer s3cret"})[0] == 200
        with urllib.request.urlopen(f"{url}/?token=s3cret", timeout=30) as page:  # the printed link
            assert page.status == 200 and b"<html" in page.read().lower()
            cookie = page.headers["Set-Cookie"]
        assert cookie.startswith("put_token=s3cret;") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert call(f"{url}/api/info", headers={"Cookie": cookie.split(";")[0]})[0] == 200  # the page's own calls
        assert call(f"{url}/api/info", headers={"Cookie": "put_token=wrong"})[0] == 401
    runner.shutdown()


def test_the_token_is_required_beyond_the_loopback_only_and_never_empty(capsys):
    from put.cli import main
    from put.serve.auth import resolve_token

    assert resolve_token("127.0.0.1", None) is None and resolve_token("localhost", None) is None
    assert resolve_token("127.0.0.1", "mine") == "mine"  # asked for: required on the loopback too
    made = resolve_token("0.0.0.0", None)
    assert len(made) >= 32 and made != resolve_token("0.0.0.0", None)
    assert main(["serve", "--token", "", "--port", "0"]) == 2
    assert capsys.readouterr().err.startswith("put serve: error: --token: empty; give a token, or leave --token out")


def test_put_serve_beyond_the_loopback_prints_a_link_with_its_token(tmp_path):
    """`put serve --host 127.0.0.2` (not the loopback address the token-free names stand for, yet local):
    the link it prints opens the page and sets the cookie; without the token, 401."""
    save_tiny_run(tmp_path / "runs" / "tiny" / "put", "put", 0)
    command = [sys.executable, "-m", "put", "serve", "--runs", "runs", "--host", "127.0.0.2", "--port", "0",
               "--device", "cpu"]
    process, line, _ = start_serve(command, tmp_path)  # ends only once it has printed its link, or stopped
    try:
        link = line.split()[2]
        base, token = link.split("/?token=")
        assert base.startswith("http://127.0.0.2:") and len(token) >= 32
        assert call(f"{base}/api/info")[0] == 401
        with urllib.request.urlopen(link, timeout=30) as page:
            cookie = page.headers["Set-Cookie"].split(";")[0]
        status, info, _ = call(f"{base}/api/info", headers={"Cookie": cookie})
        assert status == 200 and info["models"][0]["id"] == "tiny/put"
    finally:
        process.terminate()
        process.wait(timeout=30)

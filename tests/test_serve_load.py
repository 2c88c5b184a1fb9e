"""`put serve` under load on the loopback (127.0.0.1, a free port): 32 concurrent clients send a few hundred
requests that mix uploads, sampling requests (to one model or two compared), polls and downloads with hostile
ones (a 12000x12000 image, a decompression-bomb header, a truncated file, too many bytes, masks of the wrong size,
too many pixels x samples, unknown ids). No answer is a 5xx; every refusal is a 4xx with one message (429s with
Retry-After); the server's peak memory (VmHWM of its process) stays within a stated bound above its warm size;
afterwards it still serves.
Then models beyond --max-models are loaded one after another: the server's memory stays that of --max-models
loaded models. The figures (statuses, peak memory, p50/p99 latencies of the small requests, memory as models are
loaded) are printed, and written as a benchmark row when PUT_SERVE_LOAD_REPORT names a file:
    PUT_SERVE_LOAD_REPORT=reports/benchmarks/serve_load_cpu.json .venv/bin/python -m pytest -q -m slow \
        tests/test_serve_load.py -s
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from email.message import Message
from pathlib import Path

import numpy as np
import pytest

from tests.image_files import bomb_png
from tests.serving import blank_png, photo, png, post_json, request, save_tiny_run, start_serve

pytestmark = pytest.mark.slow

CLIENTS = 32
REQUESTS = 600
DEADLINE_S = 300      # the whole mix, then the queue drained
MiB = 2**20
# The server's limits here: small, so that the budgets are reached many times over during the run (the store
# holds some 20 of the test's images).
LIMITS = {"--max-upload-mb": "1", "--max-pixels": str(128 * 128), "--max-job-pixels": str(4 * 128 * 128),
          "--max-samples": "8", "--max-queued": "4", "--max-store-mb": "1", "--max-results-mb": "1",
          "--max-models": "2", "--max-running": "2"}
BIG_MODELS = 6  # loaded after the mix, one after another: three times --max-models
BIG = {"n_layer": 2, "n_head": 8, "n_embd": 512}  # the tiny preset with a wider transformer: some 25 MiB of weights
# What those limits let the server hold above its warm size: uploads and results kept (1 + 1 MiB), four slots of
# work (a 1 MiB body and its decoding each), two models' queues of 4 requests and a running one each, and the
# sampler's working set, plus the allocator's and Python's slack. Decoding one 12000x12000 RGB upload would take
# 432 MB for its pixels alone.
RSS_BOUND = 128 * MiB
SMALL = ("info", "poll", "unknown")  # the requests whose latencies are reported
# Each kind of request and the answers it may get (429: the server is busy or the model's queue is full; 404: the
# image, mask or request it names was forgotten to keep within the budgets).
EXPECTED = {
    "info": {200}, "poll": {200, 404}, "unknown": {404}, "result": {200, 404},
    "upload": {200, 429}, "mask": {200, 404, 429}, "job": {200, 404, 429}, "compare": {200, 404, 429},
    "image": {200, 404, 429},
    "huge": {413, 429}, "bomb": {400, 429}, "truncated": {400, 429}, "bytes": {413, 429}, "type": {415, 429},
    "wrong_mask": {400, 404, 429}, "job_pixels": {404, 422}, "bad_json": {422},
}
REFUSED = {"huge": 413, "bomb": 400, "truncated": 400, "bytes": 413, "type": 415, "wrong_mask": 400,
           "job_pixels": 422, "bad_json": 422, "unknown": 404}
WEIGHTS = {"info": 6, "poll": 14, "unknown": 5, "result": 4, "upload": 8, "mask": 7, "job": 6, "compare": 3,
           "image": 3, "huge": 3, "bomb": 2, "truncated": 2, "bytes": 2, "type": 1, "wrong_mask": 2, "job_pixels": 2,
           "bad_json": 1}


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_load")
    for seed, variant in enumerate(("put", "no_ref")):
        save_tiny_run(root / "runs" / "tiny" / variant, variant, seed)
    for index in range(BIG_MODELS):
        save_tiny_run(root / "runs" / "tiny" / f"big_{index}", "put", 10 + index, transformer=BIG)
    command = [sys.executable, "-m", "put", "serve", "--runs", "runs", "--host", "127.0.0.1", "--port", "0",
               "--device", "cpu", *[part for item in LIMITS.items() for part in item]]
    process, line, lines = start_serve(command, root)
    threading.Thread(target=lambda: [lines.append(x) for x in process.stdout], daemon=True).start()
    yield line.split()[2].rstrip("/"), process.pid, root, lines
    process.terminate()
    process.wait(timeout=30)


def upload(url: str, data: bytes, name: str, kind: str = "application/octet-stream") -> tuple[int, bytes, Message]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": kind, "X-Filename": name})
    try:
        with urllib.request.urlopen(req, timeout=120) as response:
            return response.status, response.read(), response.headers
    except urllib.error.HTTPError as err:
        return err.code, err.read(), err.headers


def get(url: str) -> tuple[int, bytes, Message]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.status, response.read(), response.headers
    except urllib.error.HTTPError as err:
        return err.code, err.read(), err.headers


def post(url: str, payload: dict) -> tuple[int, bytes, Message]:
    return upload(url, json.dumps(payload).encode(), "", "application/json")


class Mix:
    """The ids the clients have been given so far (for masks, jobs, polls and downloads), and what each asks."""

    def __init__(self, url: str, seed: int) -> None:
        self.url, self.rng, self.lock = url, random.Random(seed), threading.Lock()
        self.images: list[str] = []
        self.masks: list[str] = []
        self.jobs: list[str] = []
        self.small_photo = png(photo(128, 120))  # 15,360 pixels: 2 samples fit --max-job-pixels, 8 do not
        hole = np.zeros((120, 128), np.uint8)
        hole[20:60, 40:100] = 255
        self.hole = png(hole)
        self.wrong_hole = png(np.pad(hole, ((0, 4), (0, 0))))
        self.huge = blank_png(12000, 12000)  # RGB, 420 KB
        self.truncated = self.small_photo[: len(self.small_photo) // 2]

    def pick(self, ids: list[str]) -> str:
        """One of the newest ids, as a user works on what they just made (older ones may be forgotten: 404)."""
        with self.lock:
            return self.rng.choice(ids[-4:]) if ids else "0000000000000000"

    def remember(self, ids: list[str], value: str) -> None:
        with self.lock:
            ids.append(value)

    def send(self, kind: str, bomb: bytes) -> tuple[int, bytes, Message]:
        url = self.url
        if kind == "info":
            return get(f"{url}/api/info")
        if kind == "poll":
            return get(f"{url}/api/jobs/{self.pick(self.jobs)}")
        if kind == "unknown":
            return get(f"{url}/api/jobs/deadbeefdeadbeef")
        if kind == "result":
            return get(f"{url}/api/jobs/{self.pick(self.jobs)}/results/0")
        if kind == "image":
            return get(f"{url}/api/images/{self.pick(self.images)}")
        if kind == "upload":
            answer = upload(f"{url}/api/images", self.small_photo, "photo.png")
            if answer[0] == 200:
                self.remember(self.images, json.loads(answer[1])["id"])
            return answer
        if kind in ("mask", "wrong_mask"):
            data = self.hole if kind == "mask" else self.wrong_hole
            answer = upload(f"{url}/api/masks?image={self.pick(self.images)}&polarity=hole-white", data, "m.png")
            if answer[0] == 200:
                self.remember(self.masks, json.loads(answer[1])["id"])
            return answer
        if kind in ("job", "compare", "job_pixels", "bad_json"):
            samples = {"job": 2, "compare": 2, "job_pixels": 8, "bad_json": 0}[kind]
            with self.lock:
                models = ["tiny/put", "tiny/no_ref"] if kind == "compare" else [self.rng.choice(["tiny/put",
                                                                                                 "tiny/no_ref"])]
            answer = post(f"{url}/api/jobs", {"mask": self.pick(self.masks), "models": models, "samples": samples,
                                              "steps": 2})
            if answer[0] == 200:
                jobs = json.loads(answer[1])["jobs"]
                assert len(jobs) == len(models), answer  # queued whole (a 429 queues none)
                for job in jobs:
                    self.remember(self.jobs, job)
            return answer
        data = {"huge": self.huge, "bomb": bomb, "truncated": self.truncated, "bytes": bytes(2 * MiB),
                "type": self.small_photo}[kind]
        return upload(f"{url}/api/images", data, f"{kind}.png", "image/png" if kind == "type" else
                      "application/octet-stream")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def test_the_server_stays_within_bounds_under_a_hostile_mix(server, tmp_path):
    url, pid, root, log = server
    mix = Mix(url, seed=0)
    bomb = bomb_png(tmp_path / "bomb.png").read_bytes()

    # warm: both models loaded, one request each done; then the size the bound is measured from
    for kind in ("upload", "mask"):
        assert mix.send(kind, bomb)[0] == 200
    for model in ("tiny/put", "tiny/no_ref"):
        status, body = post_json(f"{url}/api/jobs", {"mask": mix.masks[0], "models": [model], "samples": 2, "steps": 2})
        assert status == 200
        mix.jobs += body["jobs"]
    wait_until_idle(url, mix.jobs, time.monotonic() + 120)
    warm = status_kb(pid, "VmRSS")

    plan = random.Random(1).choices(list(WEIGHTS), weights=list(WEIGHTS.values()), k=REQUESTS)
    samples, peak = [], [warm]
    sampling = threading.Event()

    def watch() -> None:  # VmHWM is the true peak; this only shows the course
        while not sampling.is_set():
            peak.append(status_kb(pid, "VmRSS"))
            time.sleep(0.02)

    def one(kind: str) -> tuple[str, int, bytes, Message, float]:
        began = time.perf_counter()
        status, body, headers = mix.send(kind, bomb)
        return kind, status, body, headers, time.perf_counter() - began

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.monotonic()
    with ThreadPoolExecutor(CLIENTS) as clients:
        samples = list(clients.map(one, plan))
    mix_seconds = time.monotonic() - started
    wait_until_idle(url, mix.jobs, started + DEADLINE_S)
    sampling.set()
    watcher.join()
    hwm = status_kb(pid, "VmHWM")

    # every answer as expected: no 5xx, each refusal a 4xx with one message (and Retry-After when 429)
    unexpected = [(kind, status, body[:200]) for kind, status, body, _, _ in samples if status not in EXPECTED[kind]]
    assert not unexpected, unexpected
    for kind, status, body, headers, _ in samples:
        if status >= 400:
            detail = json.loads(body)["detail"]
            assert isinstance(detail, str) and detail and "\n" not in detail, (kind, status, detail)
        if status == 429:
            assert int(headers.get("Retry-After", 0)) >= 1, (kind, headers)
        if kind == "huge" and status == 413:
            assert json.loads(body)["detail"] == ("upload 'huge.png': 12000x12000 = 144,000,000 pixels, more than "
                                                  "the 16,384 decoded at most (put serve --max-pixels)")
    statuses = Counter((kind, status) for kind, status, *_ in samples)
    for kind, status in REFUSED.items():  # each refusal met: under the load, or alone if every try met a 429
        if not statuses[kind, status]:
            assert statuses[kind, 429], (kind, statuses)
            assert mix.send(kind, bomb)[0] == status, (kind, statuses)
    for kind in ("upload", "mask", "job", "compare", "poll", "result", "image"):
        assert statuses[kind, 200], (kind, statuses)
    assert "Traceback" not in "".join(log), "".join(log)[-3000:]

    # memory: within the stated bound above the warm size
    assert hwm - warm <= RSS_BOUND, f"peak {hwm / MiB:.0f} MiB, warm {warm / MiB:.0f} MiB"

    # and it still serves: a request sampled to the end
    image = json.loads(upload(f"{url}/api/images", mix.small_photo, "last.png")[1])["id"]
    mask = json.loads(upload(f"{url}/api/masks?image={image}&polarity=hole-white", mix.hole, "m.png")[1])["id"]
    status, body = post_json(f"{url}/api/jobs", {"mask": mask, "models": ["tiny/put"], "samples": 2})
    assert status == 200
    wait_until_idle(url, body["jobs"], time.monotonic() + 120)
    assert json.loads(request(f"{url}/api/jobs/{body['jobs'][0]}")[1])["state"] == "done"

    latencies = {kind: [t * 1000 for k, status, _, _, t in samples if k == kind] for kind in SMALL}
    small = [t for values in latencies.values() for t in values]
    figures = {
        "benchmark": "serve_load", "requests": REQUESTS, "clients": CLIENTS, "mix_seconds": round(mix_seconds, 1),
        "limits": LIMITS, "answers": dict(sorted(Counter(str(s) for _, s, *_ in samples).items())),
        "refusals": {f"{kind} {status}": n for (kind, status), n in sorted(statuses.items()) if status >= 400},
        "warm_rss_mib": round(warm / MiB, 1), "peak_rss_mib": round(hwm / MiB, 1),
        "rss_bound_mib": round((warm + RSS_BOUND) / MiB, 1),
        "small_requests": len(small), "small_p50_ms": round(statistics.median(small), 1),
        "small_p99_ms": round(percentile(small, 0.99), 1),
        **{f"{kind}_p50_ms": round(statistics.median(v), 1) for kind, v in latencies.items()},
        **{f"{kind}_p99_ms": round(percentile(v, 0.99), 1) for kind, v in latencies.items()},
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
    }
    print(json.dumps(figures, indent=1))
    report(figures)


def report(figures: dict) -> None:
    """Into the benchmark row of PUT_SERVE_LOAD_REPORT (if set), beside what the other test of this file wrote."""
    if not os.environ.get("PUT_SERVE_LOAD_REPORT"):
        return
    path = Path(os.environ["PUT_SERVE_LOAD_REPORT"])
    row = json.loads(path.read_text())[0] if path.is_file() else {}
    path.write_text(json.dumps([{**row, **figures}], indent=1) + "\n")


def test_models_beyond_max_models_are_unloaded_and_memory_stays_that_of_max_models(server):
    """Each of BIG_MODELS models (some 25 MiB of weights each) sampled once, one after another: from the point
    --max-models of them are loaded, the resident memory no longer grows (without the bound, it would grow by a
    model's weights each)."""
    url, pid, root, log = server
    max_models = int(LIMITS["--max-models"])
    mix = Mix(url, seed=1)
    for kind in ("upload", "mask"):
        assert mix.send(kind, b"")[0] == 200
    weights = (root / "runs" / "tiny" / "big_0" / "transformer.pt").stat().st_size
    rss = []
    for index in range(BIG_MODELS):
        status, body = post_json(f"{url}/api/jobs", {"mask": mix.masks[-1], "models": [f"tiny/big_{index}"],
                                                     "samples": 1, "steps": 1})
        assert status == 200, body
        wait_until_idle(url, body["jobs"], time.monotonic() + 120)
        assert json.loads(request(f"{url}/api/jobs/{body['jobs'][0]}")[1])["state"] == "done"
        rss.append(status_kb(pid, "VmRSS"))
    growth = rss[-1] - rss[max_models - 1]  # from max_models loaded to three times as many loaded in turn
    figures = {"models_loaded_in_turn": BIG_MODELS, "max_models": max_models,
               "model_weights_mib": round(weights / MiB, 1),
               "rss_after_each_model_mib": [round(r / MiB, 1) for r in rss],
               "rss_growth_beyond_max_models_mib": round(growth / MiB, 1)}
    print(json.dumps(figures, indent=1))
    # Unbounded, (BIG_MODELS - max_models) x weights and more: 4 x 24 MiB. Bounded, the allocator's slack of each
    # load, although the server hands freed memory back (put/serve/loaded.py, trim_heap): 10 to 31 MiB measured
    # for two models past the bound, up to 55 MiB on a loaded machine without the trim.
    assert growth <= 3 * weights, figures
    loaded = [m["id"] for m in json.loads(request(f"{url}/api/info")[1])["models"] if m["loaded"]]
    assert loaded == [f"tiny/big_{i}" for i in range(BIG_MODELS - max_models, BIG_MODELS)]
    report(figures)


def wait_until_idle(url: str, jobs: list[str], deadline: float) -> None:
    """Until every request in `jobs` the server still holds has finished (or the deadline passes: a failure)."""
    pending = list(jobs)
    while pending:
        assert time.monotonic() < deadline, f"{len(pending)} requests still unfinished"
        status, body = request(f"{url}/api/jobs/{pending[-1]}")
        if status == 404 or json.loads(body)["state"] in ("done", "failed"):
            pending.pop()
        else:
            time.sleep(0.1)

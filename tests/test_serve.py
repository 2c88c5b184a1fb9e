"""`put serve`: the page driven in headless Chromium (Debian's, through Playwright: `make browser`), its API's
refusals, and the per-model queue. One server (`put serve` as a user starts it) on tiny random-weight checkpoints
serves every test here.

The screenshot in README.md and docs/serving.md is taken by test_page_compares_variants_side_by_side:
    PUT_SERVE_SCREENSHOT=docs/serve.png .venv/bin/python -m pytest -q tests/test_serve.py
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from put.config import VARIANT_COLOURS
from tests.conftest import TINY
from tests.image_files import BOMB_MESSAGE, bomb_png
from tests.serving import blank_png, photo, png, post_json, request, save_tiny_run, start_serve, wait_for

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
VARIANTS = ("put", "no_ref")  # two variants of the preset "tiny", random weights
# a page function: the stage shows another image than `previous`
IMAGE_CHANGED = "previous => (document.getElementById('stage').dataset.image || previous) !== previous"
N = 4
# the photo (96x92 = 8,832 pixels) and N of its samples (35,328) fit; 5 samples of it do not
SERVER_LIMITS = ["--max-upload-mb", "1", "--max-pixels", "10000", "--max-job-pixels", "40000"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A working folder as `put serve` expects one: runs/tiny/<variant>/ and the preset's test images."""
    root = tmp_path_factory.mktemp("serve")
    for seed, variant in enumerate(VARIANTS):
        save_tiny_run(root / "runs" / "tiny" / variant, variant, seed)
    save_tiny_run(root / "runs" / "tiny" / "official_release", "put", 2, source="official")  # as import-official
    broken = root / "runs" / "tiny" / "broken" / "transformer.pt"
    broken.parent.mkdir()
    broken.write_bytes(b"not a checkpoint")
    gt = root / "data" / "tiny" / "masks" / "gt"
    gt.mkdir(parents=True)
    Image.fromarray(photo(32, 32)).save(gt / "test_0000.png")
    Image.fromarray(photo(96, 92)).save(root / "photo.png")
    Image.fromarray(np.zeros((92, 96), np.uint8)).save(root / "all_kept.png")
    (root / "notes.txt").write_text("not an image\n")
    return root


@pytest.fixture(scope="module")
def server(workdir):
    """`put serve` started as a user would (any free port); its URL."""
    command = [sys.executable, "-m", "put", "serve", "--runs", "runs", "--port", "0", "--device", "cpu", *SERVER_LIMITS]
    process, line, lines = start_serve(command, workdir, deadline_s=120)
    url = line.split()[2].rstrip("/")
    drain = threading.Thread(target=lambda: [lines.append(x) for x in process.stdout], daemon=True)
    drain.start()
    yield url
    process.terminate()
    process.wait(timeout=30)


def upload(url: str, data: bytes, name: str = "x.png") -> tuple[int, dict]:
    status, body = request(url, data, {"Content-Type": "application/octet-stream", "X-Filename": name})
    return status, json.loads(body)


def decoded(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


# ---------------------------------------------------------------- the API: ids only, the CLI's readers and limits

def test_every_variant_is_listed_with_its_preset_and_a_broken_one_with_why(server):
    info = json.loads(request(f"{server}/api/info")[1])
    models = {m["id"]: m for m in info["models"]}
    assert set(models) == {"tiny/put", "tiny/no_ref", "tiny/official_release", "tiny/broken"}
    assert models["tiny/no_ref"]["variant"] == "no_ref" and models["tiny/no_ref"]["preset"] == "tiny"
    assert models["tiny/official_release"]["official"] and not models["tiny/put"]["official"]
    assert models["tiny/official_release"]["label"] == "put · preset tiny · released weights (tiny/official_release)"
    assert not models["tiny/put"]["problem"]
    assert models["tiny/put"]["colour"] == VARIANT_COLOURS["put"] != models["tiny/no_ref"]["colour"]  # as in the report
    assert models["tiny/broken"]["problem"].startswith("runs/tiny/broken/transformer.pt: holds data a weights-only")
    assert info["test_images"] == {"tiny": ["test_0000.png"]}


def test_uploads_go_through_the_cli_readers_and_limits(server, workdir):
    status, body = upload(f"{server}/api/images", b"not an image", "notes.txt")
    assert status == 400 and body["detail"].startswith("upload 'notes.txt': not a readable image")
    bomb = bomb_png(workdir / "bomb" / "huge.png")
    status, body = upload(f"{server}/api/images", bomb.read_bytes(), "huge.png")
    assert status == 400 and body["detail"].startswith(f"upload 'huge.png': {BOMB_MESSAGE}")
    status, body = upload(f"{server}/api/images", b"\0" * (2 * 2**20), "big.png")  # --max-upload-mb 1
    assert status == 413 and "larger than 1 MiB" in body["detail"]
    status, _ = request(f"{server}/api/images", b"x", {"Content-Type": "text/plain"})
    assert status == 415

    status, image = upload(f"{server}/api/images", png(photo(40, 40)), "../../etc/a.png")
    assert status == 200 and image["name"] == "a.png"  # a name to print, never a path
    hole = np.zeros((40, 40), np.uint8)
    hole[8:20, 8:30] = 255
    status, body = upload(f"{server}/api/masks?image={image['id']}&polarity=keep-white", png(hole[:32]), "m.png")
    assert status == 400 and "mask is 40x32 (WxH), expected 40x40" in body["detail"]
    status, body = upload(f"{server}/api/masks?image={image['id']}&polarity=hole-white", png(hole // 2), "m.png")
    assert status == 400 and "not binary" in body["detail"]
    status, body = upload(f"{server}/api/masks?image={image['id']}&polarity=keep-white", png(hole * 0 + 255), "m.png")
    assert status == 400 and body["detail"].endswith("mask has no hole (nothing to inpaint); white was read as kept "
                                                     "(polarity keep-white): is the mask the other way round?")
    status, mask = upload(f"{server}/api/masks?image={image['id']}&polarity=keep-white", png(255 - hole), "m.png")
    assert status == 200  # keep-white: the same hole
    assert np.array_equal(decoded(request(f"{server}/api/masks/{mask['id']}")[1])[..., 0], hole)


def test_an_image_over_the_pixel_limit_is_refused_from_its_header(server):
    """12000x12000 (a valid PNG of 18 KB): refused, naming the limit and the option, before any decoding."""
    status, body = upload(f"{server}/api/images", blank_png(12000, 12000, "1"), "huge.png")
    assert status == 413 and body["detail"] == ("upload 'huge.png': 12000x12000 = 144,000,000 pixels, more than "
                                                "the 10,000 decoded at most (put serve --max-pixels)")
    status, image = upload(f"{server}/api/images", png(photo(100, 100)), "edge.png")  # exactly at the limit
    assert status == 200
    status, body = upload(f"{server}/api/masks?image={image['id']}&polarity=hole-white",
                          blank_png(12000, 12000, "1"), "m.png")
    assert status == 400 and body["detail"] == ("upload 'm.png': mask is 12000x12000 (WxH), expected 100x100 to "
                                                "match the image")
    info = json.loads(request(f"{server}/api/info")[1])
    assert info["limits"]["max_pixels"] == 10_000 and info["limits"]["max_job_pixels"] == 40_000


def test_a_request_over_the_job_pixel_limit_is_refused(server):
    status, image = upload(f"{server}/api/images", png(photo(96, 92)), "p.png")
    hole = np.zeros((92, 96), np.uint8)
    hole[10:30, 10:40] = 255
    status, mask = upload(f"{server}/api/masks?image={image['id']}&polarity=hole-white", png(hole), "m.png")
    status, body = post_json(f"{server}/api/jobs", {"mask": mask["id"], "models": ["tiny/put"], "samples": 5})
    assert status == 422 and body["detail"] == ("samples: 5 samples of a 96x92 image are 44,160 pixels, more than "
                                                "the 40,000 one request samples at most (put serve --max-job-pixels)")


def test_the_page_names_models_and_test_images_by_id_only(server):
    status, body = post_json(f"{server}/api/jobs", {"mask": "0", "models": ["../../etc/passwd"]})
    assert status == 404 and "no model '../../etc/passwd'" in body["detail"]
    status, body = post_json(f"{server}/api/images/test", {"preset": "tiny", "index": 5})
    assert status == 404
    status, image = post_json(f"{server}/api/images/test", {"preset": "tiny", "index": 0})
    assert status == 200 and (image["width"], image["height"]) == (32, 32)
    status, body = post_json(f"{server}/api/jobs", {"mask": "nope", "models": ["tiny/put"]})
    assert status == 404 and "mask 'nope' is not (or no longer) on the server" in body["detail"]
    status, body = post_json(f"{server}/api/jobs", {"mask": "x", "models": ["tiny/broken"]})
    assert status == 409
    status, body = post_json(f"{server}/api/jobs", {"mask": "x", "models": ["tiny/put"], "samples": 0, "path": "/"})
    assert status == 422 and "samples: Input should be greater than or equal to 1" in body["detail"]
    assert "path: Extra inputs are not permitted" in body["detail"]
    status, body = request(f"{server}/api/jobs", b'{"mask": "x", models}', {"Content-Type": "application/json"})
    assert status == 422 and json.loads(body)["detail"] == ("the request body is not valid JSON (Expecting property "
                                                            "name enclosed in double quotes, at character 14)")
    status, _ = request(f"{server}/api/info", headers={"Host": "elsewhere.example"})
    assert status == 400  # bound to 127.0.0.1: another host name is refused


def test_one_request_at_a_time_per_model_and_a_failure_keeps_the_runner_going():
    from put.models.checkpoint import CheckpointError
    from put.models.put_model import PUTModel
    from put.sampling.inpaint import InpaintSettings
    from put.serve.catalog import ModelEntry
    from put.serve.jobs import QueueFull, Runner
    from put.serve.limits import Limits
    from put.serve.store import Store

    store = Store(2**20, 16 * 16)
    image = store.add_image(png(photo(16, 16)), "a.png")
    hole = np.zeros((16, 16), np.uint8)
    hole[4:12, 4:12] = 255
    mask = store.add_mask(image, png(hole), "m.png", "hole-white")
    release = threading.Event()
    model = PUTModel(TINY).eval()

    def entry(name: str, load) -> ModelEntry:
        found = ModelEntry(name, Path("t.pt"), "tiny", name, False)
        found.load = load
        return found

    slow = entry("slow", lambda device: release.wait(30) and model)
    other = entry("other", lambda device: model)
    runner = Runner("cpu", Limits(max_queued=1))
    settings = InpaintSettings(samples=2)
    first = runner.submit(slow, mask, settings)
    wait_for(lambda: first.state == "running")  # taken by a worker: no longer waiting
    second = runner.submit(slow, mask, settings)
    with pytest.raises(QueueFull) as full:
        runner.submit(slow, mask, settings)
    assert full.value.retry_after == 5  # no request of this model has finished yet: a guess
    done = runner.submit(other, mask, settings)  # another model is not held up by this one
    for _ in range(300):
        if done.finished:
            break
        time.sleep(0.05)
    assert done.state == "done" and len(done.results) == 2
    assert first.state == "running" and second.state == "queued" and runner.position(second) == 1
    release.set()
    for _ in range(300):
        if second.finished:
            break
        time.sleep(0.05)
    assert first.state == second.state == "done"

    def fail(device):
        raise CheckpointError("t.pt: weights do not match their recorded digest")

    failed = runner.submit(entry("bad", fail), mask, settings)
    while not failed.finished:
        time.sleep(0.05)
    assert failed.state == "failed" and failed.error == "t.pt: weights do not match their recorded digest"
    after = runner.submit(other, mask, settings)
    while not after.finished:
        time.sleep(0.05)
    assert after.state == "done"
    runner.shutdown()


def test_uploads_and_results_are_kept_within_byte_budgets_the_oldest_forgotten_first():
    from put.models.put_model import PUTModel
    from put.sampling.inpaint import InpaintSettings
    from put.serve.catalog import ModelEntry
    from put.serve.jobs import Runner
    from put.serve.limits import ITEM_OVERHEAD, Limits
    from put.serve.store import Store, UnknownId

    image_bytes, mask_bytes = 16 * 16 * 3 + ITEM_OVERHEAD, 16 * 16 + ITEM_OVERHEAD
    store = Store(2 * image_bytes + mask_bytes, 16 * 16)
    hole = np.zeros((16, 16), np.uint8)
    hole[4:12, 4:12] = 255
    first = store.add_image(png(photo(16, 16)), "a.png")
    first_mask = store.add_mask(first, png(hole), "m.png", "hole-white")
    second = store.add_image(png(photo(16, 16)), "b.png")
    assert store.nbytes == 2 * image_bytes + mask_bytes
    third = store.add_image(png(photo(16, 16)), "c.png")  # over budget: the first image goes, with its mask
    assert store.image(second.id) is second and store.image(third.id) is third
    for lookup, item in ((store.image, first), (store.mask, first_mask)):
        with pytest.raises(UnknownId, match="is not \\(or no longer\\) on the server"):
            lookup(item.id)
    assert store.nbytes == 2 * image_bytes

    model = PUTModel(TINY).eval()
    entry = ModelEntry("tiny", Path("t.pt"), "tiny", "put", False)
    entry.load = lambda device: model
    mask = store.add_mask(third, png(hole), "m.png", "hole-white")
    runner = Runner("cpu", Limits(results_bytes=1))  # keeps the newest finished request only
    jobs = [runner.submit(entry, mask, InpaintSettings(samples=1, seed=seed)) for seed in range(3)]
    for _ in range(600):
        if all(job.finished for job in jobs):
            break
        time.sleep(0.05)
    assert [job.state for job in jobs] == ["done"] * 3
    for job in jobs[:2]:
        with pytest.raises(UnknownId):
            runner.job(job.id)
    assert runner.job(jobs[2].id) is jobs[2]
    runner.shutdown()


@pytest.mark.parametrize("deterministic,tokens_per_step,steps", [(False, 1, None), (False, 3, None),
                                                                   (False, 1, 2), (True, 1, None)])
def test_the_sampler_reports_each_forward_pass_over_all_batches(tiny_checkpoints, deterministic, tokens_per_step,
                                                                steps):
    from put.sampling.inpaint import InpaintSettings, inpaint_tensors
    from put.sampling.schedules import SamplingOptions
    from tests.conftest import random_batch

    model, _, _ = tiny_checkpoints
    images, keep = random_batch(1)
    masked = int((~model.pvqvae.patch_known(keep)).sum())
    calls = []
    settings = InpaintSettings(samples=3, batch_size=2, deterministic=deterministic,
                               options=SamplingOptions(tokens_per_step=tokens_per_step, steps=steps))
    inpaint_tensors(model, images[0], keep[0], settings, progress=lambda done, total: calls.append((done, total)))
    per_batch = 1 if deterministic else steps or -(-masked // tokens_per_step)
    assert calls == [(done, 2 * per_batch) for done in range(1, 2 * per_batch + 1)]


# ---------------------------------------------------------------- the page in headless Chromium

@pytest.fixture(scope="module")
def page(server):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extras")
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} missing: `make browser` installs Debian's chromium")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(60_000)
        page.goto(server)
        page.wait_for_selector("#model option", state="attached")
        yield page
        browser.close()


def load_and_brush(page, workdir: Path) -> None:
    """Upload the photo and brush one stroke across it with mouse events."""
    before = page.get_attribute("#stage", "data-image") or ""
    page.set_input_files("#image-file", str(workdir / "photo.png"))
    page.wait_for_function(IMAGE_CHANGED, arg=before)
    box = page.locator("#mask-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.35)
    page.mouse.down()
    for step in range(1, 11):
        page.mouse.move(box["x"] + box["width"] * (0.3 + 0.04 * step), box["y"] + box["height"] * (0.35 + 0.02 * step))
    page.mouse.up()


def run_and_wait(page, server: str, button: str, panels: int) -> list[dict]:
    """Clicks the button, waits for the new run's panels to show N results each; their jobs as the server has them."""
    previous = int(page.get_attribute("#results .run", "data-run") or 0) if page.query_selector("#results .run") else 0
    page.click(button)
    page.wait_for_function("([previous, panels, n]) => { const run = document.querySelector('#results .run');"
                           "  return run && Number(run.dataset.run) > previous && "
                           "    run.querySelectorAll('.job').length === panels && [...run.querySelectorAll('.job')]"
                           "      .every(j => [...j.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth)"
                           "        .length === n); }", arg=[previous, panels, N])
    ids = page.eval_on_selector_all("#results .run:first-child .job", "jobs => jobs.map(j => j.dataset.job)")
    return [json.loads(request(f"{server}/api/jobs/{job}")[1]) for job in ids]


def check_results(server: str, job: dict, original: np.ndarray) -> list[np.ndarray]:
    """N results that equal the input outside the hole and differ from each other inside it."""
    assert job["state"] == "done" and job["results"] == N
    hole = decoded(request(f"{server}/api/masks/{job['mask']}")[1])[..., 0] == 255
    assert 0 < hole.sum() < hole.size
    results = [decoded(request(f"{server}/api/jobs/{job['id']}/results/{i}")[1]) for i in range(N)]
    for result in results:
        assert result.shape == original.shape
        assert np.array_equal(result[~hole], original[~hole])
    for i in range(N):
        for j in range(i + 1, N):
            assert not np.array_equal(results[i][hole], results[j][hole])
    return results


def test_page_opens_with_a_placeholder_and_put_chosen(page, workdir):
    """Before an image is loaded: the line saying what to do, no empty image box; the full model preselected."""
    assert page.is_visible("#placeholder") and page.is_hidden("#stage") and page.is_hidden("#base")
    assert page.input_value("#model") == "tiny/put"
    page.screenshot(path=str(workdir / "serve-start.png"))


def test_page_inpaints_a_brushed_hole_with_n_results(page, server, workdir):
    assert "Up to 10,000 pixels and 1 MiB per image; up to 40,000 pixels × samples" in page.inner_text("#limits")
    load_and_brush(page, workdir)
    page.select_option("#model", "tiny/put")
    page.fill("#samples", str(N))
    (job,) = run_and_wait(page, server, "#run", panels=1)
    assert job["model"]["id"] == "tiny/put" and job["total"] > 1 and job["done"] == job["total"]
    original = np.asarray(Image.open(workdir / "photo.png").convert("RGB"))
    results = check_results(server, job, original)
    assert "result(s) in" in page.inner_text("#results .job .status")

    page.check("#raw")  # the raw decode: the decoder's output outside the hole too
    src = page.get_attribute("#results .job figure img", "src")
    assert src.endswith("raw=true")
    raw = decoded(request(server + src)[1])
    assert not np.array_equal(raw, results[0])
    page.uncheck("#raw")
    status, archive = request(server + page.get_attribute("#results .run a.zip", "href"))
    import zipfile

    names = set(zipfile.ZipFile(io.BytesIO(archive)).namelist())
    assert {f"photo_{i:03d}.png" for i in range(N)} | {"raw/photo_000.png", "input.png", "mask.png"} <= names


def test_page_compares_variants_side_by_side(page, server, workdir):
    load_and_brush(page, workdir)
    page.fill("#samples", str(N))
    page.fill("#seed", "7")
    compared = [*(f"tiny/{variant}" for variant in VARIANTS), "tiny/official_release"]
    for model in compared:
        page.check(f".compare-model[value='{model}']")
    jobs = run_and_wait(page, server, "#compare", panels=len(compared))
    assert sorted(job["model"]["id"] for job in jobs) == sorted(compared)
    assert len({job["mask"] for job in jobs}) == 1 and {job["seed"] for job in jobs} == {7}  # same hole and seed
    original = np.asarray(Image.open(workdir / "photo.png").convert("RGB"))
    for job in jobs:
        check_results(server, job, original)
    # One grid: a row per model, the i-th results of every row in one column, the rows one under the other.
    boxes = page.eval_on_selector_all("#results .run:first-child .job", """jobs => jobs.map(job =>
        [job.querySelector('.job-head'), ...job.querySelectorAll('figure')].map(cell => {
            const box = cell.getBoundingClientRect(); return [box.left, box.top]; }))""")
    assert all(len(row) == N + 1 for row in boxes)
    for column in range(N + 1):
        assert len({round(row[column][0]) for row in boxes}) == 1, column
    tops = [row[1][1] for row in boxes]
    assert tops == sorted(tops) and len(set(tops)) == len(tops)
    colours = page.eval_on_selector_all("#results .run:first-child .job .job-head",
                                        "heads => heads.map(h => getComputedStyle(h).borderLeftColor)")
    assert len(set(colours[:2])) == 2  # put and no_ref in their colours
    shot = workdir / "serve.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("PUT_SERVE_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["PUT_SERVE_SCREENSHOT"])


def test_page_shows_a_bad_upload_and_the_next_request_still_works(page, server, workdir):
    load_and_brush(page, workdir)
    page.set_input_files("#image-file", str(workdir / "notes.txt"))
    page.wait_for_selector("#error:not([hidden])")
    assert "upload 'notes.txt': not a readable image" in page.inner_text("#error")
    page.click("#clear")
    page.click("#run")  # no hole: said on the page, nothing sent
    page.wait_for_function("document.getElementById('error').textContent.includes('draw a hole')")
    page.click("#undo")  # the stroke is back
    page.set_input_files("#mask-file", str(workdir / "all_kept.png"))  # white read as the hole: no hole at all
    page.wait_for_function("document.getElementById('error').textContent.includes('no hole')")
    assert "white was read as the hole" in page.inner_text("#error") and "--" not in page.inner_text("#error")
    page.select_option("#model", "tiny/no_ref")
    page.fill("#samples", str(N))
    (job,) = run_and_wait(page, server, "#run", panels=1)
    assert page.is_hidden("#error") and job["model"]["id"] == "tiny/no_ref"
    check_results(server, job, np.asarray(Image.open(workdir / "photo.png").convert("RGB")))


def test_page_takes_a_test_image_and_a_mask_file_with_its_polarity(page, server, workdir):
    hole = np.zeros((32, 32), bool)
    hole[8:20, 4:28] = True
    Image.fromarray(np.where(hole, 0, 255).astype(np.uint8)).save(workdir / "keep_white.png")
    before = page.get_attribute("#stage", "data-image") or ""
    page.click("#load-test")  # the preset's first test image
    page.wait_for_function(IMAGE_CHANGED, arg=before)
    page.select_option("#polarity", "keep-white")
    page.set_input_files("#mask-file", str(workdir / "keep_white.png"))
    page.wait_for_function("document.getElementById('mask-canvas').getContext('2d')"
                           ".getImageData(16, 12, 1, 1).data[3] === 255")  # the hole shows on the canvas
    page.select_option("#model", "tiny/put")
    page.fill("#samples", str(N))
    (job,) = run_and_wait(page, server, "#run", panels=1)
    assert np.array_equal(decoded(request(f"{server}/api/masks/{job['mask']}")[1])[..., 0] == 255, hole)
    test_image = np.asarray(Image.open(workdir / "data" / "tiny" / "masks" / "gt" / "test_0000.png").convert("RGB"))
    check_results(server, job, test_image)


def test_limits_that_contradict_each_other_are_refused_before_starting(capsys):
    from put.cli import main

    assert main(["serve", "--max-pixels", "100000000", "--max-store-mb", "64", "--port", "0"]) == 2
    assert capsys.readouterr().err == ("put serve: error: --max-store-mb 64 cannot hold one image of --max-pixels "
                                       "100000000 and its mask (381.5 MiB)\n")
    assert main(["serve", "--max-pixels", "5000", "--max-job-pixels", "4000", "--port", "0"]) == 2
    assert "--max-job-pixels 4000 is below --max-pixels 5000" in capsys.readouterr().err
    assert main(["serve", "--max-models", "1", "--max-running", "2", "--port", "0"]) == 2
    assert "--max-models 1 is below --max-running 2" in capsys.readouterr().err
    assert main(["serve", "--max-pixels", "65536", "--max-job-attention", "1000", "--port", "0"]) == 2
    assert "--max-job-attention 1000 is below 1048576" in capsys.readouterr().err

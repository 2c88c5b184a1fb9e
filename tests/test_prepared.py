"""The prepared image cache (`put prepare`): the same samples as decoding the originals (exactly, or within the
storage's stated rounding), resuming after kill -9, bad input named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from put.cli import main
from put.data import prepared
from put.data.dataset import ImageListDataset
from put.data.prepared import PreparedImages, partial_dir, prepare
from put.data.split import write_split
from put.io.files import this_host

ROOT = Path(__file__).resolve().parents[1]
# Largest difference from the on-the-fly sample, in the models' [-1, 1] scale: float16 keeps the float pixels
# within 1/16 of a grey level (values >= 128; exact for multiples of 1/4), uint8 rounds to the nearest level;
# 1e-6 more for float32 rounding near +-1.
BOUND = {"float16": 0.0625 / 127.5, "uint8": 0.5 / 127.5}


def save(path: Path, size: tuple[int, int], seed: int) -> Path:
    """A smooth random photo-like image (width, height), so resizing gives all kinds of fractions."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (size[1] // 4 + 1, size[0] // 4 + 1, 3), dtype=np.uint8)
    image = Image.fromarray(small).resize(size, Image.Resampling.BICUBIC)
    noisy = np.clip(np.asarray(image, np.int16) + rng.integers(-20, 21, (size[1], size[0], 3)), 0, 255)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(noisy.astype(np.uint8)).save(path)
    return path


@pytest.fixture
def split(tmp_path) -> Path:
    """Squares of 4x the image size (FFHQ's 1024 -> 256 at 64 -> 16) and other shapes, train and test."""
    sizes = [(64, 64), (64, 64), (50, 38), (38, 61), (64, 64), (45, 45)]
    images = [save(tmp_path / "raw" / f"{k}.png", size, k) for k, size in enumerate(sizes)]
    write_split({"train": images, "test": images[:3]}, tmp_path / "splits")
    return tmp_path / "splits"


def pair(split: Path, out: Path, storage: str, train: bool, resize: int | None, resize_filter: str = "bilinear"):
    cached = PreparedImages(out, split, "train" if train else "test", 16, train, train_resize=resize,
                            resize_filter=resize_filter, storage=storage)
    original = ImageListDataset(split / ("train.csv" if train else "test.csv"), 16, train, train_resize=resize,
                                resize_filter=resize_filter)
    return cached, original


@pytest.mark.parametrize("storage", ["float16", "uint8"])
@pytest.mark.parametrize("resize_filter", ["bilinear", "bicubic-antialias"])
def test_the_prepared_sample_equals_the_on_the_fly_sample(split, tmp_path, storage, resize_filter):
    """Same index and seed: FFHQ's case (a square 4x larger than the image size, bilinear) is bit-identical in
    float16, every image resized by PIL to whole grey levels is identical in both storages, and all others lie
    within the storage's rounding."""
    out = tmp_path / "prepared"
    prepare(split, out, 16, 20, resize_filter, storage, progress=False)
    for train in (True, False):
        cached, original = pair(split, out, storage, train, 20, resize_filter)
        assert len(cached) == len(original)
        for index in range(len(original)):
            for key in (index, (index, 3), (index, 11)):
                a, b = cached[key], original[key]
                difference = float((a - b).abs().max())
                assert difference <= BOUND[storage] + 1e-6, (train, index, key, difference)
                whole_levels = resize_filter == "bicubic-antialias"
                if whole_levels or (storage == "float16" and not train and index in (0, 1)):
                    assert torch.equal(a, b), (train, index, key, difference)  # 64 -> 16: FFHQ's 1024 -> 256
            assert cached.verify(index)


def test_ffhq_case_is_exact_in_float16_and_rounded_in_uint8(tmp_path):
    """The training read at the image size of a square 4x larger (FFHQ: 1024 -> 256, no crop left): float16
    holds the float resize exactly, uint8 differs by the measured rounding."""
    images = [save(tmp_path / "raw" / f"{k}.png", (64, 64), k) for k in range(2)]
    write_split({"train": images, "test": images}, tmp_path / "splits")
    differences = {}
    for storage in ("float16", "uint8"):
        prepare(tmp_path / "splits", tmp_path / storage, 16, None, "bilinear", storage, progress=False)
        cached, original = pair(tmp_path / "splits", tmp_path / storage, storage, True, None)
        differences[storage] = max(float((cached[(i, 5)] - original[(i, 5)]).abs().max()) for i in range(2))
    assert differences["float16"] == 0
    assert 0 < differences["uint8"] <= 0.5 / 127.5 + 1e-6


def test_a_cache_of_other_settings_is_refused_naming_the_key(split, tmp_path):
    out = tmp_path / "prepared"
    prepare(split, out, 16, 20, "bilinear", "uint8", progress=False)
    with pytest.raises(ValueError, match=r"train_resize: 20 in the cache, 24 now.*re-run `put prepare`"):
        PreparedImages(out, split, "train", 16, True, train_resize=24, storage="uint8")
    with pytest.raises(ValueError, match=r"storage: 'uint8' in the cache, 'float16' now"):
        PreparedImages(out, split, "train", 16, True, train_resize=20, storage="float16")


KILLER = """
import os, signal, sys
from put.data import prepared
calls = 0
load = prepared._load
def dying(*args):
    global calls
    calls += 1
    if calls == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)
    return load(*args)
prepared._load = dying
prepared.SHARD_BYTES = 2 * 20 * 20 * 3 * 2  # two float16 training images per shard
prepared.prepare(sys.argv[1], sys.argv[2], 16, 20, "bilinear", "float16", workers=1, progress=False)
"""


def test_kill_9_keeps_the_finished_shards_and_a_rerun_resumes(split, tmp_path, monkeypatch):
    out = tmp_path / "prepared"
    killed = subprocess.run([sys.executable, "-c", KILLER, str(split), str(out), "6"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    work = partial_dir(out)
    assert not out.exists()  # no half cache where the pipeline looks
    assert sorted(p.name for p in work.glob("train-*")) == [f"train-0000{k}.{ext}" for k in (0, 1)
                                                            for ext in ("json", "npy")]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (work / f".train-00002.npy.tmp-{this_host()}-{dead.stdout.strip()}").write_bytes(b"half a shard")  # a kill's

    loaded = []
    load = prepared._load
    monkeypatch.setattr(prepared, "_load", lambda *args: loaded.append(args[0].name) or load(*args))
    monkeypatch.setattr(prepared, "SHARD_BYTES", 2 * 20 * 20 * 3 * 2)
    manifest = prepare(split, out, 16, 20, "bilinear", "float16", progress=False)
    assert loaded == ["4.png", "5.png", "0.png", "1.png", "2.png"]  # train images 4, 5 and the test split only
    assert not work.exists() and not list(out.glob(".*"))
    fresh = prepare(split, tmp_path / "fresh", 16, 20, "bilinear", "float16", progress=False)
    assert manifest["shards"] == fresh["shards"]  # the same bytes as an uninterrupted run
    assert (out / "index.csv").read_text() == (tmp_path / "fresh" / "index.csv").read_text()


def test_a_corrupt_source_is_named_exit_2_and_finished_shards_are_kept(split, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(prepared, "SHARD_BYTES", 2 * 20 * 20 * 3 * 2)
    (tmp_path / "params.yaml").write_text("preset: demo\noverrides: {model: {image_size: 16}, "
                                          "data: {train_resize: 20}}\n")
    bad = tmp_path / "raw" / "3.png"
    bad.write_bytes(bad.read_bytes()[:100])  # cut short
    assert main(["prepare", "--split", str(split), "--out", "prepared"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress bars
    assert error.startswith(f"put prepare: error: {bad}: not a readable image"), error
    assert not (tmp_path / "prepared").exists()
    assert (tmp_path / "prepared.partial" / "train-00000.npy").is_file()  # images 0 and 1, kept for the rerun
    # A file changed since `put split` checksummed it is named too.
    Image.new("RGB", (50, 38)).save(bad)
    assert main(["prepare", "--split", str(split), "--out", "prepared"]) == 2
    assert "its SHA-256 differs from the one recorded in" in capsys.readouterr().err


def test_originals_writes_only_the_manifest(split, tmp_path):
    out = tmp_path / "prepared"
    manifest = prepare(split, out, 16, 20, "bilinear", "originals", progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["index.csv", "manifest.json"]
    assert manifest["settings"]["storage"] == "originals" and not manifest["shards"]
    assert json.loads((out / "manifest.json").read_text()) == manifest


def test_bench_loader_measures_every_stage_and_source(tmp_path):
    """`put bench loader` on the demo, as briefly as it goes (the figures themselves: `make bench-loader`)."""
    from put.bench.loader import FORMATS, bench_loader

    report = bench_loader("demo", [1], seconds=0.01, work=tmp_path)
    for stage in ("pvqvae", "transformer"):
        for source in ("prepared", "originals"):
            rates = report["stages"][stage][source]
            assert rates["one_process"]["images_per_cpu_second"] > 0 and rates["loader"][0]["workers"] == 1
            assert report["cores_per_gpu"][stage][source] >= 2  # at least one worker and the training process
    errors = {row["format"]: row["max_abs_error"] for row in report["formats"]}
    assert set(FORMATS) < set(errors) and errors["raw-float16"] == errors["raw-uint8"] == 0  # demo: no resize
    assert errors["jpeg-q95"] > 0


def test_memory_holds_one_shard_and_the_file_list_not_every_images_index_row(tmp_path, monkeypatch):
    # issue 46: the index rows of every image were kept until the end (~0.9 KB per image: 1.6 GB at Places2's
    # 1.8 million); now each shard's are appended to index.csv as it is written, and what grows with the split
    # is its file list (~0.4 KB per image).
    import tracemalloc

    monkeypatch.setattr(prepared, "SHARD_BYTES", 8 * 8 * 3 * 50)  # 50 uint8 images of 8x8 per shard
    images = [save(tmp_path / "raw" / f"{k}.png", (8, 8), k) for k in range(4)]
    peaks = {}
    for n in (400, 4000):
        write_split({"train": images * (n // 4), "test": images}, tmp_path / f"splits{n}")
        tracemalloc.start()
        try:
            prepare(tmp_path / f"splits{n}", tmp_path / f"prepared{n}", 8, None, "bilinear", "uint8", workers=1,
                    progress=False)
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    per_image = (peaks[4000] - peaks[400]) / 3600
    assert per_image < 600, f"{per_image:.0f} bytes more per image"
    index = pd.read_csv(tmp_path / "prepared4000" / "index.csv")
    assert len(index) == 4004 and list(index["position"][:3]) == [0, 1, 2]

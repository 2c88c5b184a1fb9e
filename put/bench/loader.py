"""`put bench loader`: how many full training samples per second the CPUs turn out, from the prepared cache and
from the original files, and so how many CPU cores keep one GPU fed; the same run compares storage formats for
the prepared images. What is timed, on which data (docs/cluster.md, "Feeding the GPUs")."""

from __future__ import annotations

import io
import math
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from put.config.presets import Preset
from put.config.presets import preset as get_preset
from put.data.dataset import AugmentedImages, stored_pixels
from put.data.demo import available_photos
from put.data.images import open_image, to_rgb
from put.data.prepared import prepare
from put.data.split import split_dataset, write_split
from put.masks.generate import mask_with_ratio
from put.masks.io import write_mask
from put.train.data import MaskedImages, StepBatchSampler, training_loader
from put.train.inputs import split_datasets, training_masks

# What one GPU consumes: the team's H100 baseline measurement (bf16, FFHQ preset, at commit d89b9d3), a P-VQVAE
# step of 128 images in 0.468 s, a transformer step of 48 in 0.184 s. The paper's other presets consume no more.
H100_IMAGES_PER_SECOND = {"pvqvae": 128 / 0.468, "transformer": 48 / 0.184}
H100_SOURCE = ("the team's H100 baseline measurement at commit d89b9d3 (one NVIDIA H100 80GB, bf16, FFHQ preset): "
               "P-VQVAE 0.468 s per step of 128 images, transformer 0.184 s per step of 48")
BATCH = 16  # images per loader batch: the released per-GPU batch of the FFHQ stages
STAGES = ("pvqvae", "transformer")

# Generated stand-ins for the paper's images: (width, height) of each image, file format.
PAPER_IMAGES = {"ffhq": ((1024, 1024), "PNG"), "places2": ((683, 512), "JPEG"), "imagenet": ((500, 375), "JPEG")}


def paper_layout(dataset: str) -> tuple[tuple[int, int], str]:
    return PAPER_IMAGES["places2" if dataset.startswith("places2") else dataset]


def generate_images(folder: Path, dataset: str, count: int) -> list[Path]:
    """`count` images of the dataset's size and format, cut from the demo photos (every other one portrait for
    the JPEG layouts), written once."""
    (width, height), fmt = paper_layout(dataset)
    photos = list(available_photos().values())
    paths = []
    for k in range(count):
        size = (width, height) if fmt == "PNG" or k % 2 == 0 else (height, width)
        photo = Image.fromarray(photos[k % len(photos)])
        scale = max(size[0] / photo.width, size[1] / photo.height) * (1 + 0.1 * (k // len(photos)))
        photo = photo.resize((math.ceil(photo.width * scale), math.ceil(photo.height * scale)),
                             Image.Resampling.BICUBIC).crop((0, 0, *size))
        path = folder / f"{k:05d}.{'png' if fmt == 'PNG' else 'jpg'}"
        photo.save(path, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
        paths.append(path)
    return paths


def generate_pconv(folder: Path, per_group: int = 12, size: int = 512) -> Path:
    """A stand-in PConv set: generated irregular masks in NVIDIA's six hole-ratio groups (0-10 % ... 50-60 %)."""
    rng = np.random.default_rng(0)
    for group in range(6):
        for k in range(per_group):
            keep = mask_with_ratio((size, size), max(0.01, group / 10), (group + 1) / 10, rng)
            write_mask(folder / f"{group * per_group + k:05d}.png", keep)
    return folder


def paper_split(work: Path, dataset: str, count: int) -> Path:
    (work / "images").mkdir(parents=True, exist_ok=True)
    images = generate_images(work / "images", dataset, count)
    write_split({"train": images[: count - count // 4], "test": images[count - count // 4:]}, work / "splits")
    return work / "splits"


def timed_rate(fn, keys: list, seconds: float, least: int = 16) -> dict:
    """fn over the keys (cycled), at least `least` times and `seconds`: per wall second and per CPU second of this
    process (the rate of one core, whatever else runs on the machine)."""
    n, wall, cpu = 0, time.perf_counter(), time.process_time()
    while n < least or time.perf_counter() - wall < seconds:
        fn(keys[n % len(keys)])
        n += 1
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"images": n, "images_per_second": n / wall, "images_per_cpu_second": n / max(cpu, 1e-9)}


def loader_rate(dataset: MaskedImages, workers: int, seconds: float, per_worker: float) -> dict:
    """Images per second out of the training DataLoader with `workers` processes, after each has made a batch."""
    steps = max(2 * workers + 2, math.ceil(per_worker * max(workers, 1) * seconds / BATCH) + workers)
    sampler = StepBatchSampler(len(dataset), BATCH, 0, 0, steps)
    batches = iter(training_loader(dataset, sampler, workers))
    for _ in range(max(workers, 1)):  # start-up: every worker's first batch
        next(batches)
    start, n = time.perf_counter(), 0
    for images, *_ in batches:
        n += len(images)
    return {"workers": workers, "images": n, "images_per_second": n / (time.perf_counter() - start)}


def encode(fmt: str, pixels: np.ndarray) -> bytes:
    if fmt == "raw-float16":
        return pixels.astype(np.float16).tobytes()
    rounded = np.rint(pixels).astype(np.uint8)
    if fmt == "raw-uint8":
        return rounded.tobytes()
    buffer = io.BytesIO()
    options = {"png": ("PNG", {}), "jpeg-q95": ("JPEG", {"quality": 95, "subsampling": 0}),
               "webp-lossless": ("WEBP", {"lossless": True})}[fmt]
    Image.fromarray(rounded).save(buffer, format=options[0], **options[1])
    return buffer.getvalue()


def decode(fmt: str, data: bytes, shape: tuple[int, ...]) -> np.ndarray:
    if fmt.startswith("raw-"):
        return np.frombuffer(data, np.float16 if fmt == "raw-float16" else np.uint8).reshape(shape).astype(np.float32)
    return np.asarray(to_rgb(open_image(io.BytesIO(data))), dtype=np.float32)


FORMATS = ("raw-float16", "raw-uint8", "png", "webp-lossless", "jpeg-q95")


def compare_formats(paths: list[Path], preset: Preset, seconds: float) -> list[dict]:
    """Each candidate storage of the stored training images: bytes, decode rate (one core), error in grey levels
    against the float pixels the original pipeline computes; first row: the original files, decoded and resized."""
    data = preset.data
    exact = [stored_pixels(to_rgb(open_image(p)), preset.model.image_size, True, data.train_resize, data.resize_filter)
             for p in paths]
    rows = [{"format": "original file (decode + resize per sample)", "bytes_per_image": np.mean([p.stat().st_size
                                                                                                 for p in paths]),
             **timed_rate(lambda k: stored_pixels(to_rgb(open_image(paths[k])), preset.model.image_size, True,
                                                  data.train_resize, data.resize_filter), list(range(len(paths))),
                          seconds), "max_abs_error": 0.0, "mean_abs_error": 0.0}]
    for fmt in FORMATS:
        encoded = [encode(fmt, pixels) for pixels in exact]
        errors = [np.abs(decode(fmt, e, x.shape) - x) for e, x in zip(encoded, exact)]
        rows.append({"format": fmt, "bytes_per_image": float(np.mean([len(e) for e in encoded])),
                     **timed_rate(lambda k, fmt=fmt, encoded=encoded: decode(fmt, encoded[k], exact[k].shape),
                                  list(range(len(paths))), seconds),
                     "max_abs_error": float(max(e.max() for e in errors)),
                     "mean_abs_error": float(np.mean([e.mean() for e in errors]))})
    return rows


def stage_rates(images: AugmentedImages, masks, stage: str, workers: list[int], seconds: float) -> dict:
    draw = masks.pvqvae_pair if stage == "pvqvae" else (lambda rng: (masks.transformer_mask(rng),))
    dataset = MaskedImages(images, draw)
    sampler = StepBatchSampler(len(images), BATCH, 0, 0, 64)
    keys = [key for step in range(64) for key in sampler.batch(step)]
    one = timed_rate(dataset.__getitem__, keys, seconds)
    parts = {"image_only": timed_rate(images.__getitem__, keys, seconds / 2),
             "masks_only": timed_rate(lambda key: draw(np.random.default_rng([key[1], 1])), keys, seconds / 2)}
    return {"one_process": one, **parts,
            "loader": [loader_rate(dataset, n, seconds, one["images_per_second"]) for n in workers]}


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"cpu": cpu, "cpus": len(os.sched_getaffinity(0)), "load_average_1min": os.getloadavg()[0],
            "python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
            "pillow": Image.__version__}


def bench_loader(preset_name: str, workers: list[int] | None = None, images: int = 48, seconds: float = 3.0,
                 work: Path | None = None) -> dict:
    """The figures of one preset (see the module docstring); `work`: a folder for the data (default: a temp one)."""
    workers = workers or [len(os.sched_getaffinity(0))]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a data-loader worker
    try:
        with tempfile.TemporaryDirectory(prefix="put-loader-") as tmp:
            return _bench(preset_name, workers, images, seconds, Path(work or tmp))
    finally:
        torch.set_num_threads(threads)


def _bench(preset_name: str, workers: list[int], count: int, seconds: float, work: Path) -> dict:
    preset = get_preset(preset_name)
    data = preset.data
    if data.dataset == "demo":
        split_dataset(preset, work / "splits")
        source = "the demo preset's split"
    else:
        paper_split(work, data.dataset, count)
        (width, height), fmt = paper_layout(data.dataset)
        source = f"{count} generated {width}x{height} {fmt} images (cut from the demo photos)"
    pconv_root = preset.masks.pconv_root
    masks_source = "generated irregular masks (no PConv set in the preset)"
    if pconv_root is not None:
        if Path(pconv_root).is_dir():
            masks_source = f"the PConv set in {pconv_root}"
        else:
            pconv_root = str(generate_pconv(work / "pconv"))
            masks_source = "a stand-in PConv set: 72 generated irregular 512 px masks in the six hole-ratio groups"
        preset = preset.model_copy(update={"masks": preset.masks.model_copy(update={"pconv_root": pconv_root})})

    split = work / "splits"
    start = time.perf_counter()
    manifest = prepare(split, work / "prepared", preset.model.image_size, data.train_resize, data.resize_filter,
                       "float16" if data.prepared == "originals" else data.prepared, progress=False)
    prepare_seconds = time.perf_counter() - start
    originals = split_datasets(split, preset.model.image_size, data)[0]
    cached = split_datasets(split, preset.model.image_size,
                            data.model_copy(update={"prepared": manifest["settings"]["storage"]}), work / "prepared")[0]
    original_bytes = sum(p.stat().st_size for p in originals.paths)
    report = {
        "preset": preset_name, "command": f"put bench loader --preset {preset_name}", "machine": machine(),
        "data": source, "masks": masks_source, "batch": BATCH, "seconds_per_measurement": seconds,
        "h100_images_per_second": H100_IMAGES_PER_SECOND, "h100_source": H100_SOURCE,
        "prepare": {"storage": manifest["settings"]["storage"], "images": sum(manifest["images"].values()),
                    "seconds": prepare_seconds, "threads": len(os.sched_getaffinity(0)),
                    "train_original_bytes_per_image": original_bytes / len(originals),
                    "train_prepared_bytes_per_image": sum(s["bytes"] for n, s in manifest["shards"].items()
                                                          if n.startswith("train")) / len(cached)},
        "formats": compare_formats(originals.paths[:16], preset, seconds / 3),
        "stages": {},
    }
    for stage in STAGES:
        masks = training_masks(preset, preset.model, stage)
        report["stages"][stage] = {name: stage_rates(images, masks, stage, workers, seconds)
                                   for name, images in (("prepared", cached), ("originals", originals))}
    report["cores_per_gpu"] = cores_per_gpu(report)
    return report


def cores_per_gpu(report: dict) -> dict:
    """Loader workers one GPU needs at the measured per-core rate (images per CPU-second), plus the core of the
    training process itself."""
    return {stage: {source: 1 + math.ceil(H100_IMAGES_PER_SECOND[stage] / rates["one_process"]["images_per_cpu_second"])
                    for source, rates in sources.items()}
            for stage, sources in report["stages"].items()}


def summary(report: dict) -> str:
    lines = [f"{report['preset']}: {report['data']}; masks: {report['masks']}"]
    for stage, sources in report["stages"].items():
        for source, rates in sources.items():
            one, image, masks = (rates[k]["images_per_cpu_second"] for k in ("one_process", "image_only", "masks_only"))
            many = ", ".join(f"{r['workers']} workers {r['images_per_second']:.0f}/s" for r in rates["loader"])
            lines.append(f"  {stage:11s} {source:9s}: {one:6.0f} images per CPU-second "
                         f"({rates['one_process']['images_per_second']:.0f}/s wall; image {image:.0f}, masks "
                         f"{masks:.0f}); {many}; {report['cores_per_gpu'][stage][source]} cores per H100")
    return "\n".join(lines)


def run_loader_bench(presets: list[str], workers: list[int] | None, seconds: float, out: str | None) -> list[dict]:
    """`put bench loader`: one report per preset, printed; written as a JSON list to `out` when given."""
    import json

    from put.io.files import atomic_write_text

    reports = []
    for name in presets:
        reports.append(bench_loader(name, workers, seconds=seconds))
        print(summary(reports[-1]), flush=True)
    if out:
        atomic_write_text(out, json.dumps(reports, indent=2) + "\n")
    return reports

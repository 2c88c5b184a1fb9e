"""Stage `split`: raw images (the demo set is built first) -> train/test lists with checksums."""

from __future__ import annotations

from pathlib import Path

from put.config.params import Params
from put.data.demo import build_demo
from put.data.groups import image_sources
from put.data.sources import list_dataset
from put.data.split import write_split
from put.errors import InputError


def run_split(params: Params, out_dir: Path) -> dict:
    preset = params.resolved()
    data = preset.data
    if data.dataset == "demo" and data.root is None:
        root = Path(out_dir) / "images"
        build_demo(root, preset.model.image_size, seed=data.seed)
    elif data.root is None:
        raise InputError(f"data.root: the {data.dataset} preset needs the folder of its raw images "
                         f"(set overrides.data.root in params.yaml)")
    else:
        root = Path(data.root)
    files = list_dataset(data.dataset, root, seed=data.seed, eval_count=data.eval_count,
                         places_train=data.places_train, places_images=data.places_images)
    info = {"dataset": data.dataset}  # which split a run used (e.g. places2 vs places2_nature) ...
    if data.dataset.startswith("places2"):  # ... and which Places365 training set and image folders
        info.update(places_train=data.places_train, places_images=data.places_images)
    sources = image_sources(data.dataset, root, files, data.sources)  # checked before anything is written
    return write_split(files, Path(out_dir), info=info, sources=sources)

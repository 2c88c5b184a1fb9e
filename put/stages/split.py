"""Stage `split`: raw images (the demo set is built first) -> train/test lists with checksums."""

from __future__ import annotations

from pathlib import Path

from put.config.params import Params
from put.data.demo import build_demo
from put.data.sources import list_dataset
from put.data.split import write_split


def run_split(params: Params, out_dir: Path) -> dict:
    preset = params.resolved()
    data = preset.data
    root = Path(data.root)
    if data.dataset == "demo":
        build_demo(root, preset.model.image_size, seed=data.seed)
    files = list_dataset(data.dataset, root, seed=data.seed, eval_count=data.eval_count)
    report = write_split(files, Path(out_dir))
    report["dataset"] = data.dataset  # which split a run used (e.g. places2 vs places2_nature)
    return report

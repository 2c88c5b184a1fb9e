"""Run the authors' released PUT code on fixed inputs and write what it produced into tests/fixtures/parity/:

- metrics_released.json: PSNR / SSIM / MAE of scripts/metrics/cal_psnr.py (its `main`, one image pair per
  run) on the pairs of tests/parity_data.metric_pairs;
- masks_released.json: hole counts of 2,000 training masks per released config (its ImageListDataset on a
  stand-in PConv mask set, with the config's mask parameters), of its PConv windows alone, of its strokes
  alone, the stand-in files its slicing selects, and its token-resolution resampling of a few masks.

Usage (see README.md beside this file): .venv/bin/python tools/parity/make_data_fixtures.py --official PATH

Their code is put on sys.path with shims applied here (never edited): numpy aliases removed in numpy 1.24
(np.int, np.bool), and a stand-in `albumentations` module when it is not installed (only its import is
needed: the image preprocessor is replaced by the identity, masks do not depend on the image).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import types
from argparse import Namespace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from put.data.images import write_png  # noqa: E402
from tests import parity_data as P  # noqa: E402

N_MASKS = 2000
SEED = 0


def apply_shims(official: Path) -> None:
    # numpy.ma and matplotlib must be imported before np.bool is redefined (they use numpy's own bool).
    import matplotlib
    import numpy.ma  # noqa: F401
    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    np.int = int  # type: ignore[attr-defined]
    np.bool = bool  # type: ignore[attr-defined]
    try:
        import albumentations  # noqa: F401
    except ImportError:
        sys.modules["albumentations"] = types.ModuleType("albumentations")
    sys.path.insert(0, str(official))
    sys.path.insert(0, str(official / "scripts" / "metrics"))


def versions() -> dict[str, str]:
    import cv2
    import skimage
    import torch
    return {"python": sys.version.split()[0], "numpy": np.__version__, "opencv": cv2.__version__,
            "scikit-image": skimage.__version__, "torch": torch.__version__}


# ------------------------------------------------------------------------------------------ metrics

def released_metrics(work: Path) -> dict[str, dict[str, float]]:
    import cal_psnr  # scripts/metrics/cal_psnr.py of the released code

    values = {}
    for name, (result, target) in P.metric_pairs().items():
        pair = work / "metrics" / name
        write_png(pair / "result" / f"{name}.png", result)
        write_png(pair / "gt" / f"{name}.png", target)
        args = Namespace(gt_dir=str(pair / "gt"), result_dir=str(pair / "result"), file_list="", batch_size=1,
                         num_workers=0, im_size=None, same_file=False)
        cal_psnr.main(args)
        written = json.loads((pair / "metrics_result_1.json").read_text())
        values[name] = {"psnr": written["psnr"], "ssim": written["ssim"], "mae": written["mae"],
                        "sha256": P.pair_digest(result, target)}
    return values


# ------------------------------------------------------------------------------------------ masks

def load_config(official: Path, relative: str) -> dict:
    import yaml
    with open(official / "configs" / "put_cvpr2022" / relative) as f:
        return yaml.load(f, Loader=yaml.FullLoader)["dataloader"]["train_datasets"][0]["params"]


def released_dataset(official: Path, config: str, data_root: Path, **changes):
    """Their ImageListDataset with a config's parameters, one 256x256 image, the 12,000-file stand-in as its
    provided masks, and the identity preprocessor."""
    from image_synthesis.data.image_list_dataset import ImageListDataset

    params = load_config(official, config)
    params.update(name="images", image_list_file=str(data_root / "images.txt"), data_root=str(data_root),
                  provided_mask_name="irregular-mask/testing_mask_dataset",
                  im_preprocessor_config={"target": "image_synthesis.data.utils.image_preprocessor.SimplePreprocessor",
                                          "params": {"size": None}}, **changes)
    params.pop("image_end_with", None)
    return ImageListDataset(**params)


def prepare_data_root(data_root: Path, standin: Path) -> None:
    """data_root/images/0.png (one image) and the stand-in copied to NVIDIA's 12,000 file names."""
    write_png(data_root / "images" / "0.png", np.full((*P.STANDIN_SIZE, 3), 128, np.uint8))
    (data_root / "images.txt").write_text("0.png\n")
    masks = data_root / "irregular-mask" / "testing_mask_dataset"
    masks.mkdir(parents=True)
    for index in range(len(P.STANDIN_GROUPS) * P.NVIDIA_PER_GROUP):
        os.link(standin / f"{P.standin_of_nvidia_index(index):03d}.png", masks / f"{index:05d}.png")


def known_count_to_holes(known: np.ndarray) -> int:
    """Hole pixels of a released mask (1 / True = known)."""
    return int(known.size - np.count_nonzero(known))


def released_masks(official: Path, work: Path) -> dict:
    from image_synthesis.data.utils.util import generate_stroke_mask

    standin = work / "standin"
    digest = P.build_standin(standin)
    data_root = work / "data"
    prepare_data_root(data_root, standin)
    out: dict = {"standin": {"size": list(P.STANDIN_SIZE), "per_group": P.STANDIN_PER_GROUP, "sha256": digest},
                 "n": N_MASKS, "pipelines": {}, "windows": {}, "strokes": {}}

    for name, (_, _, config) in P.PIPELINES.items():
        dataset = released_dataset(official, config, data_root)
        entry = {"config": config, "mask": [], "erase_mask": []}
        for _ in range(N_MASKS):
            item = dataset[0]
            entry["mask"].append(known_count_to_holes(item["mask"]))
            if "erase_mask" in item:
                entry["erase_mask"].append(known_count_to_holes(item["erase_mask"] > 0.5))
        if not entry["erase_mask"]:
            del entry["erase_mask"]
        out["pipelines"][name] = entry

    for name, pipeline in P.WINDOWS.items():
        config = P.PIPELINES[pipeline][2]
        # Provided masks only: no strokes, no all-hole masks, no resampling.
        dataset = released_dataset(official, config, data_root, use_provided_mask=1.0, zero_mask=0.0,
                                   mask_low_to_high=0.0)
        files = [P.standin_of_nvidia_index(int(Path(p).stem)) for p in dataset.masks.labels["abs_path"]]
        counts = [known_count_to_holes(dataset.get_mask(P.STANDIN_SIZE)) for _ in range(N_MASKS)]
        out["windows"][name] = {"config": config, "window": load_config(official, config)["use_provided_mask_ratio"],
                                "files": files, "mask": counts}

    for name, pipeline in P.STROKES.items():
        params = dict(load_config(official, P.PIPELINES[pipeline][2])["stroken_mask_params"])
        out["strokes"][name] = {"params": params, "mask": [
            known_count_to_holes(generate_stroke_mask(im_size=P.STANDIN_SIZE, **params) > 0)
            for _ in range(N_MASKS)]}

    # Their mask_low_to_high step on our masks, mask by mask (the token grid, 1 = known, as hex bits).
    import cv2
    grids = []
    for keep in P.blocky_inputs():
        low = cv2.resize(keep.astype(np.uint8), (32, 32), interpolation=cv2.INTER_NEAREST)
        back = cv2.resize(low, P.STANDIN_SIZE, interpolation=cv2.INTER_NEAREST)
        if not np.array_equal(back, np.kron(low, np.ones((8, 8), np.uint8))):
            raise RuntimeError("their round trip is not constant on 8x8 patches")
        grids.append(np.packbits(low.astype(bool)).tobytes().hex())
    out["blocky"] = {"grid": [32, 32], "seeds": list(P.BLOCKY_SEEDS), "grids": grids}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--official", type=Path, required=True, help="the authors' released code (branch cvpr2022)")
    parser.add_argument("--out", type=Path, default=P.FIXTURES)
    args = parser.parse_args()
    apply_shims(args.official.resolve())
    random.seed(SEED)
    np.random.seed(SEED)
    command = "python tools/parity/make_data_fixtures.py --official " + str(args.official)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        metrics = {"generated_by": command, "versions": versions(), "pairs": released_metrics(work)}
        masks = {"generated_by": command, "versions": versions(), **released_masks(args.official.resolve(), work)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / P.METRICS_FIXTURE.name).write_text(json.dumps(metrics, indent=1) + "\n")
    (args.out / P.MASKS_FIXTURE.name).write_text(json.dumps(masks, separators=(",", ":")) + "\n")
    print(f"wrote {args.out / P.METRICS_FIXTURE.name} and {args.out / P.MASKS_FIXTURE.name}")


if __name__ == "__main__":
    main()

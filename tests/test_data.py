from __future__ import annotations

import hashlib
import json
import re
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from put.data.dataset import ImageListDataset, resize_shorter
from put.data.demo import DEMO_PHOTOS, build_demo
from put.data.images import ImageReadError
from put.data.sources import PLACES2_NATURE_CATEGORIES, DatasetLayoutError, list_dataset
from put.data.split import SplitError, read_split, write_split


def save_image(path: Path, size: tuple[int, int] = (12, 10), seed: int = 0) -> Path:
    """A small random RGB image; the format follows the suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    arr = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(arr).save(path)
    return path


def photo_of(path: Path) -> str:
    return path.stem.rsplit("_", 1)[0]


# ---------------------------------------------------------------- demo

@pytest.fixture(scope="module")
def demo_dirs(tmp_path_factory):
    a, b = tmp_path_factory.mktemp("demo_a"), tmp_path_factory.mktemp("demo_b")
    kwargs = dict(image_size=32, seed=3, train_crops_per_photo=3, test_crops_per_photo=2, test_photos=3)
    return (a, build_demo(a, **kwargs)), (b, build_demo(b, **kwargs))


def test_demo_photos_are_rgb_photos():
    assert len(DEMO_PHOTOS) >= 10
    for name, loader in DEMO_PHOTOS.items():
        arr = loader()
        assert arr.dtype == np.uint8 and arr.ndim == 3 and arr.shape[2] == 3, name
        assert min(arr.shape[:2]) >= 256, name


def test_demo_is_deterministic(demo_dirs):
    (a, files_a), (b, files_b) = demo_dirs
    for split in ("train", "test"):
        assert [p.relative_to(a) for p in files_a[split]] == [p.relative_to(b) for p in files_b[split]]
        assert [p.read_bytes() for p in files_a[split]] == [p.read_bytes() for p in files_b[split]]


def test_demo_sizes_and_held_out_photos(demo_dirs):
    (root, files), _ = demo_dirs
    train_photos = {photo_of(p) for p in files["train"]}
    test_photos = {photo_of(p) for p in files["test"]}
    assert len(test_photos) == 3 and not train_photos & test_photos
    assert len(files["train"]) == 3 * len(train_photos) and len(files["test"]) == 2 * 3
    for path in files["train"] + files["test"]:
        with Image.open(path) as img:
            assert img.size == (32, 32) and img.mode == "RGB"
    assert list_dataset("demo", root) == files


def test_demo_seed_changes_held_out_choice_or_crops(tmp_path, demo_dirs):
    (_, files), _ = demo_dirs
    other = build_demo(tmp_path, 32, seed=4, train_crops_per_photo=3, test_crops_per_photo=2)
    assert [p.read_bytes() for p in other["train"] + other["test"]] != \
        [p.read_bytes() for p in files["train"] + files["test"]]


def test_demo_removes_stale_crops(tmp_path):
    stale = save_image(tmp_path / "train" / "old_999.png")
    build_demo(tmp_path, 16, train_crops_per_photo=1, test_crops_per_photo=1)
    assert not stale.exists()


# ---------------------------------------------------------------- folder datasets

def test_ffhq_split_at_69000(tmp_path):
    for n in (0, 1, 68999, 69000, 69999):
        save_image(tmp_path / f"{n // 1000 * 1000:05d}" / f"{n:05d}.png")
    with pytest.warns(UserWarning, match="found 5 FFHQ images"):
        splits = list_dataset("ffhq", tmp_path)
    assert [p.stem for p in splits["train"]] == ["00000", "00001", "68999"]
    assert [p.stem for p in splits["test"]] == ["69000", "69999"]


def test_ffhq_duplicate_number_is_an_error(tmp_path):
    save_image(tmp_path / "a" / "00001.png")
    save_image(tmp_path / "b" / "00001.jpg")
    with pytest.raises(DatasetLayoutError, match="00001"):
        list_dataset("ffhq", tmp_path)


PLACES_CATEGORIES = ["/a/airfield", *PLACES2_NATURE_CATEGORIES, "/f/field/wild"]


def make_places(root: Path, with_lists: bool, images: str = "large", train_set: str = "challenge",
                per_category: int = 2) -> None:
    data, val = {"large": ("data_large", "val_large"), "256": ("data_256", "val_256")}[images]
    for label, category in enumerate(PLACES_CATEGORIES):
        for k in range(per_category):
            save_image(root / data / category.lstrip("/") / f"{k:08d}.jpg", seed=label * 10 + k)
    # val images 1..5: airfield, mountain, field/cultivated, field/wild, valley
    val_labels = [0, 1, 6, 9, 8]
    for k, _ in enumerate(val_labels):
        save_image(root / val / f"Places365_val_{k + 1:08d}.jpg", seed=100 + k)
    (root / "categories_places365.txt").write_text(
        "".join(f"{c} {i}\n" for i, c in enumerate(PLACES_CATEGORIES)))
    (root / "places365_val.txt").write_text(
        "".join(f"Places365_val_{k + 1:08d}.jpg {label}\n" for k, label in enumerate(val_labels)))
    if with_lists:
        (root / f"places365_train_{train_set}.txt").write_text(
            "".join(f"{c}/{k:08d}.jpg {i}\n" for i, c in enumerate(PLACES_CATEGORIES) for k in range(per_category)))


@pytest.mark.parametrize("images", ["large", "256"])
@pytest.mark.parametrize("with_lists", [False, True])
def test_places2_full_and_nature(tmp_path, with_lists, images):
    make_places(tmp_path, with_lists, images)
    options = {"places_images": images}
    with pytest.warns(UserWarning, match="Places365-standard") if not with_lists else nullcontext():
        full = list_dataset("places2", tmp_path, **options)
    assert len(full["train"]) == 20 and len(full["test"]) == 5

    with pytest.warns(UserWarning, match="Places365-standard") if not with_lists else nullcontext():
        nature = list_dataset("places2_nature", tmp_path, **options)
    data = tmp_path / ("data_large" if images == "large" else "data_256")
    train_folders = {"/" + p.parent.relative_to(data).as_posix() for p in nature["train"]}
    assert train_folders == set(PLACES2_NATURE_CATEGORIES)  # not airfield, not field/wild
    assert len(nature["train"]) == 16
    assert [p.name for p in nature["test"]] == [f"Places365_val_{k:08d}.jpg" for k in (2, 3, 5)]
    assert all(p.is_file() for p in nature["train"] + nature["test"])


def test_places2_training_sets(tmp_path, monkeypatch):
    """The list of the asked-for training set selects it; without one, the folder's images are the set, and
    a folder that cannot hold the asked-for set is reported."""
    make_places(tmp_path, with_lists=True, train_set="standard", per_category=3)
    (tmp_path / "places365_train_standard.txt").write_text(  # the standard list: the first 2 of each category
        "".join(f"{c}/{k:08d}.jpg {i}\n" for i, c in enumerate(PLACES_CATEGORIES) for k in range(2)))
    assert len(list_dataset("places2_nature", tmp_path, places_train="standard")["train"]) == 16
    monkeypatch.setattr("put.data.sources.PLACES2_STANDARD_PER_CATEGORY", 2)
    challenge = list_dataset("places2_nature", tmp_path, places_train="challenge")  # no challenge list: folders
    assert len(challenge["train"]) == 24
    (tmp_path / "places365_train_standard.txt").unlink()
    with pytest.raises(DatasetLayoutError, match="more than Places365-standard's 2.*places365_train_standard.txt"):
        list_dataset("places2_nature", tmp_path, places_train="standard")
    with pytest.raises(DatasetLayoutError, match="data_256: missing folder"):
        list_dataset("places2_nature", tmp_path, places_images="256")
    with pytest.raises(ValueError, match="places_train must be one of challenge, standard"):
        list_dataset("places2_nature", tmp_path, places_train="extended")


def test_places2_nature_errors_name_the_missing_piece(tmp_path):
    make_places(tmp_path, with_lists=False)
    (tmp_path / "categories_places365.txt").unlink()
    with pytest.raises(DatasetLayoutError, match="categories_places365.txt"):
        with pytest.warns(UserWarning):
            list_dataset("places2_nature", tmp_path)
    for image in (tmp_path / "data_large" / "t" / "tundra").iterdir():
        image.unlink()
    (tmp_path / "data_large" / "t" / "tundra").rmdir()
    with pytest.raises(DatasetLayoutError, match="tundra: missing folder"):
        list_dataset("places2_nature", tmp_path)


def make_imagenet(root: Path, flat_val: bool) -> None:
    for c, wnid in enumerate(["n01440764", "n01443537"]):
        for k in range(3):
            save_image(root / "train" / wnid / f"{wnid}_{k}.JPEG", seed=c * 10 + k)
    for k in range(20):
        sub = "" if flat_val else f"n0144{k % 2}/"
        save_image(root / "val" / f"{sub}ILSVRC2012_val_{k + 1:08d}.JPEG", seed=50 + k)


@pytest.mark.parametrize("flat_val", [True, False])
def test_imagenet_eval_count_and_seed(tmp_path, flat_val):
    make_imagenet(tmp_path, flat_val)
    a = list_dataset("imagenet", tmp_path, seed=1, eval_count=5)
    assert a == list_dataset("imagenet", tmp_path, seed=1, eval_count=5)
    assert a["test"] != list_dataset("imagenet", tmp_path, seed=2, eval_count=5)["test"]
    assert len(a["train"]) == 6 and len(a["test"]) == 5 and a["test"] == sorted(a["test"])
    assert len(set(a["test"])) == 5
    with pytest.raises(ValueError, match="eval_count 1000 exceeds the 20"):
        list_dataset("imagenet", tmp_path)  # the default 1000 is more than this tree has


def test_eval_count_subsamples_other_datasets(tmp_path):
    for n in range(69000, 69010):
        save_image(tmp_path / f"{n}.png")
    save_image(tmp_path / "00000.png")
    with pytest.warns(UserWarning):
        splits = list_dataset("ffhq", tmp_path, seed=0, eval_count=4)
    assert len(splits["test"]) == 4


@pytest.mark.parametrize("dataset", ["ffhq", "places2", "places2_nature", "imagenet", "demo"])
def test_missing_layout_names_the_path(tmp_path, dataset):
    with pytest.raises(DatasetLayoutError, match=re.escape(str(tmp_path / "nowhere"))):
        list_dataset(dataset, tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetLayoutError, match="expected the"):
        list_dataset(dataset, tmp_path / "empty")


# ---------------------------------------------------------------- split

def test_write_split_excludes_bad_files(tmp_path):
    data = tmp_path / "data"
    good = [save_image(data / f"good_{k}.png", seed=k) for k in range(3)]
    test_good = save_image(data / "test_good.jpg", seed=9)
    truncated = data / "truncated.png"
    truncated.write_bytes(good[0].read_bytes()[:60])
    text = data / "notes.jpg"
    text.write_text("this is not an image\n")
    empty = data / "empty.png"
    empty.write_bytes(b"")
    files = {"train": good + [truncated, text], "test": [test_good, empty]}

    report = write_split(files, tmp_path / "split", base=data)
    reasons = {e["path"]: e["reason"] for e in report["excluded"]}
    assert set(reasons) == {"truncated.png", "notes.jpg", "empty.png"}
    assert all(reasons.values())
    assert report["splits"]["train"] == {"listed": 5, "usable": 3, "excluded": 2}
    assert report["splits"]["test"] == {"listed": 2, "usable": 1, "excluded": 1}
    assert json.loads((tmp_path / "split" / "split_report.json").read_text()) == report

    table = pd.read_csv(tmp_path / "split" / "train.csv")
    assert list(table.columns) == ["path", "sha256", "width", "height", "source"]
    assert list(table["path"]) == ["good_0.png", "good_1.png", "good_2.png"]
    assert list(table["source"]) == list(table["path"])  # no source named: each image its own
    assert list(table["sha256"]) == [hashlib.sha256(p.read_bytes()).hexdigest() for p in good]
    assert set(table["width"]) == {12} and set(table["height"]) == {10}
    assert read_split(tmp_path / "split" / "train.csv", base=data) == good
    assert read_split(tmp_path / "split" / "test.csv", base=data) == [test_good]


def test_write_split_without_base_keeps_paths(tmp_path):
    image = save_image(tmp_path / "a.png")
    report = write_split({"train": [image], "test": [image]}, tmp_path / "split")
    assert report["train_test_duplicates"] == [image.as_posix()]  # reported, not fatal
    assert read_split(tmp_path / "split" / "train.csv") == [image]


def test_sources_of_demo_crops_and_of_a_sources_file(tmp_path):
    """The demo's crops name their photograph; any dataset may name sources in a CSV file; read_sources gives them
    back in the split's order, and a file naming an image the split lacks is an error naming the key."""
    from put.data.groups import image_sources
    from put.data.split import read_sources

    root = tmp_path / "data"
    test = [save_image(root / "test" / name) for name in ("hubble_deep_field_000.png", "hubble_deep_field_001.png",
                                                          "retina_000.png")]
    files = {"train": [save_image(root / "train" / "coffee_000.png")], "test": test}
    demo = image_sources("demo", root, files, None)
    assert [demo[p] for p in test] == ["hubble_deep_field", "hubble_deep_field", "retina"]
    assert image_sources("ffhq", root, files, None) == {}
    (tmp_path / "sources.csv").write_text("path,source\ntest/retina_000.png,scan 7\ntest/hubble_deep_field_001.png,"
                                          "scan 7\n")
    named = image_sources("ffhq", root, files, str(tmp_path / "sources.csv"))
    assert named == {test[2]: "scan 7", test[1]: "scan 7"}
    write_split(files, tmp_path / "split", base=root, sources=named)
    assert read_sources(tmp_path / "split" / "test.csv") == ["test/hubble_deep_field_000.png", "scan 7", "scan 7"]

    for text, message in [("path,group\nx,y\n", "lacks column.s. source"),
                          ("path,source\ntest/nowhere.png,a\n", "line 2 names 'test/nowhere.png', which is no image"),
                          ("path,source\ntest/retina_000.png, \n",
                           "line 2 gives 'test/retina_000.png' a blank source")]:
        (tmp_path / "bad.csv").write_text(text)
        with pytest.raises(ValueError, match=f"^data.sources: {re.escape(str(tmp_path / 'bad.csv'))}.*{message}"):
            image_sources("ffhq", root, files, str(tmp_path / "bad.csv"))
    with pytest.raises(ValueError, match="data.sources: .*missing.csv: file not found"):
        image_sources("ffhq", root, files, str(tmp_path / "missing.csv"))


def test_write_split_error_when_nothing_usable(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_text("nope")
    good = save_image(tmp_path / "good.png")
    with pytest.raises(SplitError, match=r"split test .*split_report\.json"):
        write_split({"train": [good], "test": [bad]}, tmp_path / "split")
    report = json.loads((tmp_path / "split" / "split_report.json").read_text())
    assert report["excluded"][0]["path"] == str(bad.as_posix())


# ---------------------------------------------------------------- dataset

@pytest.fixture
def split_csv(tmp_path):
    images = [save_image(tmp_path / "img" / f"{k}.png", size=(48 + 8 * k, 40), seed=k) for k in range(3)]
    write_split({"train": images, "test": images}, tmp_path / "split", base=tmp_path / "img")
    return tmp_path / "split" / "train.csv", tmp_path / "img"


def test_dataset_shapes_and_range(split_csv):
    csv, base = split_csv
    for train in (False, True):
        ds = ImageListDataset(csv, 32, train=train, base=base)
        assert len(ds) == 3
        for key in (0, (2, 7)):
            x = ds[key]
            assert x.shape == (3, 32, 32) and x.dtype.is_floating_point and str(x.dtype) == "torch.float32"
            assert x.min() >= -1 and x.max() <= 1


def test_dataset_augmentation_is_a_function_of_index_and_seed(split_csv):
    csv, base = split_csv
    ds = ImageListDataset(csv, 32, train=True, base=base)
    assert ds[(2, 5)].equal(ImageListDataset(csv, 32, train=True, base=base)[(2, 5)])
    crops = {tuple(ds[(2, seed)].flatten().tolist()) for seed in range(8)}
    assert len(crops) > 1
    # An int key and the test mode give the centre crop, with no randomness.
    test = ImageListDataset(csv, 32, train=False, base=base)
    assert ds[2].equal(test[2]) and test[(2, 5)].equal(test[2])


def test_dataset_unreadable_file_names_it(split_csv):
    csv, base = split_csv
    ds = ImageListDataset(csv, 32, train=True, base=base)
    (base / "1.png").write_bytes(b"broken")
    with pytest.raises(ImageReadError, match="1.png"):
        ds[(1, 0)]


def test_resize_shorter_filters():
    row = np.array([0, 2, 4, 6, 200, 210, 220, 230], dtype=np.uint8)
    image = Image.fromarray(np.repeat(np.tile(row, (8, 1))[..., None], 3, axis=2))
    bilinear = resize_shorter(image, 4, "bilinear")
    # OpenCV's INTER_LINEAR at half-pixel centres: a 2x reduction averages pixel pairs, no wider kernel
    assert bilinear.dtype == np.float32 and np.array_equal(bilinear[0, :, 0], [1, 5, 205, 225])
    bicubic = resize_shorter(image, 4, "bicubic-antialias")
    assert bicubic.shape == (4, 4, 3) and not np.array_equal(bicubic, bilinear)  # the wider kernel mixes the step
    assert resize_shorter(image, 8).shape == (8, 8, 3)  # already the size: unchanged
    wide = Image.fromarray(np.zeros((10, 25, 3), np.uint8))
    assert resize_shorter(wide, 4).shape == (4, 10, 3)  # 25 * 0.4 = 10
    with pytest.raises(ValueError, match="resize_filter"):
        resize_shorter(image, 4, "lanczos")


@pytest.mark.parametrize("resize_filter", ["bilinear", "bicubic-antialias"])
def test_dataset_train_resize_then_crop(split_csv, resize_filter):
    csv, base = split_csv
    ds = ImageListDataset(csv, 32, train=True, base=base, train_resize=48, resize_filter=resize_filter)
    big = resize_shorter(Image.open(base / "2.png").convert("RGB"), 48, resize_filter)
    top, left = (big.shape[0] - 32) // 2, (big.shape[1] - 32) // 2
    expected = torch.from_numpy(big[top:top + 32, left:left + 32].copy()).permute(2, 0, 1) / 127.5 - 1
    assert ds[2].shape == (3, 32, 32) and torch.allclose(ds[2], expected)  # int key: centre crop, no flip
    test = ImageListDataset(csv, 32, train=False, base=base, train_resize=48, resize_filter=resize_filter)
    assert not torch.equal(test[2], ds[2])  # test images are resized to the image size, not train_resize
    with pytest.raises(ValueError, match="train_resize"):
        ImageListDataset(csv, 32, train=True, base=base, train_resize=24)


def test_preset_train_resize_must_cover_the_crop():
    from put.config import PRESETS, Preset
    data = PRESETS["imagenet"].model_dump()
    assert data["data"]["train_resize"] == 264
    data["data"]["train_resize"] = 200
    with pytest.raises(ValueError, match="train_resize"):
        Preset.model_validate(data)

"""The folder dataset (put/data/folder.py): a mixed folder of images screened, split by source and counted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from put.config import PRESETS, Preset
from put.config.params import deep_merge
from put.data.folder import FolderError
from put.data.images import read_rgb
from put.data.split import read_sources, split_dataset

SIZE = 64  # the demo preset's working size


def folder_preset(root: Path, **data) -> Preset:
    changes = {"data": {"dataset": "folder", "root": str(root), "eval_count": None, **data}}
    return Preset.model_validate(deep_merge(PRESETS["demo"].model_dump(), changes))


def save(path: Path, size: tuple[int, int], seed: int, mode: str = "RGB") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rgb = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 4), dtype=np.uint8)
    image = Image.fromarray(rgb, "RGBA").convert(mode)
    image.save(path)
    return path


def mixed_folder(root: Path) -> dict[str, Path]:
    """Twelve photos in six sub-folders (two crops each), PNG/JPEG/WebP/TIFF, greyscale and RGBA among them, two
    loose at the top; then a truncated file, one too small, one duplicate and one not an image at all."""
    formats = [("png", "RGB"), ("jpg", "L"), ("webp", "RGB"), ("tif", "RGBA"), ("PNG", "RGBA"), ("jpeg", "RGB")]
    for i, (suffix, mode) in enumerate(formats):
        for k in range(2):
            save(root / f"shoot{i}" / ("deep" if i == 5 else "") / f"photo{i}_{k}.{suffix}", (SIZE + 10 * i, SIZE + 7),
                 seed=10 * i + k, mode=mode)
    save(root / "loose_a.png", (100, 80), seed=100)
    save(root / "loose_b.jpg", (80, 100), seed=101)
    truncated = save(root / "broken" / "cut.png", (96, 96), seed=200)
    truncated.write_bytes(truncated.read_bytes()[:300])
    small = save(root / "small" / "tiny.png", (SIZE - 1, 200), seed=201)
    duplicate = root / "zz_copy" / "again.png"
    duplicate.parent.mkdir()
    duplicate.write_bytes((root / "shoot0" / "photo0_0.png").read_bytes())
    (root / "notes.txt").write_text("not an image, not listed\n")
    return {"truncated": truncated, "small": small, "duplicate": duplicate}


def test_mixed_folder_split_exclusions_and_counts(tmp_path, capsys):
    root = tmp_path / "mine"
    bad = mixed_folder(root)
    out = tmp_path / "split"
    report = split_dataset(folder_preset(root, test_fraction=0.25, name="My photos"), out)

    left_out = [line for line in capsys.readouterr().err.splitlines() if line.startswith("left out ")]
    assert len(left_out) == 3
    assert left_out[0].startswith(f"left out broken/cut.png: unreadable: {bad['truncated']}: not a readable image")
    assert left_out[1:] == [
        f"left out small/tiny.png: too small: {SIZE - 1}x200, shorter side under the working size {SIZE}",
        "left out zz_copy/again.png: duplicate: the same bytes as shoot0/photo0_0.png"]
    assert {(e["path"], e["kind"]) for e in report["excluded"]} == {
        ("broken/cut.png", "unreadable"), ("small/tiny.png", "too small"), ("zz_copy/again.png", "duplicate")}
    assert report["dataset"] == "folder" and report["name"] == "My photos"
    screened = report["screened"]
    assert screened["found"] == 17 and screened["usable"] == 14
    assert screened["excluded"] == {"unreadable": 1, "too small": 1, "duplicate": 1}
    assert screened["train"] + screened["test"] == 14 and screened["test"] >= 4  # ceil(0.25 * 14)
    assert json.loads((out / "split_report.json").read_text()) == report

    train, test = (pd.read_csv(out / f"{s}.csv").assign(path=lambda t: [Path(p).relative_to(root).as_posix()
                                                                         for p in t["path"]])
                   for s in ("train", "test"))
    names = set(train["path"]) | set(test["path"])
    assert len(names) == 14 and not set(train["path"]) & set(test["path"])
    assert {Path(p).suffix.lower() for p in names} == {".png", ".jpg", ".webp", ".tif", ".jpeg"}
    # Greyscale and RGBA images come out RGB (alpha dropped), as training and evaluation read them.
    for name in ("shoot1/photo1_0.jpg", "shoot3/photo3_0.tif", "shoot4/photo4_1.PNG"):
        assert read_rgb(root / name).shape[2] == 3
    # A sub-folder is one source, on one side only; the loose images are each their own.
    sources = {s: set(read_sources(out / f"{s}.csv")) for s in ("train", "test")}
    assert not sources["train"] & sources["test"]
    assert sources["train"] | sources["test"] == {*(f"shoot{i}" for i in range(5)), "shoot5/deep",
                                                   "loose_a.png", "loose_b.jpg"}
    for table in (train, test):
        assert all(Path(p).parent.as_posix() in (s, ".") for p, s in zip(table["path"], table["source"]))
    # Seeded: the same seed gives the same split, another seed may not but keeps sources whole.
    again = split_dataset(folder_preset(root, test_fraction=0.25, name="My photos"), tmp_path / "again")
    assert again["screened"] == screened
    assert (tmp_path / "again" / "test.csv").read_text() == (out / "test.csv").read_text()


def test_folder_users_own_lists_and_file_list(tmp_path):
    root = tmp_path / "mine"
    mixed_folder(root)
    (tmp_path / "train.txt").write_text("shoot0/photo0_0.png\nshoot1/photo1_0.jpg\nsmall/tiny.png\n")
    (tmp_path / "test.txt").write_text("# held out\nshoot2/photo2_0.webp\nshoot3/photo3_1.tif\n")
    report = split_dataset(folder_preset(root, train_list=str(tmp_path / "train.txt"),
                                         test_list=str(tmp_path / "test.txt")), tmp_path / "lists")
    assert report["screened"]["found"] == 5 and report["screened"]["excluded"] == {"too small": 1}
    assert list(pd.read_csv(tmp_path / "lists" / "test.csv")["path"]) == [str(root / "shoot2/photo2_0.webp"),
                                                                           str(root / "shoot3/photo3_1.tif")]
    (tmp_path / "files.txt").write_text("loose_a.png\nloose_b.jpg\nshoot4/photo4_0.PNG\n")
    listed = split_dataset(folder_preset(root, files=str(tmp_path / "files.txt"), test_fraction=0.5),
                           tmp_path / "files")
    assert listed["screened"]["found"] == 3 and listed["screened"]["test"] == 2


def test_folder_too_small_for_the_split_is_refused_in_one_line(tmp_path, capsys):
    root = tmp_path / "few"
    for k in range(3):
        save(root / "one_photo" / f"crop{k}.png", (SIZE, SIZE), seed=k)
    save(root / "one_photo" / "thumb.png", (SIZE // 2, SIZE // 2), seed=9)
    with pytest.raises(FolderError) as err:
        split_dataset(folder_preset(root), tmp_path / "split")
    message = str(err.value)
    assert "\n" not in message and "needs at least 1 train and 2 test images from 2 sources" in message
    assert "(4 found, left out: 1 too small)" in message  # and the image left out was named before the refusal
    assert "left out one_photo/thumb.png: too small" in capsys.readouterr().err
    assert "at least 3 usable images in 3 sources" in message
    with pytest.raises(FolderError, match="without its pair"):
        split_dataset(folder_preset(root, train_list="x.txt"), tmp_path / "split")


def test_the_seeded_split_takes_two_sources_even_when_one_would_fill_the_test_split(tmp_path):
    root = tmp_path / "two_shoots"
    for shoot in range(3):
        for k in range(6):
            save(root / f"shoot{shoot}" / f"s{shoot}_{k}.png", (SIZE, SIZE), seed=10 * shoot + k)
    report = split_dataset(folder_preset(root, test_fraction=0.1), tmp_path / "split")
    assert report["screened"]["sources"] == {"train": 1, "test": 2}
    assert (report["screened"]["train"], report["screened"]["test"]) == (6, 12)


@pytest.mark.parametrize("preset", ["ffhq", "places2", "imagenet", "ffhq_tpami256", "ffhq_tpami512"])
def test_a_paper_presets_model_runs_on_a_folder_at_the_image_size_it_needs(tmp_path, preset):
    """Any paper preset takes a folder through params.yaml's overrides, as `dvc exp run -S` gives them: its model
    and training schedule stay the preset's, the tpami variant's its TPAMI preset's, and the folder is screened at
    the preset's image size (256, or 512 for the TPAMI 512 models)."""
    from put.config.params import Params

    params = Params(preset=preset, overrides={"data": {"dataset": "folder", "root": str(tmp_path / "mine"),
                                                       "eval_count": None}})
    resolved = params.resolved()
    size = resolved.model.image_size
    assert size == (512 if preset.endswith("512") else 256)
    assert resolved.model == PRESETS[preset].model and resolved.pvqvae_train == PRESETS[preset].pvqvae_train
    assert params.resolved_for("tpami").model.image_size == size
    for shoot in range(4):
        save(tmp_path / "mine" / f"shoot{shoot}" / f"s{shoot}.png", (size, size + 5), seed=shoot, mode="L")
    save(tmp_path / "mine" / "shoot0" / "small.png", (size - 1, size + 40), seed=9)
    report = split_dataset(resolved, tmp_path / "split")
    assert report["screened"]["excluded"] == {"too small": 1}
    assert (report["screened"]["train"], report["screened"]["test"]) == (2, 2)

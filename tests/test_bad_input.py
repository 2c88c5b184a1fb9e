"""Hostile and wrong input to every command gets a named error, exit status 2 and no partial output (issue 13):
decompression bombs in every image reader, pickled checkpoints, unusable --out / --device / counts, broken
stage folders and metrics files."""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from put.cli import main
from put.config.evaluation import MetricProtocol
from put.config.params import load_params
from put.data.dataset import ImageListDataset
from put.data.images import ImageReadError, read_image
from put.data.split import check_image, read_split
from put.io.files import atomic_dir
from put.masks.evaluation import read_manifest
from put.masks.io import MaskError, MaskFolder, read_mask
from put.metrics.diversity import _load_group
from put.metrics.files import read_images, read_metrics
from put.metrics.image import metrics_table
from put.models.checkpoint import CheckpointError
from put.sampling.jobs import read_samples
from put.stages.report import grid_rows
from put.stages.sample import sample_variant
from tests.faults import Payload
from tests.image_files import BOMB_MESSAGE, bomb_png, write_inputs

ROOT = Path(__file__).resolve().parents[1]


def run_put(*args: str, capsys) -> tuple[int, str]:
    """`put ARGS` in this process (the CLI's exit status and what it wrote to stderr; the process boundary is
    tests/test_errors.py's)."""
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().err


# ---------------------------------------------------------------- decompression bombs (issue 13, item 3)

def test_put_inpaint_names_a_decompression_bomb_and_exits_2(tiny_checkpoints, tmp_path, capsys):
    _, _, transformer = tiny_checkpoints
    _, mask = write_inputs(tmp_path)
    bomb = bomb_png(tmp_path / "huge.png")
    code, err = run_put("inpaint", "--checkpoint", str(transformer), "--image", str(bomb), "--mask", str(mask),
                        "--out", str(tmp_path / "out"), "--device", "cpu", capsys=capsys)
    assert code == 2, err
    assert f"put inpaint: error: {bomb}: {BOMB_MESSAGE} (PIL's decompression-bomb limit" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def _split_of(path: Path) -> ImageListDataset:
    csv = path.parent / "split.csv"
    csv.write_text(f"path\n{path}\n")
    return ImageListDataset(csv, 32, train=False)


READERS = {
    "inpaint/sample (read_image)": (lambda p: read_image(p), ImageReadError),
    "masks (read_mask)": (lambda p: read_mask(p), MaskError),
    "PConv mask folder": (lambda p: MaskFolder(p.parent, "hole-white", (32, 32)).load(0), MaskError),
    "dataset loading": (lambda p: _split_of(p)[0], ImageReadError),
    "evaluation (metrics' read_rgb)": (lambda p: metrics_table([(p, p)], MetricProtocol()), ImageReadError),
    "diversity (LPIPS inputs)": (lambda p: _load_group([p, p]), ImageReadError),
}


@pytest.mark.parametrize("reader", READERS)
def test_every_image_reader_turns_a_bomb_into_the_named_error(tmp_path, reader):
    read, error = READERS[reader]
    bomb = bomb_png(tmp_path / "bomb" / "huge.png")
    with pytest.raises(error) as err:
        read(bomb)
    assert str(err.value).startswith(f"{bomb}: {BOMB_MESSAGE}")


def test_split_excludes_a_bomb_with_the_reason(tmp_path):
    bomb = bomb_png(tmp_path / "huge.png")
    assert check_image(bomb)["reason"].startswith(f"{bomb}: {BOMB_MESSAGE}")


def test_images_are_opened_in_one_place_only():
    """Every reader goes through put.data.images.open_image, which names the file whatever is wrong with it."""
    opened = [str(p.relative_to(ROOT)) for p in (ROOT / "put").rglob("*.py") if "Image.open(" in p.read_text()]
    assert opened == ["put/data/images.py"]


# ---------------------------------------------------------------- pickled checkpoints (issue 13, item 4)

def test_put_inpaint_refuses_a_pickled_checkpoint_naming_its_objects(tmp_path, capsys):
    image, mask = write_inputs(tmp_path)
    evil, marker = tmp_path / "evil.pt", tmp_path / "pwned"
    torch.save({"format": "put-checkpoint/1", "x": Payload(marker)}, evil, pickle_module=pickle)
    code, err = run_put("inpaint", "--checkpoint", str(evil), "--image", str(image), "--mask", str(mask),
                        "--out", str(tmp_path / "out"), "--device", "cpu", capsys=capsys)
    assert code == 2, err
    assert (f"put inpaint: error: {evil}: holds pickled Python objects ({os.mkdir.__module__}.mkdir), which a PUT "
            "checkpoint never contains") in err
    assert "it will not be loaded" in err
    assert "weights_only=False" not in err and "Traceback" not in err
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_pretrained_vgg_weights_are_loaded_by_the_same_safe_loader(tmp_path, monkeypatch):
    from put.io.pretrained import VGG19
    from put.models.vgg import VGG19Features

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    VGG19.path.parent.mkdir(parents=True)
    torch.save({"features.0.weight": Payload(tmp_path / "pwned")}, VGG19.path)
    with pytest.raises(CheckpointError, match=re.escape(f"{VGG19.path}: holds pickled Python objects")):
        VGG19Features.pretrained()
    assert not (tmp_path / "pwned").exists()


# ---------------------------------------------------------------- the command line

@pytest.mark.parametrize("args,message", [
    (["bench", "sampling", "--device", "tpu"], "argument --device: 'tpu' is not a torch device"),
    (["bench", "sampling", "--steps", "0"], "argument --steps: expected a positive integer, got 0"),
    (["bench", "pvqvae", "--batch", "-1"], "argument --batch: expected a positive integer, got -1"),
    (["inpaint", "--checkpoint", "c.pt", "--image", "i.png", "--mask", "m.png", "--out", "o", "--samples", "0"],
     "argument --samples: expected a positive integer"),
    (["inpaint", "--checkpoint", "c.pt", "--image", "i.png", "--mask", "m.png", "--out", "o", "--batch-size", "0"],
     "argument --batch-size: expected a positive integer"),
])
def test_bad_arguments_are_refused_before_any_work(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_device_without_cuda_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "sampling", "--device", "cuda"])
    assert "argument --device: cuda: no CUDA device is available here (use --device cpu)" in capsys.readouterr().err


def test_unusable_outputs_are_named_before_any_work(tmp_path, capsys, monkeypatch):
    a_file, a_folder = tmp_path / "file.txt", tmp_path / "folder"
    a_file.write_text("x")
    a_folder.mkdir()
    cases = [
        (["split", "--out", str(a_file)], f"{a_file}: exists and is not a folder (expected an output folder)"),
        (["evaluate", "--samples", "s", "--out", str(a_folder)],
         f"{a_folder}: is a folder (expected an output file name)"),
        (["train-pvqvae", "--out", str(a_file / "pvqvae.pt")],
         f"{a_file}: is not a folder, so {a_file / 'pvqvae.pt'} cannot be written"),
        (["bench", "pvqvae", "--out", str(a_file / "deeper" / "b.json")], f"{a_file}: is not a folder"),
    ]
    for args, message in cases:
        assert main(args) == 2
        assert f"put {args[0]}: error: {message}" in capsys.readouterr().err
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != a_folder)  # root may write anywhere
    assert main(["masks", "--out", str(a_folder / "masks")]) == 2
    assert f"{a_folder}: folder not writable, so {a_folder / 'masks'} cannot be written" in capsys.readouterr().err


def test_an_existing_file_in_the_way_of_an_output_folder_is_named(tiny_checkpoints, tmp_path, capsys):
    _, _, transformer = tiny_checkpoints
    image, mask = write_inputs(tmp_path)
    assert main(["inpaint", "--checkpoint", str(transformer), "--image", str(image), "--mask", str(mask),
                 "--device", "cpu", "--out", str(image)]) == 2
    assert f"{image}: exists and is not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("evaluate,message", [
    ({"bootstrap_resamples": 500}, "overrides.evaluate.bootstrap_resamples: 500 resamples cannot place 95% percentile "
                                   "bounds; at least 1000 are needed (25 beyond each bound) (got 500)"),
    ({"interval_level": 0.99}, "overrides.evaluate.fid_bootstrap_resamples: 1200 resamples cannot place 99% "
                               "percentile bounds; at least 5000 are needed"),
    ({"interval_level": 1.5}, "overrides.evaluate.interval_level: Input should be less than 1 (got 1.5)"),
    ({"multiplicity": "sidak"}, "overrides.evaluate.multiplicity: Input should be 'holm', 'bonferroni', 'bh' or "
                                "'none' (got 'sidak')"),
    ({"min_units": 1}, "overrides.evaluate.min_units: Input should be greater than or equal to 2 (got 1)"),
])
def test_bad_statistics_settings_are_one_line_naming_the_key(tmp_path, capsys, evaluate, message):
    params, out = tmp_path / "params.yaml", tmp_path / "split"
    params.write_text(yaml.safe_dump({"overrides": {"evaluate": evaluate}}))
    out.mkdir()
    (out / "test.csv").write_text("kept\n")
    assert main(["split", "--params", str(params), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"put split: error: {params}: invalid parameters: {message}" in err and len(err.splitlines()) == 1
    assert (out / "test.csv").read_text() == "kept\n"  # nothing overwritten


def test_a_sources_file_naming_no_known_image_is_refused_before_the_split_is_written(tmp_path, capsys):
    root, out = tmp_path / "ffhq", tmp_path / "split"
    root.mkdir()
    for k in range(3):
        Image.fromarray(np.full((8, 8, 3), 40 * k, np.uint8)).save(root / f"{69000 + k}.png")
    sources = tmp_path / "sources.csv"
    sources.write_text("path,source\n69000.png,a\n69009.png,a\n")
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"preset": "ffhq", "overrides": {"data": {"root": str(root),
                                                                                "sources": str(sources)}}}))
    out.mkdir()
    (out / "test.csv").write_text("kept\n")
    with pytest.warns(UserWarning, match="found 3 FFHQ images"):
        assert main(["split", "--params", str(params), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"put split: error: data.sources: {sources} line 3 names '69009.png', which is no image of the split" in err
    assert len(err.splitlines()) == 1 and (out / "test.csv").read_text() == "kept\n"


# ---------------------------------------------------------------- stage folders and files

def test_atomic_dir_replaces_on_success_and_keeps_the_old_folder_on_failure(tmp_path):
    out = tmp_path / "out"
    with atomic_dir(out) as staging:
        (staging / "a.txt").write_text("first")
    with pytest.raises(RuntimeError):
        with atomic_dir(out) as staging:
            (staging / "b.txt").write_text("half")
            raise RuntimeError("bad input")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert [p.name for p in out.iterdir()] == ["a.txt"]
    with atomic_dir(out) as staging:
        (staging / "c.txt").write_text("second")
    assert [p.name for p in out.iterdir()] == ["c.txt"] and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_sample_fails_on_a_broken_mask_without_touching_its_output(tiny_checkpoints, eval_masks, tmp_path):
    _, _, transformer = tiny_checkpoints
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump({"overrides": {"sample": {"diversity_samples": 2, "diversity_images": 1}}}))
    params = load_params(params_file)
    out = tmp_path / "samples"
    sample_variant(params, "put", transformer, eval_masks, out, "cpu")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    # Fewer diversity samples than the report's three: the grid shows those there are, each raw and pasted back.
    rows, titles = grid_rows(out, eval_masks)
    assert titles == ["masked input", "sample 1: raw", "1: pasted back", "sample 2: raw", "2: pasted back",
                      "ground truth"] and len(rows[0]) == 6
    rows, titles = grid_rows(out, eval_masks, composited=True)
    assert titles == ["masked input", "sample 1", "sample 2", "ground truth"] and len(rows[0]) == 4

    broken = sorted((eval_masks / "40-60").glob("*.png"))[-1]
    Image.fromarray(np.full((32, 32), 128, np.uint8)).save(broken)
    with pytest.raises(MaskError, match=f"{re.escape(str(broken))}: mask is not binary"):
        sample_variant(params, "put", transformer, eval_masks, out, "cpu")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_samples_and_metrics_files_are_checked_naming_them(tmp_path):
    with pytest.raises(FileNotFoundError, match="samples.csv: no samples manifest"):
        read_samples(tmp_path)
    (tmp_path / "samples.csv").write_text("image,mask\na,b\n")
    with pytest.raises(ValueError, match="samples.csv: manifest lacks column.s. group, mode, sample, output"):
        read_samples(tmp_path)

    not_json, no_info, other, wrong_preset = (tmp_path / f"{name}.json" for name in "abcd")
    not_json.write_text("{")
    no_info.write_text("{}")
    other.write_text('{"splits": {}}')
    (tmp_path / "c_info.json").write_text("[]")
    wrong_preset.write_text('{"k50": {"20-40": {"psnr": 20.0}}}')
    (tmp_path / "d_info.json").write_text('{"preset": "ffhq", "variant": "put", "unavailable": {}, "n": {}}')
    for path, message in [(tmp_path / "none.json", "file not found (expected a metrics file written by `put eval"),
                          (not_json, "not valid JSON"),
                          (tmp_path / "b_info.json", "file not found (expected the `put evaluate` record written "
                                                     "beside b.json)"),
                          (other, "not a metrics file of `put evaluate` (or its c_info.json is not)"),
                          (wrong_preset, "metrics of the 'ffhq' preset, expected 'demo'")]:
        metrics = path.with_name(path.name.replace("_info", ""))  # the info file is read beside its metrics
        with pytest.raises((ValueError, FileNotFoundError), match=re.escape(f"{path}: ") + ".*" + re.escape(message)):
            read_metrics([metrics], "demo")
    old_layout = tmp_path / "e.json"  # before intervals: counts in the metrics file, none in the record
    old_layout.write_text('{"k50": {"20-40": {"psnr": 20.0, "n": 16}}}')
    (tmp_path / "e_info.json").write_text('{"preset": "demo", "variant": "put", "unavailable": {}}')
    with pytest.raises(ValueError, match=re.escape(f"{old_layout}: not a metrics file") + ".*re-run the evaluate"):
        read_metrics([old_layout], "demo")
    with pytest.raises(FileNotFoundError, match=re.escape(f"{tmp_path / 'e_images.csv'}")):
        read_images(old_layout)


@pytest.mark.parametrize("content", [b"", b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary"], ids=["empty", "binary"])
@pytest.mark.parametrize("name,read", [("test.csv", lambda folder: read_split(folder / "test.csv")),
                                       ("manifest.csv", read_manifest), ("samples.csv", read_samples)])
def test_unreadable_tables_are_named(tmp_path, content, name, read):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / name}: not a readable CSV file")):
        read(tmp_path)

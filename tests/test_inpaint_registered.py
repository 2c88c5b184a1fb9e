"""A model by its registered name: `put inpaint --checkpoint models:/...` gives the same results as by path, and
the Python call (put/sampling/inpainter.py) gives them too, as PIL images or arrays."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from put.cli import main
from put.errors import InputError, MissingFileError
from put.sampling.inpainter import Inpainter
from put.sampling.registered import RegisteredModelError
from put.tracking.base import tracked
from put.tracking.runs import MlflowTracker

NAME = "put-demo-put-transformer"  # how the pipeline registers the demo's put transformer (put/tracking/models.py)


@pytest.fixture
def registered(mlflow_db, tiny_checkpoints, tmp_path, monkeypatch):
    """The tiny random-weight checkpoints logged and registered as a DAG's training stages do; then the run folder
    moves, so that a model by name cannot lean on the path the transformer records."""
    monkeypatch.chdir(tmp_path)
    _, pvqvae, transformer = tiny_checkpoints
    for stage, kind, checkpoint in (("train_pvqvae", "pvqvae", pvqvae), ("train_transformer", "transformer",
                                                                          transformer)):
        with tracked(MlflowTracker.open("demo", "put", stage, "dag0059aaaaa")) as run:
            run.log_model(checkpoint, kind, {}, {})
    moved = tmp_path / "moved"
    shutil.move(transformer.parent, moved)
    return moved / "transformer.pt"


@pytest.fixture
def inputs(tmp_path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    image, mask = tmp_path / "photo.png", tmp_path / "hole.png"
    Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(image)
    hole = np.zeros((32, 32), np.uint8)
    hole[8:24, 4:20] = 255
    Image.fromarray(hole).save(mask)
    return image, mask


def inpaint(checkpoint: str, inputs: tuple[Path, Path], out: Path) -> list[bytes]:
    status = main(["inpaint", "--checkpoint", checkpoint, "--image", str(inputs[0]), "--mask", str(inputs[1]),
                   "--samples", "3", "--seed", "7", "--precision", "fp32", "--device", "cpu", "--out", str(out)])
    assert status in (0, None)
    return [p.read_bytes() for p in sorted(out.glob("*.png"))]


def test_inpaint_by_registered_name_equals_by_path(registered, inputs, tmp_path):
    by_path = inpaint(str(registered), inputs, tmp_path / "by_path")
    assert len(by_path) == 3 and len(set(by_path)) > 1  # three results, diverse
    assert inpaint(f"models:/{NAME}@current", inputs, tmp_path / "by_alias") == by_path
    assert inpaint(f"models:/{NAME}/1", inputs, tmp_path / "by_version") == by_path

    # The Python call: by name, from arrays, gives the same pixels; by path, from files, PIL images.
    photo = np.asarray(Image.open(inputs[0]))
    hole = np.asarray(Image.open(inputs[1])) > 0
    arrays = Inpainter.load(f"models:/{NAME}@current", precision="fp32").inpaint(photo, hole, samples=3, seed=7,
                                                                                 as_arrays=True)
    assert [a.shape for a in arrays] == [(32, 32, 3)] * 3
    expected = [np.asarray(Image.open(p)) for p in sorted((tmp_path / "by_path").glob("*.png"))]
    assert all(np.array_equal(a, e) for a, e in zip(arrays, expected))
    images = Inpainter.load(registered, precision="fp32").inpaint(*inputs, samples=3, seed=7)
    assert all(isinstance(i, Image.Image) and np.array_equal(np.asarray(i), e) for i, e in zip(images, expected))


def test_an_unknown_or_malformed_name_is_one_line_naming_the_store(registered, inputs, tmp_path):
    with pytest.raises(RegisteredModelError) as err:
        Inpainter.load(f"models:/{NAME}@best")
    assert "\n" not in str(err.value) and "mlflow.db" in str(err.value) and NAME in str(err.value)
    with pytest.raises(RegisteredModelError, match="expected a registered model as models:/NAME@ALIAS"):
        Inpainter.load("models:/no-alias")
    with pytest.raises(RegisteredModelError, match="a pvqvae model; inpainting needs a transformer"):
        Inpainter.load("models:/put-demo-put-pvqvae@current")
    with pytest.raises(InputError):
        Inpainter.load(registered).inpaint(*inputs, polarity="sideways")


def test_serve_lists_a_registered_model_and_a_path_by_name(registered, tmp_path):
    from put.commands.serve import add_arguments
    from put.serve.catalog import named_entry

    folder = tmp_path / "fetched"
    folder.mkdir()
    entry = named_entry(f"models:/{NAME}@current", folder)
    assert entry.id == f"models:/{NAME}@current (version 1)" and not entry.problem
    assert (entry.preset, entry.variant) == ("tiny", "put")
    by_path = named_entry(str(registered), folder)
    loaded, expected = entry.load("cpu"), by_path.load("cpu")
    assert all(np.array_equal(a, b) for a, b in zip(loaded.state_dict().values(), expected.state_dict().values()))


    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--model", f"models:/{NAME}@current", "--model", str(registered), "--precision", "bf16"])
    assert args.model == [f"models:/{NAME}@current", str(registered)] and args.runs is None
    with pytest.raises(MissingFileError, match="no such checkpoint file"):
        named_entry(str(tmp_path / "missing.pt"), folder)

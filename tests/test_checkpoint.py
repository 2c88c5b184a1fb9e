"""Checkpoints: round trip, pickle-free loading, and refusal of damaged or mismatched files."""

from __future__ import annotations

import argparse
import collections
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from put.models.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    load_put_model,
    pickled_objects_message,
    save_checkpoint,
    save_pvqvae,
    weights_digest,
)
from put.models.put_model import PUTModel
from tests.conftest import TINY
from tests.faults import Payload


def test_round_trip_restores_identical_models(tiny_checkpoints):
    model, _, transformer_path = tiny_checkpoints
    loaded = load_put_model(transformer_path)
    for a, b in [(model.pvqvae, loaded.pvqvae), (model.transformer, loaded.transformer)]:
        sa, sb = a.state_dict(), b.state_dict()
        assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert loaded.config == TINY


def test_training_state_round_trips_without_pickle(tmp_path):
    model = PUTModel(TINY)
    opt = torch.optim.AdamW(model.transformer.parameters(), lr=1e-3, betas=(0.9, 0.95))
    model.transformer(torch.randn(1, 16, 4, 4)).sum().backward()
    opt.step()
    training = {"step": 3, "optimizer": opt.state_dict(), "rng": {"torch": torch.get_rng_state()}}
    path = tmp_path / "t.pt"
    save_checkpoint(path, Checkpoint("pvqvae", {"model": TINY.model_dump()}, model.pvqvae.state_dict(), training))
    ckpt = load_checkpoint(path, kind="pvqvae")
    assert ckpt.training["step"] == 3
    opt.load_state_dict(ckpt.training["optimizer"])
    assert torch.equal(ckpt.training["rng"]["torch"], training["rng"]["torch"])


def test_truncated_file_is_rejected(tiny_checkpoints):
    _, pvqvae_path, _ = tiny_checkpoints
    data = pvqvae_path.read_bytes()
    pvqvae_path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(pvqvae_path)


def test_tampered_weights_are_rejected(tiny_checkpoints, tmp_path):
    _, pvqvae_path, _ = tiny_checkpoints
    payload = torch.load(pvqvae_path, weights_only=True)
    name = next(iter(payload["model"]))
    payload["model"][name] = payload["model"][name] + 1e-3
    torch.save(payload, pvqvae_path)
    with pytest.raises(CheckpointError, match="do not match their recorded digest"):
        load_checkpoint(pvqvae_path)


@pytest.mark.parametrize("zip_format", [True, False], ids=["torch.save", "legacy"])
def test_pickled_objects_are_refused_naming_them_and_nothing_runs(tmp_path, zip_format):
    path, marker = tmp_path / "evil.pt", tmp_path / "pwned"
    torch.save({"format": "put-checkpoint/1", "x": Payload(marker)}, path, pickle_module=pickle,
               _use_new_zipfile_serialization=zip_format)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    message = str(err.value)
    assert message.startswith(f"{path}: holds pickled Python objects ({os.mkdir.__module__}.mkdir)")
    assert "which a PUT checkpoint never contains" in message and "it will not be loaded" in message
    assert "weights_only=False" not in message and "allowlist" not in message
    assert not marker.exists()


def test_pickled_objects_message_names_every_global_torch_lists(tmp_path):
    path = tmp_path / "objects.pt"
    torch.save({"args": argparse.Namespace(lr=1), "opt": collections.OrderedDict(a=Payload(tmp_path / "x"))}, path)
    message = pickled_objects_message(path, expected="the authors' checkpoint")
    assert "argparse.Namespace" in message and f"{os.mkdir.__module__}.mkdir" in message
    assert "which the authors' checkpoint never contains" in message


@pytest.mark.parametrize("payload,message", [
    ({"format": "put-checkpoint/1", "kind": "pvqvae"}, "lacks config, model, weights_digest"),
    ({"format": "put-checkpoint/1", "kind": "pvqvae", "config": "{}", "model": {"w": 1}, "weights_digest": ""},
     "not a mapping of names to tensors"),
    ({"format": "put-checkpoint/1", "kind": "pvqvae", "config": "{", "model": {}, "weights_digest": weights_digest({})},
     "config is not valid JSON"),
])
def test_incomplete_put_checkpoints_are_named_errors(tmp_path, payload, message):
    path = tmp_path / "odd.pt"
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path)


def test_wrong_kind_and_foreign_files_are_rejected(tiny_checkpoints, tmp_path):
    _, pvqvae_path, transformer_path = tiny_checkpoints
    with pytest.raises(CheckpointError, match="is a pvqvae checkpoint, expected a transformer"):
        load_checkpoint(pvqvae_path, kind="transformer")
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match="not a PUT checkpoint"):
        load_checkpoint(foreign)
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "missing.pt")


def test_missing_pvqvae_is_an_error_never_random_weights(tiny_checkpoints):
    _, pvqvae_path, transformer_path = tiny_checkpoints
    pvqvae_path.unlink()
    with pytest.raises(CheckpointError, match="does not exist; pass the right file with --pvqvae"):
        load_put_model(transformer_path)


def test_different_pvqvae_is_rejected(tiny_checkpoints, tmp_path):
    _, pvqvae_path, transformer_path = tiny_checkpoints
    other = PUTModel(TINY)
    save_pvqvae(pvqvae_path, other.pvqvae, TINY)  # same path, other weights
    with pytest.raises(CheckpointError, match="refusing to combine mismatched models"):
        load_put_model(transformer_path)


def test_run_folder_can_move_and_override_path_is_checked(tiny_checkpoints, tmp_path):
    """The transformer finds its P-VQVAE relative to itself (the original folder is gone, so an absolute path
    would fail), and --pvqvae overrides that path, checked by content."""
    model, _, transformer_path = tiny_checkpoints
    moved = Path(shutil.move(transformer_path.parent, tmp_path / "moved"))
    assert not transformer_path.parent.exists()
    loaded = load_put_model(moved / "transformer.pt")
    assert all(torch.equal(a, b) for a, b in zip(loaded.pvqvae.state_dict().values(),
                                                 model.pvqvae.state_dict().values()))
    (moved / "pvqvae.pt").rename(moved / "renamed.pt")
    with pytest.raises(CheckpointError, match="does not exist; pass the right file with --pvqvae"):
        load_put_model(moved / "transformer.pt")
    assert load_put_model(moved / "transformer.pt", pvqvae_path=moved / "renamed.pt").config == TINY
    save_pvqvae(moved / "other.pt", PUTModel(TINY).pvqvae, TINY)  # another P-VQVAE: its hash differs
    with pytest.raises(CheckpointError, match="refusing to combine mismatched models"):
        load_put_model(moved / "transformer.pt", pvqvae_path=moved / "other.pt")


def test_atomic_write_leaves_old_file_on_failure(tiny_checkpoints, monkeypatch):
    _, pvqvae_path, _ = tiny_checkpoints
    before = pvqvae_path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(OSError, match="disk full"):
        save_pvqvae(pvqvae_path, PUTModel(TINY).pvqvae, TINY)
    assert pvqvae_path.read_bytes() == before
    assert [p.name for p in pvqvae_path.parent.iterdir() if p.name.startswith(".")] == []

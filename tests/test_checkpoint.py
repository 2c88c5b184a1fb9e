"""Checkpoints: round trip, pickle-free loading, and refusal of damaged or mismatched files."""

from __future__ import annotations

import pickle
import shutil

import pytest
import torch

from put.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from put.model_io import load_put_model, save_pvqvae
from put.models.put_model import PUTModel
from tests.conftest import TINY


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


def test_pickled_objects_are_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pt"
    with open(path, "wb") as f:
        torch.save({"format": "put-checkpoint/1", "x": Evil()}, f, pickle_module=pickle)
    with pytest.raises(CheckpointError, match="not a readable PUT checkpoint"):
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
    _, pvqvae_path, transformer_path = tiny_checkpoints
    moved = shutil.copytree(transformer_path.parent, tmp_path / "moved")
    load_put_model(moved / "transformer.pt")
    (moved / "pvqvae.pt").rename(moved / "renamed.pt")
    load_put_model(moved / "transformer.pt", pvqvae_path=moved / "renamed.pt")


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

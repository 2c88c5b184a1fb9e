"""Self-describing, pickle-free, atomically written checkpoints, and the models built back from them.

One file per model: format tag, kind, config, weights and digest, optional training state, and for a transformer
its P-VQVAE's path and SHA-256. Written to a temporary name and renamed; read with `weights_only=True`.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from put.config import GENERATION_NAMES, ModelConfig
from put.errors import FileMismatchError
from put.io.diskspace import DiskFullError, as_disk_full, free_bytes
from put.io.files import atomic_path, file_sha256
from put.models.put_model import PUTModel
from put.models.pvqvae import PVQVAE

FORMAT = "put-checkpoint/1"
KINDS = ("pvqvae", "transformer")
PAYLOAD_KEYS = ("kind", "config", "model", "weights_digest")


class CheckpointError(FileMismatchError, RuntimeError):
    """A checkpoint that is missing, unreadable, altered, or not the one expected (kind, variant, P-VQVAE)."""


def weights_digest(state: dict[str, torch.Tensor]) -> str:
    """Digest of names, dtypes, shapes and values: catches a file whose weights were altered."""
    digest = hashlib.blake2b(digest_size=32)
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


@dataclass
class Checkpoint:
    kind: str
    config: dict[str, Any]
    model: dict[str, torch.Tensor]
    training: dict[str, Any] = field(default_factory=dict)
    pvqvae_path: str | None = None      # transformer only, relative to the transformer file's folder
    pvqvae_sha256: str | None = None
    path: Path | None = None


def tensor_bytes(obj: Any) -> int:
    """Bytes of the tensor storages in `obj` (nested dicts, lists, tuples; each storage once): about what
    torch.save writes, less a few hundred bytes per tensor."""
    seen: dict[tuple[str, int], int] = {}

    def visit(item: Any) -> None:
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            seen[(str(item.device), storage.data_ptr())] = storage.nbytes()
        elif isinstance(item, dict):
            for value in item.values():
                visit(value)
        elif isinstance(item, (list, tuple)):
            for value in item:
                visit(value)

    visit(obj)
    return sum(seen.values())


def torch_write_failed(err: RuntimeError) -> bool:
    """torch's zip writer reporting a short write ("unexpected pos N vs M", "file write failed")."""
    return any(text in str(err) for text in ("unexpected pos", "file write failed", "PytorchStreamWriter failed"))


def atomic_torch_save(obj: Any, path: str | os.PathLike, kept: str | None = None) -> None:
    """torch.save through a temporary file: `path` is the old file or the complete new one. A full disk is a
    DiskFullError naming `path`, the bytes and `kept`, also when torch's zip writer reports ENOSPC as
    RuntimeError("unexpected pos") (the OSError is its context; failing that, free space decides)."""
    path = Path(path)
    needed = tensor_bytes(obj)
    try:
        with atomic_path(path, needed) as tmp, open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())  # the data reaches the disk before the rename makes it visible
    except Exception as err:
        full = as_disk_full(err, path, needed, kept)
        if full is None and isinstance(err, RuntimeError) and torch_write_failed(err):
            free = free_bytes(path)
            full = DiskFullError(path, needed, kept) if free is not None and free < needed else None
        if full is not None:
            raise full from err
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save_checkpoint(path: str | os.PathLike, ckpt: Checkpoint, kept: str | None = None) -> None:
    """`kept`: what a DiskFullError says is intact (default: the earlier file at `path`, if any)."""
    if ckpt.kind not in KINDS:
        raise ValueError(f"checkpoint kind must be one of {KINDS}, got {ckpt.kind!r}")
    path = Path(path)
    pvqvae = None
    if ckpt.kind == "transformer":
        if not ckpt.pvqvae_path or not ckpt.pvqvae_sha256:
            raise ValueError("a transformer checkpoint must record its P-VQVAE checkpoint's path and sha256")
        pvqvae = {"path": ckpt.pvqvae_path, "sha256": ckpt.pvqvae_sha256}
    model = {k: v.detach().cpu() for k, v in ckpt.model.items()}
    atomic_torch_save({
        "format": FORMAT, "kind": ckpt.kind, "config": json.dumps(ckpt.config, sort_keys=True),
        "model": model, "weights_digest": weights_digest(model), "training": ckpt.training, "pvqvae": pvqvae,
    }, path, kept)


def pickled_objects_message(path: str | os.PathLike, refusal: str = "", expected: str = "a PUT checkpoint") -> str:
    """Why a file that a weights-only `torch.load` refused is not loaded: the Python objects it holds, named when
    torch can list them without executing anything, else from `refusal` (torch's error text, of which only the
    object's name is kept, never its advice to load with weights_only=False: that would run them)."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # not a zip archive torch.save wrote (a legacy or raw pickle): torch's text names one
        names = re.findall(r"GLOBAL ([\w.]+)", refusal)[:1]
    held = (f"pickled Python objects ({', '.join(names)})" if names else
            "data a weights-only load refuses (pickled Python objects, or not a file torch.save wrote)")
    return (f"{path}: holds {held}, which {expected} never contains (only tensors, numbers, strings and "
            "containers of them); it will not be loaded, since unpickling it could run arbitrary code")


def load_torch_file(path: str | os.PathLike, expected: str = "a PUT checkpoint") -> Any:
    """`torch.load(weights_only=True)` on the CPU, with errors that name the file and what was expected."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: file not found (expected {expected})")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise CheckpointError(pickled_objects_message(path, str(err), expected)) from None
    except Exception as err:  # zip/unpickling errors of a truncated or foreign file
        raise CheckpointError(f"{path}: not readable as {expected} (truncated or corrupt?): {err}") from None


def load_checkpoint(path: str | os.PathLike, kind: str | None = None) -> Checkpoint:
    path = Path(path)
    payload = load_torch_file(path)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a PUT checkpoint (expected format {FORMAT!r})")
    if missing := [key for key in PAYLOAD_KEYS if key not in payload]:
        raise CheckpointError(f"{path}: PUT checkpoint lacks {', '.join(missing)} (file altered or damaged)")
    if kind is not None and payload["kind"] != kind:
        raise CheckpointError(f"{path}: is a {payload['kind']} checkpoint, expected a {kind} checkpoint")
    model = payload["model"]
    if not (isinstance(model, dict) and all(isinstance(t, torch.Tensor) for t in model.values())):
        raise CheckpointError(f"{path}: its weights are not a mapping of names to tensors (file altered or damaged)")
    if weights_digest(model) != payload["weights_digest"]:
        raise CheckpointError(f"{path}: weights do not match their recorded digest (file altered or damaged)")
    try:
        config = json.loads(payload["config"])
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: its config is not valid JSON ({err}; file altered or damaged)") from None
    pvqvae = payload.get("pvqvae") or {}
    return Checkpoint(payload["kind"], config, model, payload.get("training") or {}, pvqvae.get("path"),
                      pvqvae.get("sha256"), path)


def relative_reference(target: str | os.PathLike, from_file: str | os.PathLike) -> str:
    """Path of `target` as stored inside `from_file`: relative to its folder, so a run folder can move."""
    return os.path.relpath(Path(target).resolve(), Path(from_file).resolve().parent)


def resolve_pvqvae(transformer: Checkpoint, override: str | os.PathLike | None = None) -> Path:
    """The P-VQVAE file a transformer checkpoint was trained on, verified by content hash."""
    if override is not None:
        candidate = Path(override)
    else:
        candidate = Path(transformer.pvqvae_path)
        if not candidate.is_absolute() and transformer.path is not None:
            candidate = transformer.path.resolve().parent / candidate
    if not candidate.is_file():
        raise CheckpointError(
            f"{transformer.path}: was trained on the P-VQVAE checkpoint {candidate}, which does not exist; "
            f"pass the right file with --pvqvae (its sha256 must be {transformer.pvqvae_sha256})")
    actual = file_sha256(candidate)
    if actual != transformer.pvqvae_sha256:
        raise CheckpointError(
            f"{candidate}: sha256 {actual} differs from {transformer.pvqvae_sha256}, the P-VQVAE that "
            f"{transformer.path} was trained on; refusing to combine mismatched models")
    return candidate


def checkpoint_config(ckpt: Checkpoint) -> ModelConfig:
    try:
        return ModelConfig.model_validate(ckpt.config["model"])
    except Exception as err:
        raise CheckpointError(f"{ckpt.path}: its model config is invalid: {err}") from err


def check_variant(ckpt: Checkpoint, expected: str, asked: str) -> None:
    """Refuses a checkpoint that records another variant than `expected`, which `asked` (the option that chose it)
    needs: one variant's results must never carry another's name. A checkpoint recording none passes."""
    recorded = ckpt.config.get("variant")
    if recorded is not None and recorded != expected:
        raise CheckpointError(f"{ckpt.path}: is a checkpoint of variant {recorded!r}, but {asked} needs variant "
                              f"{expected!r}; pass that variant's checkpoint, or the variant this one was trained as")


def check_generation(config: ModelConfig, expected: str, path: str | os.PathLike, needed_by: str) -> None:
    """Refuses a checkpoint whose model is of the other release (a TPAMI model where a CVPR one is expected, or the
    reverse): one line naming both."""
    if config.generation != expected:
        raise CheckpointError(f"{path}: holds a {GENERATION_NAMES[config.generation]} model, but {needed_by} expects "
                              f"a {GENERATION_NAMES[expected]} one; pass a checkpoint of that release or choose a "
                              f"preset of this one")


def load_pvqvae(path: str | os.PathLike) -> tuple[PVQVAE, Checkpoint]:
    ckpt = load_checkpoint(path, kind="pvqvae")
    model = PVQVAE(checkpoint_config(ckpt).pvqvae)
    model.load_state_dict(ckpt.model)
    return model.eval(), ckpt


def load_put_model(transformer_path: str | os.PathLike, pvqvae_path: str | os.PathLike | None = None,
                   device: str | torch.device = "cpu", variant: str | None = None,
                   label: str | None = None, generation: str | None = None) -> PUTModel:
    """A transformer checkpoint plus the exact P-VQVAE it was trained on (verified by SHA-256); with `variant`,
    the checkpoint must record that variant (`label`: the --variant that asked for it), with `generation`, be a
    model of that release."""
    ckpt = load_checkpoint(transformer_path, kind="transformer")
    if variant is not None:
        check_variant(ckpt, variant, f"--variant {label or variant}")
    config = checkpoint_config(ckpt)
    if generation is not None:
        check_generation(config, generation, transformer_path, f"--variant {label or variant}")
    pvqvae_file = resolve_pvqvae(ckpt, pvqvae_path)
    pvqvae, _ = load_pvqvae(pvqvae_file)
    if pvqvae.config != config.pvqvae:
        raise CheckpointError(f"{pvqvae_file}: P-VQVAE config differs from the one {Path(transformer_path)} expects")
    model = PUTModel(config)
    model.pvqvae.load_state_dict(pvqvae.state_dict())
    model.transformer.load_state_dict(ckpt.model)
    return model.eval().to(device)


def save_pvqvae(path: str | os.PathLike, model: PVQVAE, config: ModelConfig, training: dict | None = None,
                **labels: str) -> None:
    """labels (preset, variant, ...) are stored beside the config for people and tables to read."""
    save_checkpoint(path, Checkpoint("pvqvae", {"model": config.model_dump(), **labels}, model.state_dict(),
                                     training or {}))


def save_transformer(path: str | os.PathLike, model: PUTModel, pvqvae_path: str | os.PathLike,
                     training: dict | None = None, **labels: str) -> None:
    """Records the P-VQVAE checkpoint (relative path + SHA-256) that the transformer was trained on."""
    save_checkpoint(path, Checkpoint(
        "transformer", {"model": model.config.model_dump(), **labels}, model.transformer.state_dict(),
        training or {}, pvqvae_path=relative_reference(pvqvae_path, path), pvqvae_sha256=file_sha256(pvqvae_path)))

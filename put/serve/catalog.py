"""What the page may choose from: the trained (and imported) models under a runs folder and the presets' test
images, each under an id this server assigns. The page sends ids only; no path it sends is ever opened."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch

from put.config import VARIANT_COLOURS
from put.config.params import OFFICIAL_PREFIX
from put.config.paths import TRANSFORMER_CHECKPOINT, masks_dir
from put.errors import MissingFileError
from put.models.checkpoint import FORMAT, CheckpointError, load_torch_file
from put.models.put_model import PUTModel
from put.serve.limits import PATCH

TRANSFORMER_FILE = Path(TRANSFORMER_CHECKPOINT).name  # what a run folder holds: runs/<preset>/<variant>/
TEST_IMAGES_LISTED = 1000  # the dropdown lists at most this many test images per preset


@dataclass
class ModelEntry:
    """A transformer checkpoint and the P-VQVAE it records, loaded on first use, kept until unloaded (the server
    keeps the most recently used few: put/serve/loaded.py)."""
    id: str            # its folder relative to the runs folder, e.g. demo/put
    transformer: Path
    preset: str
    variant: str
    official: bool     # imported from the authors' released weights (`put import-official`)
    problem: str = ""  # why it cannot be used (listed, not selectable)
    patch: int = PATCH  # pixels per token side (its config's patch_size): what a request costs in attention
    pvqvae: Path | None = None  # its P-VQVAE, where not the file the checkpoint records (a registered model's)
    _model: PUTModel | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def label(self) -> str:
        if self.problem:
            return self.id
        kind = "released weights" if self.official else "trained"
        return f"{self.variant} · preset {self.preset} · {kind} ({self.id})"

    def describe(self) -> dict:
        return {"id": self.id, "label": self.label, "preset": self.preset, "variant": self.variant,
                "colour": VARIANT_COLOURS.get(self.variant), "official": self.official, "problem": self.problem}

    def load(self, device: str) -> PUTModel:
        """The model, loaded once (the checkpoint and its P-VQVAE verified as `put inpaint` does)."""
        from put.models.checkpoint import load_put_model

        with self._lock:
            if self._model is None:
                self._model = load_put_model(self.transformer, self.pvqvae, device)
            return self._model

    def unload(self) -> None:
        with self._lock:
            self._model = None


def peek_labels(path: Path) -> tuple[dict, str]:
    """A checkpoint's labels (preset, variant, source, ...) and its P-VQVAE reference, read without loading its
    weights (memory-mapped, weights only); errors name the file as `put inpaint` would."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # not torch's zip format, or refused: read whole, with the CLI's errors
        payload = load_torch_file(path)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or payload.get("kind") != "transformer":
        raise CheckpointError(f"{path}: not a PUT transformer checkpoint")
    reference = (payload.get("pvqvae") or {}).get("path")
    if not reference:
        raise CheckpointError(f"{path}: records no P-VQVAE (file altered or damaged)")
    try:
        return json.loads(payload["config"]), reference
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"{path}: its config is missing or not valid JSON (file altered or damaged)") from None


def read_entry(path: Path, runs: Path) -> ModelEntry:
    folder = path.parent.relative_to(runs).as_posix()
    entry_id = runs.name if folder == "." else folder
    try:
        labels, reference = peek_labels(path)
    except CheckpointError as err:  # listed with the reason, not selectable
        return ModelEntry(entry_id, path, "?", "?", False, problem=str(err))
    pvqvae = path.parent / reference
    entry = ModelEntry(entry_id, path, str(labels.get("preset", "?")), str(labels.get("variant", "?")),
                       labels.get("source") == "official" or path.parent.name.startswith(OFFICIAL_PREFIX),
                       patch=int(labels.get("model", {}).get("pvqvae", {}).get("patch_size", PATCH)))
    if not pvqvae.is_file():
        entry.problem = f"{path}: its P-VQVAE {pvqvae} does not exist"
    return entry


def named_entry(reference: str, folder: Path, store: str | None = None) -> ModelEntry:
    """A model given by name on the command line (`put serve --model`): a transformer checkpoint's path, or a
    registered model (`models:/NAME@ALIAS`, `models:/NAME/VERSION`) fetched into `folder`; its id is the name."""
    from put.sampling.registered import fetch_registered, is_registered

    if not is_registered(reference):
        path = Path(reference)
        if not path.is_file():
            raise MissingFileError(f"--model {reference}: no such checkpoint file (expected a transformer .pt or "
                                   "models:/NAME@ALIAS)")
        entry = read_entry(path.resolve(), path.resolve().parent)
        entry.id = reference
        return entry
    fetched = fetch_registered(reference, folder / f"model{len(list(folder.iterdir()))}", store)
    entry = read_entry(fetched.transformer, fetched.transformer.parent)
    entry.id, entry.pvqvae = f"{reference} (version {fetched.version})", fetched.pvqvae
    if entry.preset != "?":  # its labels read: the P-VQVAE is the registered one, not the recorded file
        entry.problem = ""
    return entry


def find_models(runs: Path) -> dict[str, ModelEntry]:
    """Every transformer checkpoint under `runs` (any depth), by id."""
    runs = Path(runs)
    if not runs.is_dir():
        raise MissingFileError(f"{runs}: runs folder not found (expected e.g. runs/demo, with <variant>/"
                                 f"{TRANSFORMER_FILE} below it)")
    entries = [read_entry(path, runs) for path in sorted(runs.rglob(TRANSFORMER_FILE))]
    if not entries:
        raise MissingFileError(f"{runs}: no {TRANSFORMER_FILE} below this folder (train one with `dvc repro`, or "
                                "import the released weights with `put import-official`)")
    return {entry.id: entry for entry in entries}


def find_test_images(presets: set[str]) -> dict[str, list[Path]]:
    """Per preset, its test images as the evaluation sees them (centre crops at the working size, written by the
    `masks` stage to data/<preset>/masks/gt/); presets whose masks stage has not run have none."""
    found = {}
    for preset in sorted(presets):
        gt = masks_dir(preset) / "gt"
        images = sorted(gt.glob("*.png"))[:TEST_IMAGES_LISTED] if gt.is_dir() else []
        if images:
            found[preset] = images
    return found

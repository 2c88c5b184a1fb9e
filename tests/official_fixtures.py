"""The parity fixtures made from the authors' code (tools/parity/make_model_fixtures.py), read back without it.

Their models' weights are not stored: the manifest holds each model's key names and shapes, and the
weights are regenerated from the same seed with tools/parity/seeded_weights.py, then written as a
checkpoint in their trainer's format for `put import-official` to convert.

And what the parity tests of both generations share (tests/test_parity_transformer.py, test_parity_tpami.py): our
greedy sampling of the fixture's inputs, with the step at which each position was filled, and the largest
difference between two PNGs.
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from put.official.keys import DROPPED_PREFIXES
from put.sampling.eager import sample_iterative
from put.sampling.schedules import SamplingOptions

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests/fixtures/parity/models"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
# The TPAMI 2024 release's (branch main) fixtures: tools/parity/make_tpami_fixtures.py
TPAMI_FIXTURES = ROOT / "tests/fixtures/parity/tpami"
TPAMI_MANIFEST = json.loads((TPAMI_FIXTURES / "manifest.json").read_text())
DEMO_OVERRIDES = FIXTURES / "official_demo_overrides.json"
TINY_OVERRIDES = FIXTURES / "official_tiny_overrides.json"
PVQVAE_VARIANTS = ("put", "conv", "one", "no_ref")


@cache
def seeded_weights():
    """tools/parity/seeded_weights.py, imported by path (tools/ is not a package of the project)."""
    spec = importlib.util.spec_from_file_location("seeded_weights", ROOT / "tools/parity/seeded_weights.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def official_state(name: str, manifest: dict = MANIFEST) -> dict[str, torch.Tensor]:
    """Their state dict `name` of the manifest (e.g. pvqvae_conv, transformer_put), seeded as the script did.
    The loss module's VGG19 copies and BCE labels, which the importer drops, are zero-stride stand-ins."""
    layout = manifest["layouts"][name]
    dropped = {k: torch.zeros(()).expand(shape) for k, shape in layout.items() if k.startswith(DROPPED_PREFIXES)}
    return seeded_weights().seeded_state(layout, manifest["seed"], dropped, manifest.get("aliases", {}).get(name, ()))


def write_official(path: Path, name: str, manifest: dict = MANIFEST) -> Path:
    """A checkpoint in their trainer's format (Solver.save) holding the seeded model `name`."""
    torch.save({"last_epoch": 0, "last_iter": 0, "spend_time": 0.0, "model": official_state(name, manifest)}, path)
    return path


def outputs(name: str, folder: Path = FIXTURES) -> dict[str, torch.Tensor]:
    with np.load(folder / f"{name}.npz") as data:
        return {k: torch.from_numpy(data[k]) for k in data.files}


def inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(images in [-1, 1], keep-mask, erase keep-mask) as float tensors, from the fixture's uint8/bool arrays."""
    data = outputs("inputs")
    return data["images"].float() / 127.5 - 1, data["keep"].float(), data["erase"].float()


def greedy(model, options: SamplingOptions) -> tuple[torch.Tensor, torch.Tensor]:
    """Our iterative sampling of the fixture's inputs (top-1 options: greedy): (tokens (B, L), step at which each
    position was filled, -1 if known). A position was filled at step s when its input changed between the
    forwards of steps s and s + 1."""
    images, keep, _ = inputs()
    features, known, tokens = model.transformer_inputs(images, keep)
    seen = []
    forward = model.transformer.forward_embedded
    model.transformer.forward_embedded = lambda x: seen.append(x.clone()) or forward(x)
    try:
        result = sample_iterative(model, features, known, tokens, options,
                                  known_fraction=model.pvqvae.known_fraction(keep))
    finally:
        del model.transformer.forward_embedded
    filled = torch.where(known.flatten(1), -1, len(seen) - 1)
    for step in range(len(seen) - 2, -1, -1):
        filled[(seen[step + 1] != seen[step]).any(-1)] = step
    return result.flatten(1), filled


def png_difference(ours, theirs) -> int:
    a = np.asarray(Image.open(ours).convert("RGB"), dtype=np.int16)
    b = np.asarray(Image.open(theirs).convert("RGB"), dtype=np.int16)
    assert a.shape == b.shape
    return int(np.abs(a - b).max())

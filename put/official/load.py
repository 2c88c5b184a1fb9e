"""Reading the authors' checkpoint files without running any of the code they pickle.

Files load with `weights_only=True`; other pickled globals (their optimizer classes, numpy scalars...) are
replaced by inert placeholders registered with torch's restricted unpickler, so nothing is imported or called.
Modules torch blocks outright (os, sys, ...) make the file an error naming them.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import torch

from put.errors import FileMismatchError


class OfficialCheckpointError(FileMismatchError):
    pass


class Inert:
    """Stands in for a pickled global of the authors' file; keeps the arguments, runs nothing."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state


def inert_placeholders(names: list[str]) -> list[tuple[type, str]]:
    """One placeholder class per global name, in the (object, "module.name") form torch allowlists."""
    return [(type(name.rsplit(".", 1)[-1], (Inert,), {"__qualname__": name}), name) for name in names]


def read_official_file(path: str | os.PathLike) -> dict:
    """The authors' checkpoint as a dict, loaded without executing pickled code."""
    path = Path(path)
    if not path.is_file():
        raise OfficialCheckpointError(f"{path}: no such checkpoint file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        try:
            names = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(path))
        except Exception as err:
            raise OfficialCheckpointError(f"{path}: not a readable torch checkpoint ({err})") from err
        try:
            with torch.serialization.safe_globals(inert_placeholders(names)):
                payload = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as err:
            raise OfficialCheckpointError(f"{path}: refused: it pickles globals that cannot be loaded safely "
                                          f"({', '.join(names)}): {err}") from err
    except Exception as err:
        raise OfficialCheckpointError(f"{path}: not a readable torch checkpoint: {err}") from err
    if not isinstance(payload, dict):
        raise OfficialCheckpointError(f"{path}: expected a dict saved by the authors' trainer, "
                                      f"got {type(payload).__name__}")
    return payload


def official_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The `model` state dict of an authors' checkpoint (their trainer's format; a bare state dict also works)."""
    payload = read_official_file(path)
    state = payload.get("model", payload)
    if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise OfficialCheckpointError(f"{path}: no state dict of tensors under 'model' (top-level keys: "
                                      f"{', '.join(map(str, payload))})")
    return state

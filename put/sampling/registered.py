"""A model by its registered name (`models:/NAME@ALIAS` or `models:/NAME/VERSION`), fetched as the transformer and
the P-VQVAE it was trained on, found by the checksum it records (docs/serving.md, "A model by name")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from put.errors import InputError, MissingFileError
from put.io.yamlfile import read_yaml_mapping
from put.models.checkpoint import load_checkpoint
from put.tracking.names import tag_filter
from put.tracking.runs import locked_client

PREFIX = "models:/"
_URI = re.compile(r"models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/@]+)|/(?P<version>\d+))")
FLAVOUR = "put"  # the MLmodel flavour the pipeline writes: what the checkpoint is and where it lies


class RegisteredModelError(InputError):
    pass


def is_registered(reference: str | Path) -> bool:
    """Whether a --checkpoint value names a registered model rather than a file."""
    return str(reference).startswith(PREFIX)


@dataclass(frozen=True)
class RegisteredCheckpoint:
    uri: str          # as asked, e.g. models:/put-demo-put-transformer@current
    name: str
    version: str      # the version the alias (or number) resolved to
    transformer: Path
    pvqvae: Path


def _version(client, uri: str):
    from mlflow.exceptions import MlflowException

    match = _URI.fullmatch(uri)
    if match is None:
        raise RegisteredModelError(f"{uri}: expected a registered model as models:/NAME@ALIAS (e.g. "
                                   "models:/put-demo-put-transformer@current) or models:/NAME/VERSION")
    name = match["name"]
    try:
        if match["alias"] is not None:
            return name, client.get_model_version_by_alias(name, match["alias"])
        return name, client.get_model_version(name, match["version"])
    except MlflowException as err:
        known = ", ".join(sorted(m.name for m in client.search_registered_models(max_results=50))) or "none"
        first = str(err.message if hasattr(err, "message") else err).splitlines()[0]
        raise RegisteredModelError(f"{uri}: not found in the MLflow store {client.tracking_uri} ({first}); "
                                   f"registered models there: {known}") from None


def _fetch(client, model_id: str, dst: Path, uri: str) -> Path:
    """The checkpoint of a logged model: downloaded into `dst`, or the file its MLmodel refers to (a checkpoint
    above the copy limit is not uploaded: it lies in the workspace that trained it)."""
    from mlflow.artifacts import download_artifacts

    location = client.get_logged_model(model_id).artifact_location
    dst.mkdir(parents=True, exist_ok=True)
    mlmodel = Path(download_artifacts(artifact_uri=f"{location}/MLmodel", dst_path=str(dst),
                                      tracking_uri=client.tracking_uri))
    flavour = (read_yaml_mapping(mlmodel, "a logged model's MLmodel").get("flavors") or {}).get(FLAVOUR)
    if not flavour:
        raise RegisteredModelError(f"{uri}: logged model {model_id} has no `{FLAVOUR}` flavour in its MLmodel: not "
                                   "a checkpoint the pipeline registered")
    if flavour.get("checkpoint"):
        return Path(download_artifacts(artifact_uri=f"{location}/{flavour['checkpoint']}", dst_path=str(dst),
                                       tracking_uri=client.tracking_uri))
    reference = flavour.get("reference") or {}
    path = Path(reference.get("path", ""))
    if not path.is_file():
        raise MissingFileError(f"{uri}: logged model {model_id} refers to {path} on host {reference.get('host')} "
                               "(not uploaded: above the copy limit), which is not here; run from that workspace "
                               "or `dvc pull` it")
    return path


def fetch_registered(uri: str, dst: Path, store: str | None = None) -> RegisteredCheckpoint:
    """The registered transformer `uri` and its P-VQVAE, as files (downloaded into `dst` where uploaded)."""
    with locked_client(store) as client:
        return _fetch_checkpoints(client, uri, Path(dst))


def _fetch_checkpoints(client, uri: str, dst: Path) -> RegisteredCheckpoint:
    name, version = _version(client, uri)
    model_id = version.model_id or str(version.source).removeprefix(PREFIX)
    logged = client.get_logged_model(model_id)
    kind = logged.tags.get("put.kind")
    if kind != "transformer":
        raise RegisteredModelError(f"{uri}: a {kind or 'non-PUT'} model; inpainting needs a transformer (its "
                                   "P-VQVAE is found from it), e.g. models:/put-<preset>-<variant>-transformer@current")
    transformer = _fetch(client, model_id, dst / "transformer", uri)
    sha = load_checkpoint(transformer, kind="transformer").pvqvae_sha256
    found = client.search_logged_models([logged.experiment_id], max_results=1, filter_string=tag_filter(
        {"put.kind": "pvqvae", "put.checkpoint_sha256": str(sha)}))
    if not found:
        raise RegisteredModelError(f"{uri}: no logged P-VQVAE of sha256 {sha} (the one it was trained on) in "
                                   f"experiment {logged.experiment_id} of {client.tracking_uri}")
    pvqvae = _fetch(client, found[0].model_id, dst / "pvqvae", uri)
    return RegisteredCheckpoint(uri, name, str(version.version), transformer, pvqvae)

"""A stage run's models: a checkpoint as a LoggedModel of the run with its final metrics, registered with the
alias `current`, completed once when its logging was cut short; the model a run reads (docs/mlflow.md, "Models").
A mixin of MlflowTracker (put/tracking/runs.py), whose client, lock, run and experiment it uses."""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

from put.io.files import file_sha256
from put.tracking.mlflow_private import module_tracking_uri
from put.tracking.names import SUPERSEDED, flatten, tag_filter

MODEL_ALIAS = "current"
MODEL_VERSIONS_TAG = "mlflow.modelVersions"  # a LoggedModel's registered versions, as the UI lists them


@contextlib.contextmanager
def default_store(uri: str):
    """MLflow's default store for the process pointed at `uri` for the block, then MLFLOW_TRACKING_URI exactly as it
    was. Not MLflow's `_use_tracking_uri`: it restores its module's URI, None until someone sets it, and a None
    unsets the variable, which would send every later run of the process to ./mlflow.db."""
    from mlflow import set_tracking_uri

    module, variable = module_tracking_uri(), os.environ.get("MLFLOW_TRACKING_URI")
    set_tracking_uri(uri)
    try:
        yield
    finally:
        set_tracking_uri(module)
        if variable is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = variable


class ModelLogging:
    """log_model and use_model of MlflowTracker."""

    client: Any
    lock: Any
    uri: str
    run_id: str
    experiment: str
    preset: str
    variant: str | None
    dag_id: str
    seed: int
    model_id: str | None
    _current: Any  # the run a call logs into (MlflowTracker._current)

    def _models(self, **tags: str) -> list:
        found = self.client.search_logged_models([self.experiment], filter_string=tag_filter(tags), max_results=100)
        return sorted(found, key=lambda m: m.creation_timestamp)

    def log_model(self, checkpoint: Path, kind: str, metrics: dict[str, float], params: dict[str, Any],
                  step: int = 0) -> str:
        """The checkpoint as a LoggedModel of this run (its final `metrics` linked, at the training's last `step`,
        so the curves end there), registered with the alias `current`; a re-run that logs the same checkpoint
        reuses the model. A model whose logging was cut short (the server went away; a replay resumes the call)
        is completed, each step once."""
        from mlflow.entities import LoggedModelStatus

        checkpoint = Path(checkpoint)
        sha = file_sha256(checkpoint)
        with self.lock:
            self._current(now=True)  # the kept run, when a racer's run of this stage instance was kept instead
            model = next((m for m in self._models(**{"put.checkpoint_sha256": sha, "put.kind": kind})
                          if m.source_run_id == self.run_id), None)
            # complete once registered (its last step); PENDING or unregistered: cut short, completed below
            if model is not None and model.status == LoggedModelStatus.READY and MODEL_VERSIONS_TAG in model.tags:
                self.model_id = model.model_id
                return model.model_id
            model = model or self.client.create_logged_model(
                self.experiment, name=f"{kind}-{self.variant}", source_run_id=self.run_id,
                model_type={"pvqvae": "P-VQVAE", "transformer": "UQ-Transformer"}.get(kind, kind),
                params={k: str(v)[:6000] for k, v in flatten(params).items()},
                tags={"put.preset": self.preset, "put.variant": self.variant or "", "put.kind": kind,
                      "put.seed": str(self.seed), "put.dag_id": self.dag_id, "put.checkpoint_sha256": sha})
            self.model_id = model.model_id
        with tempfile.TemporaryDirectory() as tmp:  # the same files again, if a first try uploaded some
            self._write_model(checkpoint, kind, sha, model.model_id, Path(tmp))
            with self.lock:
                self.client.log_model_artifacts(model.model_id, tmp)
        self._log_final_metrics(metrics, step, model.model_id)
        with self.lock:
            from mlflow.entities import LoggedModelOutput

            outputs = self.client.get_run(self.run_id).outputs
            if not any(o.model_id == model.model_id for o in (outputs.model_outputs if outputs else [])):
                self.client.log_outputs(self.run_id, [LoggedModelOutput(model.model_id, step)])
            self.client.finalize_logged_model(model.model_id, "READY")
            replicate = f"-seed{self.seed}" if self.seed else ""  # a replicate never takes the base model's alias
            self._register(model.model_id, f"put-{self.preset}-{self.variant}{replicate}-{kind}")
        return model.model_id

    def _log_final_metrics(self, metrics: dict[str, float], step: int, model_id: str) -> None:
        """The final values, linked to the model at the training's last step. The run has most of them already
        at that step (the training logged its last step, or `put track` its curves): sent again with the time
        of that point, which the store keeps once and links to the model; only the others as new points."""
        from mlflow.entities import Metric

        known, new = [], {}
        with self.lock:
            for key, value in metrics.items():
                same = [m.timestamp for m in self.client.get_metric_history(self.run_id, key)
                        if m.step == step and m.value == float(value)]
                if same and math.isfinite(value):
                    known.append(Metric(key, float(value), min(same), step, model_id=model_id))
                else:
                    new[key] = value
            if known:
                self.client.log_batch(self.run_id, metrics=known)
        if new:
            self.log_metrics(new, step, model_id=model_id)  # a replay's points: their time, none doubled

    def _write_model(self, checkpoint: Path, kind: str, sha: str, model_id: str, folder: Path) -> None:
        """MLmodel (flavour `put`: what the checkpoint is and how to load it) and the checkpoint, or, above
        the copy limit, a reference to it (see the module docstring)."""
        from mlflow.models import Model

        size = checkpoint.stat().st_size
        limit = float(os.environ.get("PUT_MLFLOW_MODEL_COPY_MB", "256")) * 2**20
        copied = size <= limit
        flavour = {"kind": kind, "variant": self.variant, "preset": self.preset, "sha256": sha, "bytes": size,
                   "loader": "put.models.checkpoint.load_checkpoint (safetensors, no pickle)",
                   "checkpoint": checkpoint.name if copied else None,
                   "reference": None if copied else {"path": str(checkpoint.resolve()), "host": socket.gethostname(),
                                                     "why": f"{size / 2**20:.0f} MiB, above the copy limit "
                                                            f"({limit / 2**20:.0f} MiB): it lies in the workspace "
                                                            "and DVC's cache (dvc pull fetches it)"}}
        Model(model_id=model_id, flavors={"put": flavour}).save(folder / "MLmodel")
        if copied:  # a link: the upload reads through it, no temporary copy
            (folder / checkpoint.name).symlink_to(checkpoint.resolve())

    def _register(self, model_id: str, name: str) -> None:
        from mlflow.exceptions import MlflowException

        with contextlib.suppress(MlflowException):  # registered before
            self.client.create_registered_model(name, tags={"put.preset": self.preset})
        # a version of this model already (registered before the server went away): that one, not a second
        source = f"models:/{model_id}"
        version = next((v for v in self.client.search_model_versions(f"name = '{name}'") if v.source == source),
                       None)
        if version is None:
            # MLflow's registry looks the `models:/` source up through the process's default client: pointed at
            # this tracker's store (a replay `--to` another store; a tracker made before MLFLOW_TRACKING_URI).
            with default_store(self.uri):
                version = self.client.create_model_version(name, source=source, run_id=self.run_id,
                                                           model_id=model_id, tags={"put.dag_id": self.dag_id})
        if SUPERSEDED not in self.client.get_run(self.run_id).data.tags:  # an old code's run, replayed late
            self.client.set_registered_model_alias(name, MODEL_ALIAS, version.version)
        # The Models tab's "Registered models" column reads this tag (mlflow.register_model sets it; the client
        # call above does not). Set last: it marks the model complete.
        listed = json.loads(self.client.get_logged_model(model_id).tags.get(MODEL_VERSIONS_TAG, "[]"))
        entry = {"name": name, "version": str(version.version)}
        if entry not in listed:
            self.client.set_logged_model_tags(model_id, {MODEL_VERSIONS_TAG: json.dumps([*listed, entry])})

    def use_model(self, kind: str) -> None:
        """This run reads the variant's `kind` model of the same DAG configuration: logged as its model input,
        and the metrics logged by `log_evaluation` are linked to it."""
        from mlflow.entities import LoggedModelInput

        with self.lock:
            self._current()
            found = self._models(**{"put.dag_id": self.dag_id, "put.variant": self.variant or "", "put.kind": kind,
                                    "put.seed": str(self.seed)})
            if found:
                self.model_id = found[-1].model_id
                self.client.log_inputs(self.run_id, models=[LoggedModelInput(self.model_id)])

"""MLflow tracking, the only module that imports mlflow.

Layout in the experiment `put-<preset>`: one parent run per DAG configuration (tag `put.dag_id`, a
hash of the fully resolved parameters) with one child run per variant; every stage of a variant
(P-VQVAE and transformer training, sampling, evaluation) logs into that child with its stage name as
prefix: parameters `<stage>.<key>`, metrics `<stage>/<name>`, artefacts under `<stage>/`. Re-running a
stage finds the same runs again (looked up by tags), so runs are never duplicated.

Concurrency: the default backend is SQLite (`sqlite:///mlflow.db`), which does not survive concurrent
writers, so every MLflow call of every process goes through one inter-process file lock beside the
database. With a tracking server (`MLFLOW_TRACKING_URI=http://...`, what a cluster run should use) no
lock is taken; a parent created twice by a race is resolved to the oldest one.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_URI = "sqlite:///mlflow.db"


def tracking_enabled() -> bool:
    return os.environ.get("PUT_TRACKING", "1") not in ("0", "false", "no")


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def environment_tags() -> dict[str, str]:
    """Where this stage ran: git commit, host, Slurm job (when under Slurm)."""
    tags = {"put.host": socket.gethostname()}
    if commit := git_commit():
        tags["mlflow.source.git.commit"] = commit
    for var, tag in (("SLURM_JOB_ID", "put.slurm_job_id"), ("SLURM_ARRAY_JOB_ID", "put.slurm_array_job_id")):
        if os.environ.get(var):
            tags[tag] = os.environ[var]
    return tags


def version_tags() -> dict[str, str]:
    """The software this stage ran with: Python, the direct dependencies, whether the environment is the lock's."""
    from put.versions import versions

    return {f"put.version.{name}": value[:5000] for name, value in versions().items()}


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(flatten(value, name))
        else:
            flat[name] = str(value)
    return flat


def _lock(uri: str):
    if uri.startswith("sqlite:///"):
        from filelock import FileLock

        db = Path(uri[len("sqlite:///"):])
        db.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(str(db) + ".lock", timeout=600)
    return contextlib.nullcontext()


class NullTracker:
    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        pass

    def log_params(self, params: dict[str, Any]) -> None:
        pass

    def log_image(self, image: np.ndarray, name: str) -> None:
        pass

    def log_artifact(self, path: Path) -> None:
        pass

    def finish(self, status: str = "FINISHED") -> None:
        pass


class MlflowTracker(NullTracker):
    def __init__(self, preset: str, variant: str | None, stage: str, dag_id: str,
                 tags: dict[str, str] | None = None, seed: int = 0):
        """variant None: log into the DAG's parent run (stages that span all variants, e.g. the report). Each seed
        replicate of a variant is a child of its own (tag put.seed), grouped with the variant's other
        replicates by the tag put.replicates (the configuration: DAG and variant)."""
        from mlflow.tracking import MlflowClient

        self.stage = stage
        self.uri = tracking_uri()
        self.lock = _lock(self.uri)
        with self.lock:
            self.client = MlflowClient(self.uri)
            experiment = self._experiment(f"put-{preset}")
            base = {"put.dag_id": dag_id, "put.preset": preset}
            parent = self._run(experiment, {**base, "put.level": "dag"}, f"{preset} {dag_id}", None)
            self.run_id = parent if variant is None else self._run(
                experiment, {**base, "put.level": "variant", "put.variant": variant, "put.seed": str(seed),
                             "put.replicates": f"{dag_id}/{variant}"},
                variant if not seed else f"{variant} seed {seed}", parent)
            stage_tags = {f"put.stage.{stage}.{k.split('.')[-1]}": v
                          for k, v in {**environment_tags(), **(tags or {})}.items()}
            from mlflow.entities import RunTag

            every = {**environment_tags(), **(tags or {}), **stage_tags, **version_tags()}
            self.client.log_batch(self.run_id, tags=[RunTag(key, value) for key, value in every.items()])
            self.client.update_run(self.run_id, status="RUNNING")

    def _experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name)
        except Exception:  # created meanwhile by another process (tracking server, no lock)
            return self.client.get_experiment_by_name(name).experiment_id

    def _search(self, experiment: str, tags: dict[str, str]) -> list:
        query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
        return sorted(self.client.search_runs([experiment], query, max_results=100),
                      key=lambda r: (r.info.start_time, r.info.run_id))

    def _run(self, experiment: str, tags: dict[str, str], name: str, parent: str | None) -> str:
        found = self._search(experiment, tags)
        if not found:
            extra = {"mlflow.parentRunId": parent} if parent else {}
            self.client.create_run(experiment, tags={**tags, **extra}, run_name=name)
            found = self._search(experiment, tags)
            for duplicate in found[1:]:  # a concurrent creator lost the race: keep the oldest
                self.client.delete_run(duplicate.info.run_id)
        return found[0].info.run_id

    def log_params(self, params: dict[str, Any]) -> None:
        """Stage parameters, prefixed by the stage; ones already logged (a re-run) are left alone."""
        from mlflow.entities import Param

        with self.lock:
            logged = self.client.get_run(self.run_id).data.params
            new = {f"{self.stage}.{k}": v for k, v in flatten(params).items()}
            batch = [Param(k, v[:6000]) for k, v in new.items() if k not in logged]
            for start in range(0, len(batch), 100):
                self.client.log_batch(self.run_id, params=batch[start:start + 100])

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        import time

        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        batch = [Metric(f"{self.stage}/{k}", float(v), stamp, step) for k, v in metrics.items() if np.isfinite(v)]
        with self.lock:
            self.client.log_batch(self.run_id, metrics=batch)

    def log_image(self, image: np.ndarray, name: str) -> None:
        with self.lock:
            self.client.log_image(self.run_id, image, artifact_file=f"{self.stage}/{name}")

    def log_artifact(self, path: Path) -> None:
        with self.lock:
            self.client.log_artifact(self.run_id, str(path), artifact_path=self.stage)

    def finish(self, status: str = "FINISHED") -> None:
        with self.lock:
            self.client.set_terminated(self.run_id, status=status)


def stage_tracker(preset: str, variant: str | None, stage: str, dag_id: str,
                  tags: dict[str, str] | None = None, seed: int = 0) -> NullTracker:
    """MlflowTracker unless PUT_TRACKING=0."""
    if not tracking_enabled():
        return NullTracker()
    return MlflowTracker(preset, variant, stage, dag_id, tags, seed)


@contextlib.contextmanager
def tracked(tracker: NullTracker):
    """Marks the run FINISHED, or FAILED/KILLED when the stage raises or is stopped."""
    try:
        yield tracker
    except SystemExit:
        tracker.finish("KILLED")
        raise
    except BaseException:
        tracker.finish("FAILED")
        raise
    tracker.finish("FINISHED")

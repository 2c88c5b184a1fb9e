"""MLflow tracking, the only module that imports mlflow.

Layout in the experiment `put-<preset>` (tagged as model training, `mlflow.experimentKind`): one parent run per
DAG configuration (tag `put.dag_id`, a hash of the fully resolved parameters), named after what it is
(`demo · 6 variants · 3f2a91c`), with one child run per stage instance, named `<stage> <variant>` (`evaluate
conv`; the report's is `report`). Each run carries its own tags (preset, variant, stage, DVC stage or Snakemake
rule, Slurm job, host, the git commit as its source version, library versions); nothing is written into the
parent but its name and identity. Re-running a stage finds its run again (looked up by tags), so runs are never
duplicated.

Metric names end with what they measure; the parts before say where: `<mode>/<group>/<metric>` for the
evaluation (`k50/10-60/psnr`, the nesting of the metrics files), `<setting>/<group>/<metric>` for the frontier,
`train/<loss>` and `eval/<metric>` for training curves. MLflow's charts group a run's metrics into sections by
everything before the last `/` (`k50/10-60`: PSNR, SSIM, MAE side by side), and a chart's title ends with what
it shows.

Models: every trained checkpoint becomes an MLflow LoggedModel (MLmodel file with a `put` flavour, its final
training metrics, the evaluation's metrics linked to it), registered as `put-<preset>-<variant>-<kind>` with the
alias `current` on the newest version (`latest` is reserved by MLflow). A checkpoint up to
`PUT_MLFLOW_MODEL_COPY_MB` (default 256 MiB) is copied into the model's artefacts, so the model is complete on
its own; a larger one (the paper presets' transformers: hundreds of MB to several GB) is logged as a reference
(path, size, SHA-256): it already lies in the workspace and in DVC's cache, and a third copy per training would
cost gigabytes for nothing.

Concurrency: the default backend is SQLite (`sqlite:///mlflow.db`), which does not survive concurrent writers,
so every MLflow call of every process goes through one inter-process file lock beside the database (the system
metrics thread too). With a tracking server (`MLFLOW_TRACKING_URI=http://...`, what a cluster run should use) no
lock is taken; a run created twice by a race is resolved to the oldest one.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import zlib
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_URI = "sqlite:///mlflow.db"
EXPERIMENT_KIND = "custom_model_development"  # MLflow's value for model training (not GenAI)
MODEL_ALIAS = "current"
VARIANTS_VIEW = "put-variants"  # the saved runs-table view of the evaluations (README: Comparing runs in MLflow)


def tracking_enabled() -> bool:
    return os.environ.get("PUT_TRACKING", "1") not in ("0", "false", "no")


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI


CODE_ROOT = Path(__file__).resolve().parents[1]  # the checkout whose code runs (an editable install)


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=CODE_ROOT, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit() -> str | None:
    return _git("rev-parse", "HEAD")


def environment_tags(command: str) -> dict[str, str]:
    """Where and with what this stage ran: source (command, git commit, branch, remote), host, Slurm job,
    library versions."""
    from put.versions import versions

    tags = {"put.host": socket.gethostname(), "mlflow.source.type": "LOCAL", "mlflow.source.name": command}
    for tag, args in (("mlflow.source.git.commit", ("rev-parse", "HEAD")),
                      ("mlflow.source.git.branch", ("rev-parse", "--abbrev-ref", "HEAD")),
                      ("mlflow.source.git.repoURL", ("remote", "get-url", "origin"))):
        if value := _git(*args):
            tags[tag] = value
    if tags.get("mlflow.source.git.commit"):
        tags["put.git.dirty"] = str(bool(_git("status", "--porcelain", "--untracked-files=no")))
    for var, tag in (("SLURM_JOB_ID", "put.slurm_job_id"), ("SLURM_ARRAY_JOB_ID", "put.slurm_array_job_id")):
        if os.environ.get(var):
            tags[tag] = os.environ[var]
    tags |= {f"put.version.{name}": value[:5000] for name, value in versions().items()}  # and the lock's state
    if "torch" in sys.modules:  # the CUDA/cuDNN the stage's torch was built with, when any
        torch = sys.modules["torch"]
        for tag, value in (("put.version.cuda", torch.version.cuda),
                           ("put.version.cudnn", torch.backends.cudnn.version())):
            if value:
                tags[tag] = str(value)
    return tags


def installed_distributions() -> str:
    """Every installed distribution and its version, one per line (the run's `environment.txt`)."""
    found = {(d.metadata["Name"] or "?").lower(): d.version for d in metadata.distributions()}
    return "".join(f"{name}=={version}\n" for name, version in sorted(found.items()))


def flatten(data: dict[str, Any], prefix: str = "", sep: str = ".") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(flatten(value, name, sep))
        else:
            flat[name] = value
    return flat


def metric_names(nested: dict[str, Any]) -> dict[str, float]:
    """{mode: {group: {metric: value}}} -> {"mode/group/metric": value}: the metrics files' nesting, whose last
    key says what is measured."""
    return {k: float(v) for k, v in flatten(nested, sep="/").items() if isinstance(v, (int, float))}


def file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def parent_name(preset: str, dag_id: str, labels: Sequence[str] | None) -> str:
    """`demo · 6 variants · 3f2a91c` (`+ 1 official` when released weights are evaluated too)."""
    from put.config import VARIANTS

    labels = list(labels) if labels is not None else list(VARIANTS)
    variants = [label for label in labels if label in VARIANTS]
    official = len(labels) - len(variants)
    described = f"{len(variants)} variants" + (f" + {official} official" if official else "")
    return f"{preset} · {described} · {dag_id[:7]}"


def variants_view(metric_keys: Sequence[str], sort_key: str) -> str:
    """The value of MLflow's saved-view experiment tag (`mlflow.sharedViewState.<id>`, what the runs page's
    "Views -> Save as new view" writes): the evaluation runs with their PSNR and SSIM columns, best first."""
    columns = [f"metrics.`{key}`" for key in metric_keys]
    state = {"searchFilter": "tags.`put.stage` = 'evaluate'", "orderByKey": f"metrics.`{sort_key}`",
             "orderByAsc": False, "startTime": "ALL", "lifecycleFilter": "Active", "datasetsFilter": [],
             "modelVersionFilter": "All Runs", "selectedColumns": ["attributes.`Models`", *columns],
             "columnOrder": ["attributes.`Run Name`", *columns], "columnWidths": {column: 150 for column in columns},
             "runsHiddenMode": "SHOW_ALL",
             "viewMaximized": False, "runListHidden": False, "isAccordionReordered": False,
             "useGroupedValuesInCharts": True, "hideEmptyCharts": True, "groupBy": None, "groupsExpanded": {},
             "globalLineChartConfig": {"xAxisKey": "step", "lineSmoothness": 0, "selectedXAxisMetricKey": ""}}
    packed = "deflate;" + base64.b64encode(zlib.compress(json.dumps(state).encode())).decode()
    now = int(time.time() * 1000)
    return json.dumps({"name": "Variants side by side: PSNR and SSIM", "createdAt": now, "updatedAt": now,
                       "state": packed})


def _lock(uri: str):
    if uri.startswith("sqlite:///"):
        from filelock import FileLock

        db = Path(uri[len("sqlite:///"):])
        db.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(str(db) + ".lock", timeout=600)
    return contextlib.nullcontext()


class NullTracker:
    def log_metrics(self, metrics: dict[str, float], step: int, **links: str) -> None:
        pass

    def log_params(self, params: dict[str, Any]) -> None:
        pass

    def log_image(self, image: np.ndarray, name: str) -> None:
        pass

    def log_artifact(self, path: Path) -> None:
        pass

    def log_dataset(self, path: Path, name: str, context: str) -> None:
        pass

    def log_model(self, checkpoint: Path, kind: str, metrics: dict[str, float], params: dict[str, Any],
                  step: int = 0) -> None:
        pass

    def use_model(self, kind: str) -> None:
        pass

    def log_evaluation(self, metrics: dict[str, Any], masks: Path) -> None:
        pass

    def finish(self, status: str = "FINISHED") -> None:
        pass


class SystemMetrics(threading.Thread):
    """CPU, memory, disk, network and (with nvidia-ml-py and an NVIDIA GPU) GPU utilisation and memory, sampled
    every `interval` seconds by MLflow's own monitors and logged as `system/...` every `samples` samples through
    the tracker's lock (MLflow's SystemMetricsMonitor writes around it, which SQLite does not survive)."""

    def __init__(self, tracker: MlflowTracker, interval: float = 2.0, samples: int = 5):
        super().__init__(name="put-system-metrics", daemon=True)
        from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
        from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
        from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor

        self.tracker, self.interval, self.samples = tracker, interval, samples
        self.monitors = [CPUMonitor(), DiskMonitor(), NetworkMonitor()]
        with contextlib.suppress(Exception):  # no NVIDIA driver, or no nvidia-ml-py: no GPU metrics
            from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor

            self.monitors.append(GPUMonitor())
        self.stopped = threading.Event()
        self.step = 0

    def sample(self) -> None:
        for monitor in self.monitors:
            monitor.collect_metrics()

    def publish(self) -> None:
        values: dict[str, float] = {}
        for monitor in self.monitors:
            values.update(monitor.aggregate_metrics())
            monitor.clear_metrics()
        self.tracker.log_metrics({f"system/{k}": v for k, v in values.items()}, self.step)
        self.step += 1

    def run(self) -> None:
        while not self.stopped.is_set():
            for _ in range(self.samples):
                if self.stopped.wait(self.interval):
                    return
                self.sample()
            self.publish()

    def finish(self) -> None:
        """Stops the thread and logs what it collected since the last publication (at least one sample, so a
        short stage has its figures too)."""
        self.stopped.set()
        self.join()
        self.sample()
        self.publish()


class MlflowTracker(NullTracker):
    def __init__(self, preset: str, variant: str | None, stage: str, dag_id: str,
                 tags: dict[str, str] | None = None, *, labels: Sequence[str] | None = None,
                 system_metrics: bool = False, seed: int = 0):
        """variant None: a stage that spans every variant (the report). `labels`: every evaluated label of the
        DAG (names the parent run); `system_metrics`: sample CPU/GPU use while the stage runs. A seed replicate
        (`seed` > 0) has runs of its own (`<stage> <variant> seed S`, tag put.seed), grouped with the base run
        of its variant by the tag put.replicates (the configuration: DAG and variant)."""
        from mlflow.tracking import MlflowClient

        from mlflow.entities import RunTag

        self.preset, self.variant, self.stage, self.dag_id, self.seed = preset, variant, stage, dag_id, seed
        self.uri = tracking_uri()
        self.lock = _lock(self.uri)
        self.model_id: str | None = None
        command = " ".join(["put", stage.replace("_", "-")] + ([variant] if variant else []))
        environment, distributions = environment_tags(command), installed_distributions()  # outside the lock
        with self.lock:
            self.client = MlflowClient(self.uri)
            self.experiment = self._experiment(f"put-{preset}")
            identity = {"put.dag_id": dag_id, "put.preset": preset}
            self.parent = self._run({**identity, "put.level": "dag"}, parent_name(preset, dag_id, labels), None)
            if labels is not None:
                self.client.set_tag(self.parent, "put.variants", ",".join(labels))
            own = {**identity, "put.level": "stage", "put.stage": stage}
            name = stage
            if variant:
                own |= {"put.variant": variant, "put.seed": str(seed), "put.replicates": f"{dag_id}/{variant}"}
                name = f"{stage} {variant}" + (f" seed {seed}" if seed else "")
            self.run_id = self._run(own, name, self.parent)
            self.client.log_batch(self.run_id, tags=[RunTag(key, value)
                                                     for key, value in {**environment, **(tags or {})}.items()])
            if "mlflow.source.name" not in self.client.get_run(self.parent).data.tags:  # its first stage's source
                for key in (k for k in environment if k.startswith("mlflow.source.")):
                    self.client.set_tag(self.parent, key, f"put DAG ({preset})" if key.endswith(".name")
                                        else environment[key])
            for run in (self.run_id, self.parent):
                self.client.update_run(run, status="RUNNING")
            if not self.client.list_artifacts(self.run_id, "environment.txt"):
                self.client.log_text(self.run_id, distributions, "environment.txt")
        self.system = SystemMetrics(self) if system_metrics else None
        if self.system:
            self.system.start()

    def _experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is None:
            try:
                return self.client.create_experiment(name, tags={"mlflow.experimentKind": EXPERIMENT_KIND})
            except Exception:  # created meanwhile by another process (tracking server, no lock)
                found = self.client.get_experiment_by_name(name)
        if found.tags.get("mlflow.experimentKind") != EXPERIMENT_KIND:
            self.client.set_experiment_tag(found.experiment_id, "mlflow.experimentKind", EXPERIMENT_KIND)
        return found.experiment_id

    def _search(self, tags: dict[str, str]) -> list:
        query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
        return sorted(self.client.search_runs([self.experiment], query, max_results=100),
                      key=lambda r: (r.info.start_time, r.info.run_id))

    def _run(self, tags: dict[str, str], name: str, parent: str | None) -> str:
        found = self._search(tags)
        if not found:
            extra = {"mlflow.parentRunId": parent} if parent else {}
            self.client.create_run(self.experiment, tags={**tags, **extra}, run_name=name)
            found = self._search(tags)
            for duplicate in found[1:]:  # a concurrent creator lost the race: keep the oldest
                self.client.delete_run(duplicate.info.run_id)
        elif found[0].info.run_name != name:  # e.g. the parent, once the variant set is known
            self.client.set_tag(found[0].info.run_id, "mlflow.runName", name)
        return found[0].info.run_id

    def log_params(self, params: dict[str, Any]) -> None:
        """Stage parameters (nested keys joined by dots); ones already logged (a re-run) are left alone."""
        from mlflow.entities import Param

        with self.lock:
            logged = self.client.get_run(self.run_id).data.params
            batch = [Param(k, str(v)[:6000]) for k, v in flatten(params).items() if k not in logged]
            for start in range(0, len(batch), 100):
                self.client.log_batch(self.run_id, params=batch[start:start + 100])

    def log_metrics(self, metrics: dict[str, float], step: int, **links: str) -> None:
        """`links`: model_id, dataset_name, dataset_digest of the values (MLflow 3 links them to a model)."""
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        batch = [Metric(k, float(v), stamp, step, **links) for k, v in metrics.items() if np.isfinite(v)]
        with self.lock:
            for start in range(0, len(batch), 500):
                self.client.log_batch(self.run_id, metrics=batch[start:start + 500])

    def log_image(self, image: np.ndarray, name: str) -> None:
        with self.lock:
            self.client.log_image(self.run_id, image, artifact_file=name)

    def log_artifact(self, path: Path) -> None:
        with self.lock:
            self.client.log_artifact(self.run_id, str(path))

    def log_dataset(self, path: Path, name: str, context: str) -> dict[str, str]:
        """A CSV file (a split, the evaluation masks' manifest) as the run's dataset input, its digest the
        file's SHA-256 (first 16 hex digits); returns the dataset's name and digest, for linking metrics."""
        import mlflow.data
        import pandas as pd
        from mlflow.entities import DatasetInput, InputTag

        path = Path(path)
        digest = file_digest(path)[:16]
        with warnings.catch_warnings():  # MLflow's hints on schema inference and ambiguous local sources
            warnings.simplefilter("ignore", UserWarning)
            dataset = mlflow.data.from_pandas(pd.read_csv(path), source=str(path.resolve()), name=name, digest=digest)
            entity = DatasetInput(dataset._to_mlflow_entity(), tags=[InputTag("mlflow.data.context", context)])
        with self.lock:
            self.client.log_inputs(self.run_id, datasets=[entity])
        return {"dataset_name": name, "dataset_digest": digest}

    def _models(self, **tags: str) -> list:
        query = " AND ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
        found = self.client.search_logged_models([self.experiment], filter_string=query, max_results=100)
        return sorted(found, key=lambda m: m.creation_timestamp)

    def log_model(self, checkpoint: Path, kind: str, metrics: dict[str, float], params: dict[str, Any],
                  step: int = 0) -> str:
        """The checkpoint as a LoggedModel of this run (its final `metrics` linked, at the training's last `step`,
        so the curves end there), registered with the alias `current`; a re-run that logs the same checkpoint
        reuses the model."""
        checkpoint = Path(checkpoint)
        sha = file_digest(checkpoint)
        with self.lock:
            for model in self._models(**{"put.checkpoint_sha256": sha, "put.kind": kind}):
                if model.source_run_id == self.run_id:
                    self.model_id = model.model_id
                    return model.model_id
            model = self.client.create_logged_model(
                self.experiment, name=f"{kind}-{self.variant}", source_run_id=self.run_id,
                model_type={"pvqvae": "P-VQVAE", "transformer": "UQ-Transformer"}.get(kind, kind),
                params={k: str(v)[:6000] for k, v in flatten(params).items()},
                tags={"put.preset": self.preset, "put.variant": self.variant or "", "put.kind": kind,
                      "put.seed": str(self.seed), "put.dag_id": self.dag_id, "put.checkpoint_sha256": sha})
            self.model_id = model.model_id
        with tempfile.TemporaryDirectory() as tmp:
            self._write_model(checkpoint, kind, sha, model.model_id, Path(tmp))
            with self.lock:
                self.client.log_model_artifacts(model.model_id, tmp)
        self.log_metrics(metrics, step, model_id=model.model_id)
        with self.lock:
            from mlflow.entities import LoggedModelOutput

            self.client.log_outputs(self.run_id, [LoggedModelOutput(model.model_id, step)])
            self.client.finalize_logged_model(model.model_id, "READY")
            replicate = f"-seed{self.seed}" if self.seed else ""  # a replicate never takes the base model's alias
            self._register(model.model_id, f"put-{self.preset}-{self.variant}{replicate}-{kind}")
        return model.model_id

    def _write_model(self, checkpoint: Path, kind: str, sha: str, model_id: str, folder: Path) -> None:
        """MLmodel (flavour `put`: what the checkpoint is and how to load it) and the checkpoint, or, above
        the copy limit, a reference to it (see the module docstring)."""
        from mlflow.models import Model

        size = checkpoint.stat().st_size
        limit = float(os.environ.get("PUT_MLFLOW_MODEL_COPY_MB", "256")) * 2**20
        copied = size <= limit
        flavour = {"kind": kind, "variant": self.variant, "preset": self.preset, "sha256": sha, "bytes": size,
                   "loader": "put.checkpoint.load_checkpoint (safetensors, no pickle)",
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
        version = self.client.create_model_version(name, source=f"models:/{model_id}", run_id=self.run_id,
                                                   model_id=model_id, tags={"put.dag_id": self.dag_id})
        self.client.set_registered_model_alias(name, MODEL_ALIAS, version.version)

    def use_model(self, kind: str) -> None:
        """This run reads the variant's `kind` model of the same DAG configuration: logged as its model input,
        and the metrics logged by `log_evaluation` are linked to it."""
        from mlflow.entities import LoggedModelInput

        with self.lock:
            found = self._models(**{"put.dag_id": self.dag_id, "put.variant": self.variant or "", "put.kind": kind,
                                    "put.seed": str(self.seed)})
            if found:
                self.model_id = found[-1].model_id
                self.client.log_inputs(self.run_id, models=[LoggedModelInput(self.model_id)])

    def log_evaluation(self, metrics: dict[str, Any], masks: Path) -> None:
        """The evaluation's metrics (the metrics file's nesting), on the frozen masks' manifest as dataset and
        linked to the transformer evaluated; refreshes the experiment's saved view of the variants."""
        from put.masks.evaluation import MANIFEST

        links = self.log_dataset(Path(masks) / MANIFEST, f"{self.preset} test masks", "evaluation")
        self.use_model("transformer")
        flat = metric_names(metrics)
        self.log_metrics(flat, 0, **links, **({"model_id": self.model_id} if self.model_id else {}))
        shown = [k for k in flat if k.endswith(("/psnr", "/ssim")) and k.count("/") == 2
                 and not k.startswith("bins/")]
        if shown:  # top-K sampling first (the paper's PUT row), its 10-60% PSNR the order
            shown.sort(key=lambda k: (k.startswith("all/"), "/10-60/" not in k, k))
            sort_key = next(k for k in shown if k.endswith("/psnr"))
            with self.lock:
                self.client.set_experiment_tag(self.experiment, f"mlflow.sharedViewState.{VARIANTS_VIEW}",
                                               variants_view(shown, sort_key))

    def finish(self, status: str = "FINISHED") -> None:
        if self.system is not None:
            self.system.finish()
        with self.lock:
            for run in (self.run_id, self.parent):  # the parent's state: that of its latest stage
                self.client.set_terminated(run, status=status)


def stage_tracker(preset: str, variant: str | None, stage: str, dag_id: str, tags: dict[str, str] | None = None,
                  **options: Any) -> NullTracker:
    """MlflowTracker unless PUT_TRACKING=0 (options: labels, system_metrics, seed)."""
    if not tracking_enabled():
        return NullTracker()
    return MlflowTracker(preset, variant, stage, dag_id, tags, **options)


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

"""The runs of a DAG configuration: a parent per configuration, a child per stage instance, with the stage's
parameters, metrics, artefacts, dataset inputs and models (the models' part: models.py; docs/mlflow.md, "Layout of
the runs")."""

from __future__ import annotations

import contextlib
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from put.config import VARIANT_COLOURS
from put.io.code import command_sources
from put.io.files import file_sha256
from put.tracking.mlflow_private import dataset_entity
from put.tracking.models import ModelLogging
from put.tracking.names import (
    ATTEMPT_TAG,
    CODE_TAG,
    DUPLICATE_OF,
    LAST_STATUS,
    LOGGED_FROM,
    SUPERSEDED,
    VARIANTS_VIEW,
    VIEW_METRICS_TAG,
    experiment_name,
    flatten,
    metric_names,
    parent_name,
    variants_view,
)
from put.tracking.races import PARENT_TAG, RaceResolution
from put.tracking.source import code_version, environment_tags, installed_distributions, tracking_uri
from put.tracking.workspace import artifact_location

EXPERIMENT_KIND = "custom_model_development"  # MLflow's value for model training (not GenAI)
RUN_COLOUR_TAG = "mlflow.runColor"  # the colour the UI draws a run in (the runs table's dot, the charts' lines)
MARK_CHECK_S = 30.0  # how often a logging call looks whether a racer marked its run (a lookup per call: 2x its cost)
FROM_OUTPUTS_NOTE = ("Logged by `put track` from this stage's outputs: the stage did not run, because DVC found its "
                     "inputs, code and parameters unchanged since dvc.lock. No system metrics; curves come from the "
                     "files the training wrote.")


def _lock(uri: str):
    if uri.startswith("sqlite:///"):
        from filelock import FileLock

        db = Path(uri[len("sqlite:///"):])
        db.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(str(db) + ".lock", timeout=600)
    return contextlib.nullcontext()


@contextlib.contextmanager
def locked_client(uri: str | None = None):
    """A client of the store `uri` (default: tracking_uri()) for the block, which holds the store's lock (_lock):
    every MLflow call of every process goes through it (docs/mlflow.md, "Many writers")."""
    from mlflow.tracking import MlflowClient

    uri = uri or tracking_uri()
    with _lock(uri):
        yield MlflowClient(uri)


class TrackerLock:
    """A tracker's lock: its threads one at a time (the system metrics' beside the stage's: a call that found
    the run unmarked is not overtaken by another's move out of it, _follow_own), and the store's (_lock)."""

    def __init__(self, uri: str):
        self.threads, self.store = threading.RLock(), _lock(uri)

    def __enter__(self) -> TrackerLock:
        self.threads.acquire()
        try:
            self.store.__enter__()
        except BaseException:
            self.threads.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.store.__exit__(*exc)
        finally:
            self.threads.release()


def lineage_tags(preset: str, variant: str | None, stage: str, dag_id: str, seed: int = 0) -> dict[str, str]:
    """What a stage instance's runs share whatever code they ran: its DAG configuration, stage, variant and seed
    replicate (the run of one code version adds put.code)."""
    tags = {"put.dag_id": dag_id, "put.preset": preset, "put.level": "stage", "put.stage": stage}
    if variant:
        tags |= {"put.variant": variant, "put.seed": str(seed), "put.replicates": f"{dag_id}/{variant}"}
    return tags


def stage_command(stage: str) -> str:
    """The `put` subcommand of a stage (train_pvqvae -> train-pvqvae)."""
    return stage.replace("_", "-")


def stage_code(stage: str) -> str:
    """The code version (tag put.code) of the stage's run: a hash of the files its subcommand runs."""
    return code_version(command_sources(stage_command(stage)))


def run_name(stage: str, variant: str | None, seed: int = 0) -> str:
    """A stage instance's run name: `<stage> <variant>`, `<stage> <variant> seed S` for a seed replicate, or the
    stage alone (the report)."""
    return f"{stage} {variant}" + (f" seed {seed}" if seed else "") if variant else stage


class MlflowTracker(ModelLogging, RaceResolution):
    """The MLflow run of a stage instance; `MlflowTracker.open(...)` builds one and opens its run (start)."""

    def __init__(self, preset: str, variant: str | None, stage: str, dag_id: str,
                 tags: dict[str, str] | None = None, *, labels: Sequence[str] | None = None,
                 seed: int = 0, from_outputs: bool = False, code: str | None = None, run_id: str | None = None,
                 attempt: int | None = None, uri: str | None = None):
        """variant None: a stage spanning every variant (the report). `labels`: the DAG's evaluated labels (name the
        parent). A seed replicate (`seed` > 0) has runs of its own, grouped with its base run by put.replicates.
        `from_outputs`: the stage did not run and `put track` logs it from its outputs (put.logged_from).

        A spool's replay passes what the attempt recorded: `code` and `run_id` (the run's identity), `attempt`
        (start in ms; a later attempt owns the status) and `uri` (default MLFLOW_TRACKING_URI). Nothing is sent
        before start()."""
        self.preset, self.variant, self.stage, self.dag_id, self.seed = preset, variant, stage, dag_id, seed
        self.tags, self.labels, self.from_outputs, self.recorded_run = tags, labels, from_outputs, run_id
        self.uri = uri or tracking_uri()
        self.lock = TrackerLock(self.uri)
        self.model_id: str | None = None
        self.attempt = int(time.time() * 1000) if attempt is None else attempt
        self.call_time = threading.local()  # the time of the stage's call being logged (called_at), per thread
        self.checked = time.monotonic()  # when the run's mark was last looked at (_current)
        self.files = command_sources(stage_command(stage))
        self.code = code or code_version(self.files)
        self.identity = lineage_tags(preset, variant, stage, dag_id, seed) | {CODE_TAG: self.code}
        self.parent_identity = {"put.dag_id": dag_id, "put.preset": preset, "put.level": "dag"}

    @classmethod
    def open(cls, *args: Any, **kwargs: Any) -> MlflowTracker:
        """A tracker whose run is open: the constructor's arguments."""
        tracker = cls(*args, **kwargs)
        tracker.start()
        return tracker

    def start(self) -> None:
        """Opens the run: the attempt's recorded run when the store has it, else this instance's run found or
        created (with its experiment and parent, resolving a race), tagged and claimed RUNNING."""
        from mlflow.tracking import MlflowClient

        with self.lock:  # a client opens (and may create) the SQLite store
            self.client = MlflowClient(self.uri)
            rejoined = self.recorded_run is not None and self._rejoin(self.recorded_run)
            if rejoined:  # its tags and environment are the attempt's own
                self._claim()
        if rejoined:
            return
        # outside the lock: git and the installed distributions take a while
        command = " ".join(["put", stage_command(self.stage)] + ([self.variant] if self.variant else []))
        environment = environment_tags(command, self.files)
        distributions = installed_distributions()
        with self.lock:
            self._open_runs()
            if self._superseded():  # a replay of an earlier attempt: the later one's tags and status stand
                return
            self._tag_runs(environment)
            self._claim()
            if not self.client.list_artifacts(self.run_id, "environment.txt"):
                self.client.log_text(self.run_id, distributions, "environment.txt")

    def _open_runs(self) -> None:
        """The experiment, the DAG configuration's parent run and this stage instance's run, found or created."""
        self.experiment = self._experiment(experiment_name(self.preset))
        self.parent = self._run(self.parent_identity, parent_name(self.preset, self.dag_id, self.labels), None)
        if self.labels is not None:
            self.client.set_tag(self.parent, "put.variants", ",".join(self.labels))
        self.run_id = self._stage_run(lineage_tags(self.preset, self.variant, self.stage, self.dag_id, self.seed),
                                      run_name(self.stage, self.variant, self.seed))

    def _tag_runs(self, environment: dict[str, str]) -> None:
        """The run's own tags (its environment, the caller's, its colour, where it was logged from); the parent's
        source, that of its first stage."""
        from mlflow.entities import RunTag

        own_tags = {**environment, **(self.tags or {})}
        if self.variant in VARIANT_COLOURS:  # the variant's colour in MLflow's tables and charts, as everywhere
            own_tags[RUN_COLOUR_TAG] = VARIANT_COLOURS[self.variant]
        if self.from_outputs:
            own_tags |= {LOGGED_FROM: "outputs", "mlflow.note.content": FROM_OUTPUTS_NOTE}
        run = self.client.get_run(self.run_id)
        self.client.log_batch(self.run_id, tags=[RunTag(key, value) for key, value in own_tags.items()])
        if not self.from_outputs and LOGGED_FROM in run.data.tags:  # the stage ran after all: its own run now
            self.client.delete_tag(self.run_id, LOGGED_FROM)
            self.client.delete_tag(self.run_id, "mlflow.note.content")
        if "mlflow.source.name" not in self.client.get_run(self.parent).data.tags:
            for key in (k for k in environment if k.startswith("mlflow.source.")):
                self.client.set_tag(self.parent, key, f"put DAG ({self.preset})" if key.endswith(".name")
                                    else environment[key])

    def _rejoin(self, run_id: str) -> bool:
        """The run an attempt recorded, when this store has it (a replay `--to` another store may not)."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException as err:
            if err.error_code != "RESOURCE_DOES_NOT_EXIST":  # a server that did not answer, say
                raise
            return False
        self.run_id, self.experiment = run_id, run.info.experiment_id
        self.parent = run.data.tags.get(PARENT_TAG)
        return True

    def _superseded(self) -> bool:
        """Whether a later attempt has started on this run (it writes, or has written, the run's status)."""
        return int(self.client.get_run(self.run_id).data.tags.get(ATTEMPT_TAG, "0")) > self.attempt

    def _claim(self) -> None:
        """The run (and its parent) RUNNING, unless a later attempt has taken it over: a replay of an earlier
        attempt only adds its records."""
        self._follow_own()
        if self._superseded():
            return
        self._follow_parent()
        self.client.set_tag(self.run_id, ATTEMPT_TAG, str(self.attempt))
        for run_id in (self.run_id, self.parent):
            if run_id:
                self.client.update_run(run_id, status="RUNNING")

    def _current(self, now: bool = False) -> str:
        """The run a call logs into: this host's, or the kept one once a racer has marked this one (_follow_own),
        taken over as at a claim. Looked up again every MARK_CHECK_S (`now`: at once; a claim and an end always
        look): what is logged meanwhile into a run just marked goes into the kept one with the move."""
        if now or time.monotonic() - self.checked >= MARK_CHECK_S:
            self.checked = time.monotonic()
            if self._follow_own():
                self._claim()
        return self.run_id

    def _experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is None:
            try:
                return self.client.create_experiment(name, artifact_location(self.uri, name),
                                                     tags={"mlflow.experimentKind": EXPERIMENT_KIND})
            except Exception:  # created meanwhile by another process (tracking server, no lock)
                found = self.client.get_experiment_by_name(name)
        if found.tags.get("mlflow.experimentKind") != EXPERIMENT_KIND:
            self.client.set_experiment_tag(found.experiment_id, "mlflow.experimentKind", EXPERIMENT_KIND)
        return found.experiment_id

    def _stage_run(self, lineage: dict[str, str], name: str) -> str:
        """The run of this stage instance at this code version (tag put.code): found again, or created. One run
        never holds two code versions: after a code change the stage gets a new run, linked to the one it follows
        (put.previous_run, put.previous_code), which is marked put.superseded_by (and drops out of the saved
        view)."""
        own = {**lineage, CODE_TAG: self.code}
        if self._search(own):
            return self._run(own, name, self.parent)
        others = [r for r in self._search(lineage)  # a race's losing duplicate is no other version
                  if r.data.tags.get(CODE_TAG) != self.code and DUPLICATE_OF not in r.data.tags]
        # A run created after this attempt started is newer code, not older: the replay of an old spool made
        # after a code change and its run. That one stays current; this one is the superseded one.
        earlier = [r for r in others if r.info.start_time <= self.attempt]
        later = [r for r in others if r.info.start_time > self.attempt]
        run_id = self._run(own, name, self.parent)
        if earlier:
            previous = earlier[-1]
            self.client.set_tag(run_id, "put.previous_run", previous.info.run_id)
            self.client.set_tag(run_id, "put.previous_code", previous.data.tags.get(CODE_TAG, "unknown"))
            for run in earlier:
                if SUPERSEDED not in run.data.tags:
                    self.client.set_tag(run.info.run_id, SUPERSEDED, run_id)
        if later:
            self.client.set_tag(run_id, SUPERSEDED, later[-1].info.run_id)
        return run_id

    def log_params(self, params: dict[str, Any]) -> None:
        """Stage parameters (nested keys joined by dots); ones already logged (a re-run) are left alone."""
        from mlflow.entities import Param

        with self.lock:
            logged = self.client.get_run(self._current()).data.params
            batch = [Param(k, str(v)[:6000]) for k, v in flatten(params).items() if k not in logged]
            for start in range(0, len(batch), 100):
                self.client.log_batch(self.run_id, params=batch[start:start + 100])

    def log_metrics(self, metrics: dict[str, float], step: int, **links: str) -> None:
        """`links`: model_id, dataset_name, dataset_digest of the values (MLflow 3 links them to a model)."""
        from mlflow.entities import Metric

        # the stage's call's time, whether logged now or replayed: a point sent again is the same point
        stamp = getattr(self.call_time, "ms", None) or int(time.time() * 1000)
        batch = [Metric(k, float(v), stamp, step, **links) for k, v in metrics.items() if np.isfinite(v)]
        with self.lock:
            run_id = self._current()
            for start in range(0, len(batch), 500):
                self.client.log_batch(run_id, metrics=batch[start:start + 500])

    def log_image(self, image: np.ndarray, name: str) -> None:
        with self.lock:
            self.client.log_image(self._current(), image, artifact_file=name)

    def log_artifact(self, path: Path) -> None:
        with self.lock:
            self.client.log_artifact(self._current(), str(path))

    def log_dataset(self, path: Path, name: str, context: str) -> dict[str, str]:
        """A CSV file (a split, the evaluation masks' manifest) as the run's dataset input, its digest the
        file's SHA-256 (first 16 hex digits); returns the dataset's name and digest, for linking metrics."""
        import mlflow.data
        import pandas as pd
        from mlflow.entities import DatasetInput, InputTag

        path = Path(path)
        digest = file_sha256(path)[:16]
        with warnings.catch_warnings():  # MLflow's hints on schema inference and ambiguous local sources
            warnings.simplefilter("ignore", UserWarning)
            dataset = mlflow.data.from_pandas(pd.read_csv(path), source=str(path.resolve()), name=name, digest=digest)
            entity = DatasetInput(dataset_entity(dataset), tags=[InputTag("mlflow.data.context", context)])
        with self.lock:
            self.client.log_inputs(self._current(), datasets=[entity])
        return {"dataset_name": name, "dataset_digest": digest}

    def log_evaluation(self, metrics: dict[str, Any], manifest: Path) -> None:
        """The evaluation's metrics (the metrics file's nesting), on the frozen masks' manifest as dataset and
        linked to the transformer evaluated; refreshes the experiment's saved view of the variants."""
        links = self.log_dataset(manifest, f"{self.preset} test masks", "evaluation")
        self.use_model("transformer")
        flat = metric_names(metrics)
        self.log_metrics(flat, 0, **links, **({"model_id": self.model_id} if self.model_id else {}))
        shown = {k for k in flat if k.endswith(("/psnr", "/ssim")) and k.count("/") == 2 and not k.startswith("bins/")}
        if not shown:
            return
        # The columns of every evaluation so far: one of a deterministic method (mode `all` only) hides no other.
        # Top-K sampling first (the paper's PUT row), its 10-60% PSNR the order.
        with self.lock:
            earlier = self.client.get_experiment(self.experiment).tags.get(VIEW_METRICS_TAG, "")
            shown = sorted(shown | set(filter(None, earlier.split(","))),
                           key=lambda k: (k.startswith("all/"), "/10-60/" not in k, k))
            sort_key = next(k for k in shown if k.endswith("/psnr"))
            self.client.set_experiment_tag(self.experiment, VIEW_METRICS_TAG, ",".join(shown))
            self.client.set_experiment_tag(self.experiment, f"mlflow.sharedViewState.{VARIANTS_VIEW}",
                                           variants_view(shown, sort_key))

    @contextlib.contextmanager
    def called_at(self, time_ms: int):
        self.call_time.ms = time_ms
        try:
            yield
        finally:
            self.call_time.ms = None

    def finish(self, status: str = "FINISHED") -> None:
        """The run's end, unless a later attempt has started on it (a spooled KILLED of attempt 1, replayed,
        must not overwrite what attempt 2 is writing or has written). A racer's mark that lands while this runs
        (the mark comes before its KILLED) is followed after: the run left is KILLED again, the kept one ended."""
        with self.lock:
            while True:
                self._follow_own()
                self._follow_parent()
                if self._superseded():
                    return
                for run in (self.run_id, self.parent):  # the parent's state: that of its latest stage
                    if run:
                        self.client.set_terminated(run, status=status)
                self.client.set_tag(self.run_id, LAST_STATUS, status)
                moved = self._follow_own()
                if not (self._follow_parent() or moved):
                    return

"""Runs created twice by a race (hosts writing to a tracking server, no lock): each such set resolves to the run with
the smallest id, the others marked `put.duplicate_of` it, ended (KILLED), their children and records moved into it;
a host whose run (its stage's, or its parent) was marked follows the mark (docs/mlflow.md, "Many writers"). A mixin
of MlflowTracker (put/tracking/runs.py), whose client, experiment and runs it uses."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from put.tracking.names import DUPLICATE_OF, tag_filter

PARENT_TAG = "mlflow.parentRunId"  # MLflow's nesting of a stage's run under its DAG's
BATCH = 1000  # metrics per log_batch call, MLflow's limit


class RaceResolution:
    """_run (find or create, resolving a race), _follow_own and _follow_parent (a host follows a mark) of
    MlflowTracker."""

    client: Any
    experiment: str
    run_id: str
    parent: str | None
    identity: dict[str, str]  # the tags that name this stage instance's run at its code version
    parent_identity: dict[str, str]  # those of its DAG configuration's parent run

    def _search(self, tags: dict[str, str]) -> list:
        return sorted(self.client.search_runs([self.experiment], tag_filter(tags), max_results=100),
                      key=lambda r: (r.info.start_time, r.info.run_id))

    def _run(self, tags: dict[str, str], name: str | None, parent: str | None) -> str:
        """The run with `tags`, found or created (named `name`; None: name left alone). Runs created twice resolve
        to the smallest run id (every client computes the same; start_time is each creator's clock). Duplicates
        are marked and their children and records moved into it, also earlier-marked ones (a move may have
        landed after a racer's search). No racer deletes a run: another may be using it."""
        found = self._search(tags)
        if not found:
            extra = {PARENT_TAG: parent} if parent else {}
            own = self.client.create_run(self.experiment, tags={**tags, **extra}, run_name=name)
            found = self._search(tags) or [own]
        kept = min(found, key=lambda r: r.info.run_id)
        if DUPLICATE_OF in kept.data.tags:  # its mark's run is gone (deleted): the smallest left is kept
            self.client.delete_tag(kept.info.run_id, DUPLICATE_OF)
        for run in found:
            if run is kept:
                continue
            if run.data.tags.get(DUPLICATE_OF) != kept.info.run_id:
                self.client.set_tag(run.info.run_id, DUPLICATE_OF, kept.info.run_id)  # before the move's search
                self.client.set_terminated(run.info.run_id, status="KILLED")
            self._absorb(run.info.run_id, kept.info.run_id, tags)
        if name is not None and kept.info.run_name != name:  # e.g. the parent, once the variant set is known
            self.client.set_tag(kept.info.run_id, "mlflow.runName", name)
        return kept.info.run_id

    def _absorb(self, duplicate: str, kept: str, tags: dict[str, str]) -> None:
        """`duplicate`'s children and records into `kept`, and on along kept's marks when a racer has marked it
        meanwhile (it sets its mark before its own move's search, which may have missed what came in here)."""
        while True:
            for child in self.client.search_runs([self.experiment], f"tags.`{PARENT_TAG}` = '{duplicate}'",
                                                 max_results=5000):
                self.client.set_tag(child.info.run_id, PARENT_TAG, kept)
            self._merge(duplicate, kept)
            end = self._kept_of(kept, tags)
            if end == kept:
                return
            duplicate, kept = kept, end

    def _live(self, run_id: str):
        """The run, or None when it was deleted (in the UI, say) or is gone."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException as err:
            if err.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
            return None
        return run if run.info.lifecycle_stage == "active" else None

    def _kept_of(self, run_id: str, tags: dict[str, str]) -> str:
        """The run `run_id`'s marks lead to (ids only decrease along them: no cycle). A mark to a deleted run leads
        nowhere: the runs with `tags` that are left are resolved again."""
        run = self.client.get_run(run_id)
        while DUPLICATE_OF in run.data.tags:
            target = self._live(run.data.tags[DUPLICATE_OF])
            if target is None:
                return self._run(tags, None, run.data.tags.get(PARENT_TAG))
            run = target
        return run.info.run_id

    def _follow_own(self) -> bool:
        """This host's stage run follows its mark: a racer that saw another run of this stage instance with a
        smaller id marked this one after this host took it. What this host logged here goes into the kept run
        (the racer's move may have run before it came), and so does everything it logs from now on; the run left
        stays KILLED. True when the run changed."""
        kept = self._kept_of(self.run_id, self.identity)
        if kept == self.run_id:
            return False
        self.client.set_terminated(self.run_id, status="KILLED")  # an end of this host's that overtook the mark
        self._merge(self.run_id, kept)
        self.run_id = kept
        return True

    def _follow_parent(self) -> bool:
        """This run under its DAG's kept parent. A racing host may mark the parent this process took as a
        duplicate after this run was made under it, too late for the mark's move of the children: the mark is
        then visible here (it is set before that move's search). True when the parent changed."""
        if not self.parent:
            return False
        kept = self._kept_of(self.parent, self.parent_identity)
        moved = kept != self.parent
        if moved:
            self.client.set_terminated(self.parent, status="KILLED")  # an end of this host's that overtook the mark
            self.parent = kept
        if self.client.get_run(self.run_id).data.tags.get(PARENT_TAG) != self.parent:
            self.client.set_tag(self.run_id, PARENT_TAG, self.parent)
        return moved

    def _merge(self, source: str, target: str) -> None:
        """What run `source` holds into run `target`: its metric points with their times (a point sent twice is
        stored once), the parameters and artifacts `target` lacks, its dataset and model inputs and its models. A
        parent holds none of these: only the lookups."""
        from mlflow.entities import DatasetInput, LoggedModelInput, LoggedModelOutput, Metric, Param

        old, new = self.client.get_run(source), self.client.get_run(target)
        points = [Metric(m.key, m.value, m.timestamp, m.step) for key in old.data.metrics
                  for m in self.client.get_metric_history(source, key)]
        for start in range(0, len(points), BATCH):
            self.client.log_batch(target, metrics=points[start:start + BATCH])
        params = [Param(k, v) for k, v in old.data.params.items() if k not in new.data.params]
        for start in range(0, len(params), 100):
            self.client.log_batch(target, params=params[start:start + 100])
        inputs, have = old.inputs, new.inputs
        if inputs and inputs.dataset_inputs:  # the store keeps a dataset input once
            self.client.log_inputs(target, datasets=[DatasetInput(d.dataset, d.tags) for d in inputs.dataset_inputs])
        known = {m.model_id for m in (have.model_inputs if have else [])}
        if models := [m for m in (inputs.model_inputs if inputs else []) if m.model_id not in known]:
            self.client.log_inputs(target, models=[LoggedModelInput(m.model_id) for m in models])
        made = {m.model_id for m in (new.outputs.model_outputs if new.outputs else [])}
        if outputs := [m for m in (old.outputs.model_outputs if old.outputs else []) if m.model_id not in made]:
            self.client.log_outputs(target, [LoggedModelOutput(m.model_id, m.step) for m in outputs])
        missing = sorted(set(self._artifacts(source)) - set(self._artifacts(target)))
        with tempfile.TemporaryDirectory() as folder:
            for path in missing:
                local = self.client.download_artifacts(source, path, folder)
                self.client.log_artifact(target, local, str(Path(path).parent) if "/" in path else None)

    def _artifacts(self, run_id: str, path: str | None = None) -> list[str]:
        files: list[str] = []
        for item in self.client.list_artifacts(run_id, path):
            files += self._artifacts(run_id, item.path) if item.is_dir else [item.path]
        return files


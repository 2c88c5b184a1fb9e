"""The training loop both stages share: resume, atomic checkpoints, SIGTERM, non-finite-loss stop, logging. `out`
appears only when training completes; `<out>.resume.pt` records the training's identity and is never resumed under
other settings (docs/cluster.md, "Training resumes")."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from tqdm import tqdm

from put.config import TrainConfig
from put.config.paths import EVAL_CURVE, TRAIN_CURVE
from put.errors import PutError
from put.io.diskspace import DiskFullError, require_space
from put.io.files import atomic_path, link_or_copy, recover_leftovers
from put.models.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from put.models.seeding import derive_seed
from put.tracking.base import NullTracker, Tracker
from put.tracking.names import flatten
from put.train.distributed import Distributed
from put.train.room import state_bytes, warn_if_short

STOPPED_EXIT_CODE = 143  # 128 + SIGTERM: the scheduler sees an unfinished job, the state is saved
# A floor on a step's wall time in seconds (the step then sleeps the rest), for tests of time limits: a one-minute
# attempt can then never finish a training of enough steps, on however fast a machine. Results are unchanged.
MIN_STEP_ENV = "PUT_TRAIN_MIN_STEP_S"


def min_step_seconds() -> float:
    value = os.environ.get(MIN_STEP_ENV) or "0"
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < math.inf:
        raise PutError(f"{MIN_STEP_ENV}={value!r}: expected a number of seconds >= 0 (unset: no floor)")
    return seconds


class TrainingDiverged(PutError, RuntimeError):
    """A non-finite loss: stopped before it reached the weights; the message says what was kept and what to try."""


class StaleState(CheckpointError):
    """A saved state (or a finished output) made with other settings than the current ones."""


class TrainingStopped(SystemExit):
    def __init__(self, message: str):
        print(message, file=sys.stderr)
        super().__init__(STOPPED_EXIT_CODE)


class Task(Protocol):
    """What a stage provides to the loop."""

    kind: str  # checkpoint kind: "pvqvae" | "transformer"

    def batches(self, start_step: int) -> Iterable: ...
    def train_step(self, batch: Any, step: int) -> dict[str, torch.Tensor]: ...
    def evaluate(self) -> dict[str, float]: ...
    def checkpoint(self, training: dict) -> Checkpoint: ...
    def restore(self, ckpt: Checkpoint) -> None: ...


def resume_path(out: Path) -> Path:
    return out.with_name(out.stem + ".resume" + out.suffix)


def final_state_path(out: Path, code: str) -> Path:
    """Where a finished training keeps its final state (a hard link to `out`) for a retry of its stage by the same
    code, `code` being that code's version: a re-run after an edit never mistakes it for its own (docs/cluster.md,
    "Training resumes")."""
    return out.with_name(f"{out.stem}.final-{code}{out.suffix}")


class StopSignal:
    """Turns SIGTERM / SIGUSR1 (Slurm's warnings before a time limit or preemption) into a flag the loop
    polls after each step, so the state can be saved before the process exits."""

    SIGNALS = (signal.SIGTERM, signal.SIGUSR1)

    def __init__(self):
        self.received: int | None = None
        self._previous = {}

    def __enter__(self) -> StopSignal:
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self.received = signum

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


@dataclass
class LoopResult:
    out: Path
    step: int
    metrics: dict[str, float]


def finite_or_raise(losses: dict[str, torch.Tensor], step: int, dist: Distributed, last_good: Path | None) -> None:
    """Checked before the backward pass, so the weights (and every checkpoint on disk) stay good."""
    values = {name: float(v.detach()) for name, v in losses.items()}
    ok = all(math.isfinite(v) for v in values.values())
    if not dist.all_true(ok):
        bad = ", ".join(f"{k}={v}" for k, v in values.items() if not math.isfinite(v)) or "on another process"
        where = f"the last good checkpoint {last_good} is intact" if last_good else "no checkpoint was written yet"
        raise TrainingDiverged(f"non-finite loss at step {step} ({bad}); stopping: {where}. Lower the learning "
                               "rate or check the data, then re-run to resume from that checkpoint.")


def identity_digest(identity: dict) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def same_identity(ckpt: Checkpoint, identity: dict) -> bool:
    saved = json.loads(ckpt.training.get("identity", "null"))
    return saved is not None and identity_digest(saved) == identity_digest(identity)


def check_identity(ckpt: Checkpoint, identity: dict) -> None:
    """Refuses a state whose recorded identity differs from `identity`, naming what changed."""
    if same_identity(ckpt, identity):
        return
    saved = json.loads(ckpt.training.get("identity", "null"))
    if saved is None:
        changes = "it records no settings (written by an older version of this code)"
    else:
        old, new = flatten(saved), flatten(identity)
        changed = [f"{key}: {old.get(key, '(absent)')!r} -> {new.get(key, '(absent)')!r}"
                   for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)]
        changes = "changed: " + "; ".join(changed)
    raise StaleState(f"{ckpt.path}: saved by a training with other settings than the current ones ({changes}). "
                     "It was neither resumed nor deleted. To train afresh with the current settings, re-run with "
                     f"--restart (or delete {ckpt.path}); to continue it, restore the settings it was made with.")


def timed(items: Iterable) -> Iterator[tuple[Any, float]]:
    """Each item with the seconds spent waiting for it: a data loader that does not keep up shows here."""
    iterator = iter(items)
    while True:
        start = time.perf_counter()
        try:
            item = next(iterator)
        except StopIteration:
            return
        yield item, time.perf_counter() - start


def write_curves(folder: Path, history: dict[str, list[dict]]) -> None:
    """One CSV per kind of row (train, eval): a `step` column and one column per logged value."""
    for kind, rows in history.items():
        columns = ["step", *dict.fromkeys(k for row in rows for k in row if k != "step")]
        name = {"train": TRAIN_CURVE, "eval": EVAL_CURVE}[kind]
        with atomic_path(Path(folder) / name) as tmp, open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)


@dataclass
class Resumed:
    """Where a training starts: its step, the file it resumed from (None: afresh) and its curves so far."""

    step: int = 0
    source: Path | None = None
    history: dict[str, list[dict]] | None = None

    def __post_init__(self) -> None:
        self.history = self.history or {"train": [], "eval": []}


def drop_stale_states(out: Path, final: Path, partial: Path, restart: bool, dist: Distributed) -> None:
    """Final states of other code go (a re-run after an edit trains anew: DVC deleted `out` first), and with
    `restart` the resumable state too."""
    if dist.is_main:
        for other in out.parent.glob(final_state_path(out, "*").name):
            if other != final or restart:
                other.unlink()
                print(f"removed {other}: the final state of an earlier training by other code")
        if restart:
            partial.unlink(missing_ok=True)
    dist.barrier()


def resume(task: Task, candidates: tuple[Path, ...], final: Path, identity: dict, dist: Distributed) -> Resumed:
    """The first of `candidates` (`out`, the final state, the resumable state) made with these settings, restored
    into `task`; a state with other settings is refused, except a final state (its `out` was deleted after a
    change of settings, which trains afresh)."""
    for candidate in candidates:
        if not candidate.exists():
            continue
        try:
            ckpt = load_checkpoint(candidate, kind=task.kind)
        except CheckpointError as err:
            raise CheckpointError(f"{err}; this run would resume from it: move it away to start afresh") from None
        if candidate == final and not same_identity(ckpt, identity):
            if dist.is_main:
                print(f"{final}: the final state of an earlier training with other settings; training afresh")
            continue
        check_identity(ckpt, identity)
        task.restore(ckpt)
        return Resumed(int(ckpt.training.get("step", 0)), candidate, ckpt.training.get("history"))
    return Resumed()


def write_finished(out: Path, resumed: Resumed, curves: Path | None, dist: Distributed) -> None:
    """A training already complete: `out` again from its kept state when a kill came after training."""
    if dist.is_main:
        print(f"{out}: already trained for {resumed.step} iterations with these settings; "
              + ("nothing to do" if resumed.source == out else f"written again from {resumed.source}"))
        if resumed.source != out:
            link_or_copy(resumed.source, out)
        if curves is not None:
            write_curves(curves, resumed.history)
    dist.barrier()


@dataclass
class Saver:
    """Writes the training's state, or stops every process with a DiskFullError (before writing, when the free
    space is short) that names the last good state, which stays intact."""

    task: Task
    config: TrainConfig
    dist: Distributed
    identity: dict
    history: dict[str, list[dict]]
    labels: dict[str, str]
    last_good: Path | None
    last_step: int
    progress: tqdm

    def save(self, path: Path, step: int) -> None:
        problem = None
        if self.dist.is_main:
            ckpt = self.task.checkpoint({
                "step": step, "iterations": self.config.iterations,
                "identity": json.dumps(self.identity, sort_keys=True), "history": self.history,
                "rng": {"scheme": "derive_seed(seed, step, rank)", "seed": self.config.seed}, **self.labels})
            kept = (f"the last good state {self.last_good} (step {self.last_step}) is intact; the "
                    f"{step - self.last_step} steps since are not saved" if self.last_good else
                    "no state had been saved yet, so the next run starts afresh")
            try:
                require_space(path, state_bytes(ckpt, self.task), kept)
                save_checkpoint(path, ckpt, kept)
            except DiskFullError as err:
                problem = err
        if not self.dist.all_true(problem is None):
            self.progress.close()  # the error on a line of its own
            raise problem if problem is not None else SystemExit(2)  # the main process says why
        self.dist.barrier()

    def save_resumable(self, path: Path, step: int) -> None:
        self.save(path, step)
        self.last_good, self.last_step = path, step


@dataclass
class StepTimes:
    """Since the last log: seconds waiting for batches and seconds in the steps. A starved GPU shows as the share
    of the time the step waited for its batch (the loader's workers); wall clock, so MLflow and the progress bar
    only: the curves (and the state) stay reproducible."""

    waited: float = 0.0
    computed: float = 0.0
    steps: int = 0

    def add(self, wait: float, compute: float) -> None:
        self.waited, self.computed, self.steps = self.waited + wait, self.computed + compute, self.steps + 1

    def take(self) -> dict[str, float]:
        found = {"train/data_wait_s": self.waited / self.steps,
                 "train/data_wait_fraction": self.waited / max(self.waited + self.computed, 1e-12)}
        self.waited = self.computed = 0.0
        self.steps = 0
        return found


def run_training(task: Task, config: TrainConfig, out: Path, dist: Distributed, tracker: Tracker = NullTracker(),
                 labels: dict[str, str] | None = None, *, identity: dict, curves: Path | None = None,
                 restart: bool = False, code: str) -> LoopResult:
    """`identity`: what defines this training (see the module docstring); `code`: the version of the code that
    trains, which names the final state kept for a retry; `curves`: folder for the CSVs."""
    out = Path(out)
    partial, final = resume_path(out), final_state_path(out, code)
    drop_stale_states(out, final, partial, restart, dist)
    resumed = Resumed() if restart else resume(task, (out, final, partial), final, identity, dist)
    if resumed.source is not None and resumed.step >= config.iterations:  # finished (see the module docstring)
        write_finished(out, resumed, curves, dist)
        return LoopResult(out, resumed.step, {})
    if dist.is_main:
        announce_start(task, out, resumed, partial, final)

    progress = tqdm(total=config.iterations, initial=resumed.step, desc=f"train {task.kind}",
                    disable=not dist.is_main, dynamic_ncols=True)
    saver = Saver(task, config, dist, identity, resumed.history, labels or {}, resumed.source, resumed.step, progress)
    step, metrics = train_steps(task, config, dist, tracker, saver, progress, resumed, partial)
    progress.close()
    if step < config.iterations:  # the batches ran out early: never report an unfinished training as done
        raise RuntimeError(f"training stopped at step {step} of {config.iterations}: the data loader ended early")
    if curves is not None and dist.is_main:
        write_curves(curves, resumed.history)
    saver.save(out, step)
    if dist.is_main:  # the final state, kept for a retry of this stage (docs/cluster.md, "Training resumes")
        keep_final_state(out, final, partial)
    return LoopResult(out, step, metrics)


def announce_start(task: Task, out: Path, resumed: Resumed, partial: Path, final: Path) -> None:
    """Where the training starts from, what was recovered, and a warning when the disk lacks room for its states."""
    if resumed.source is not None:
        print(f"resuming from {resumed.source} at step {resumed.step}")
    for line in recover_leftovers(partial) + recover_leftovers(final):  # a copy of the final state killed
        print(f"recovered: {line}", file=sys.stderr)
    warn_if_short(out, partial, state_bytes(task.checkpoint({}), task))


def train_steps(task: Task, config: TrainConfig, dist: Distributed, tracker: Tracker, saver: Saver,
                progress: tqdm, resumed: Resumed, partial: Path) -> tuple[int, dict[str, float]]:
    """The steps from the resumed one to the last (or to a stop signal, which saves the state and raises): each
    logged, evaluated and saved at its interval. Returns the step reached and its metrics."""
    floor, times, history = min_step_seconds(), StepTimes(), resumed.history
    metrics: dict[str, float] = {}
    with StopSignal() as stop:
        step = resumed.step
        for batch, wait in timed(task.batches(step)):
            began = time.perf_counter()
            # Dropout and any other global-RNG use: a pure function of (seed, step, rank), so resumable.
            torch.manual_seed(derive_seed(config.seed, step, dist.rank))
            losses = task.train_step(batch, step)
            finite_or_raise(losses, step, dist, saver.last_good)  # reads the losses: the device has finished
            times.add(wait, time.perf_counter() - began)
            if floor:
                time.sleep(max(0.0, floor - (time.perf_counter() - began)))
            step += 1
            metrics = {f"train/{k}": float(v) for k, v in losses.items()}
            progress.update(1)
            if step % config.log_every == 0 or step == config.iterations:
                history["train"].append({"step": step, **{k.split("/", 1)[1]: v for k, v in metrics.items()}})
                metrics.update(times.take())
                progress.set_postfix({k.split("/")[-1]: f"{v:.4g}" for k, v in metrics.items()}, refresh=False)
                tracker.log_metrics(metrics, step)
            if step % config.eval_every == 0 or step == config.iterations:
                metrics.update(evaluate(task, step, history, tracker, progress, dist))
            if step == config.iterations:
                break
            stop_now = not dist.all_true(stop.received is None)
            if stop_now or step % config.checkpoint_every == 0:
                saver.save_resumable(partial, step)
            if stop_now:
                progress.close()
                raise TrainingStopped(f"stopped by signal at step {step}: state saved to {partial}; "
                                      "re-run the same command to resume")
    return step, metrics


def evaluate(task: Task, step: int, history: dict[str, list[dict]], tracker: Tracker, progress: tqdm,
             dist: Distributed) -> dict[str, float]:
    """The task's evaluation at `step`: logged, added to the curves and shown."""
    evaluation = task.evaluate()
    tracker.log_metrics(evaluation, step)
    history["eval"].append({"step": step, **{k.split("/", 1)[1]: v for k, v in evaluation.items()}})
    if dist.is_main:
        progress.write(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in evaluation.items()))
    return evaluation


def keep_final_state(out: Path, final: Path, partial: Path) -> None:
    """`final`, a hard link to the finished `out` (else a copy), for a retry after a late kill. A failed copy is a
    warning, not a failed stage (Snakemake would delete `out` and train again); the resume state then stays."""
    try:
        link_or_copy(out, final)
    except OSError as err:
        retry = f"resumes from {partial}" if partial.exists() else "trains again"
        print(f"warning: {out} is complete, but its final state could not be kept as {final} ({err}); a retry of "
              f"this stage after a kill {retry}", file=sys.stderr)
        return
    partial.unlink(missing_ok=True)

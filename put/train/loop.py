"""The training loop both stages share: resume, periodic atomic checkpoints, SIGTERM handling,
non-finite-loss stop, progress and metric logging. The finished model goes to `out` only when training
completes; the resumable state lives in `<out>.resume.pt` beside it, records the training's identity and is
never resumed under other settings. Files, identity and curves (docs/cluster.md, "Training resumes")."""

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
from put.tracking.base import NullTracker
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


def flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix: data}
    return {k: v for key, value in data.items() for k, v in flat(value, f"{prefix}.{key}" if prefix else key).items()}


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
        old, new = flat(saved), flat(identity)
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


def run_training(task: Task, config: TrainConfig, out: Path, dist: Distributed, tracker: NullTracker = NullTracker(),
                 labels: dict[str, str] | None = None, *, identity: dict, curves: Path | None = None,
                 restart: bool = False, code: str) -> LoopResult:
    """`identity`: what defines this training (see the module docstring); `code`: the version of the code that
    trains, which names the final state kept for a retry; `curves`: folder for the CSVs."""
    out = Path(out)
    partial, final = resume_path(out), final_state_path(out, code)
    floor = min_step_seconds()
    if dist.is_main:  # final states of other code: a re-run after an edit trains anew (DVC deleted `out` first)
        for other in out.parent.glob(final_state_path(out, "*").name):
            if other != final or restart:
                other.unlink()
                print(f"removed {other}: the final state of an earlier training by other code")
        if restart:
            partial.unlink(missing_ok=True)
    dist.barrier()
    start, source, history = 0, None, {"train": [], "eval": []}
    for candidate in () if restart else (out, final, partial):
        if candidate.exists():
            try:
                ckpt = load_checkpoint(candidate, kind=task.kind)
            except CheckpointError as err:
                raise CheckpointError(f"{err}; this run would resume from it: move it away to start afresh") from None
            if candidate == final and not same_identity(ckpt, identity):  # `out` deleted after a change of settings
                if dist.is_main:
                    print(f"{final}: the final state of an earlier training with other settings; training afresh")
                continue
            check_identity(ckpt, identity)
            task.restore(ckpt)
            start, source = int(ckpt.training.get("step", 0)), candidate
            history = ckpt.training.get("history", history)
            break
    if source is not None and start >= config.iterations:  # finished: `out`, or its state kept when a kill
        if dist.is_main:                                         # came after training (see the module docstring)
            print(f"{out}: already trained for {start} iterations with these settings; "
                  + ("nothing to do" if source == out else f"written again from {source}"))
            if source != out:
                link_or_copy(source, out)
            if curves is not None:
                write_curves(curves, history)
        dist.barrier()
        return LoopResult(out, start, {})
    if source is not None and dist.is_main:
        print(f"resuming from {source} at step {start}")
    if dist.is_main:
        for line in recover_leftovers(partial) + recover_leftovers(final):  # a copy of the final state killed
            print(f"recovered: {line}", file=sys.stderr)
        warn_if_short(out, partial, state_bytes(task.checkpoint({}), task))

    def save(path: Path, step: int) -> None:
        """Writes the state, or stops every process with a DiskFullError (before writing, when the free space
        is short) that names the last good state, which stays intact."""
        problem = None
        if dist.is_main:
            ckpt = task.checkpoint({
                "step": step, "iterations": config.iterations, "identity": json.dumps(identity, sort_keys=True),
                "history": history, "rng": {"scheme": "derive_seed(seed, step, rank)", "seed": config.seed},
                **(labels or {})})
            kept = (f"the last good state {last_good} (step {last_step}) is intact; the {step - last_step} steps since "
                    "are not saved" if last_good else "no state had been saved yet, so the next run starts afresh")
            try:
                require_space(path, state_bytes(ckpt, task), kept)
                save_checkpoint(path, ckpt, kept)
            except DiskFullError as err:
                problem = err
        if not dist.all_true(problem is None):
            progress.close()  # the error on a line of its own
            raise problem if problem is not None else SystemExit(2)  # the main process says why
        dist.barrier()

    last_good, last_step = source, start
    metrics: dict[str, float] = {}
    progress = tqdm(total=config.iterations, initial=start, desc=f"train {task.kind}", disable=not dist.is_main,
                    dynamic_ncols=True)
    with StopSignal() as stop:
        step = start
        waited = computed = 0.0  # since the last log: seconds waiting for batches, seconds in the steps
        steps_timed = 0
        for batch, wait in timed(task.batches(start)):
            began = time.perf_counter()
            # Dropout and any other global-RNG use: a pure function of (seed, step, rank), so resumable.
            torch.manual_seed(derive_seed(config.seed, step, dist.rank))
            losses = task.train_step(batch, step)
            finite_or_raise(losses, step, dist, last_good)  # reads the losses: the device has finished the step
            waited, computed, steps_timed = waited + wait, computed + time.perf_counter() - began, steps_timed + 1
            if floor:
                time.sleep(max(0.0, floor - (time.perf_counter() - began)))
            step += 1
            metrics = {f"train/{k}": float(v) for k, v in losses.items()}
            progress.update(1)
            if step % config.log_every == 0 or step == config.iterations:
                history["train"].append({"step": step, **{k.split("/", 1)[1]: v for k, v in metrics.items()}})
                # A starved GPU: the share of the time the step waited for its batch (the loader's workers). Wall
                # clock, so MLflow and the progress bar only: the curves (and the state) stay reproducible.
                metrics.update({"train/data_wait_s": waited / steps_timed,
                                "train/data_wait_fraction": waited / max(waited + computed, 1e-12)})
                waited = computed = 0.0
                steps_timed = 0
                progress.set_postfix({k.split("/")[-1]: f"{v:.4g}" for k, v in metrics.items()}, refresh=False)
                tracker.log_metrics(metrics, step)
            if step % config.eval_every == 0 or step == config.iterations:
                evaluation = task.evaluate()
                metrics.update(evaluation)
                tracker.log_metrics(evaluation, step)
                history["eval"].append({"step": step, **{k.split("/", 1)[1]: v for k, v in evaluation.items()}})
                if dist.is_main:
                    progress.write(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in evaluation.items()))
            if step == config.iterations:
                break
            stop_now = not dist.all_true(stop.received is None)
            if stop_now or step % config.checkpoint_every == 0:
                save(partial, step)
                last_good, last_step = partial, step
            if stop_now:
                progress.close()
                raise TrainingStopped(f"stopped by signal at step {step}: state saved to {partial}; "
                                      "re-run the same command to resume")
    progress.close()
    if step < config.iterations:  # the batches ran out early: never report an unfinished training as done
        raise RuntimeError(f"training stopped at step {step} of {config.iterations}: the data loader ended early")
    if curves is not None and dist.is_main:
        write_curves(curves, history)
    save(out, step)
    if dist.is_main:  # the final state, kept for a retry of this stage (docs/cluster.md, "Training resumes")
        keep_final_state(out, final, partial)
    return LoopResult(out, step, metrics)


def keep_final_state(out: Path, final: Path, partial: Path) -> None:
    """`final`, a hard link to the finished `out` (a copy where the file system has none), for a retry of the
    stage after a kill that comes once it has ended. The training is complete in `out` whatever happens here: a
    copy that fails (a full disk) is a warning, not a failed stage (which Snakemake would answer by deleting `out`
    and training again), and the resume state stays for such a retry."""
    try:
        link_or_copy(out, final)
    except OSError as err:
        retry = f"resumes from {partial}" if partial.exists() else "trains again"
        print(f"warning: {out} is complete, but its final state could not be kept as {final} ({err}); a retry of "
              f"this stage after a kill {retry}", file=sys.stderr)
        return
    partial.unlink(missing_ok=True)

"""The training loop both stages share: resume, periodic atomic checkpoints, SIGTERM handling,
non-finite-loss stop, progress and metric logging.

Files: the finished model goes to `out` only when training completes (so a pipeline never mistakes a
partial run for a result); the resumable state lives in `<out>.resume.pt` beside it, outside any
declared output, and is removed by the stage as its very last act (`discard_resume_state`), after
`out` and the tracking are written. Until then a kill, say a time limit in the job's last seconds,
makes Snakemake delete `out` as a failed job's output, and the retry resumes from that state instead
of starting over. Re-running the same command after kill -9, SIGTERM (Slurm's time limit or
preemption) or a crash continues from the last checkpoint.
"""

from __future__ import annotations

import math
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from tqdm import tqdm

from put.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from put.config import TrainConfig
from put.train.distributed import Distributed
from put.tracking import NullTracker
from put.train.schedule import derive_seed

STOPPED_EXIT_CODE = 143  # 128 + SIGTERM: the scheduler sees an unfinished job, the state is saved


class TrainingDiverged(RuntimeError):
    pass


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


class StopSignal:
    """Turns SIGTERM / SIGUSR1 (Slurm's warnings before a time limit or preemption) into a flag the loop
    polls after each step, so the state can be saved before the process exits."""

    SIGNALS = (signal.SIGTERM, signal.SIGUSR1)

    def __init__(self):
        self.received: int | None = None
        self._previous = {}

    def __enter__(self) -> "StopSignal":
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


def run_training(task: Task, config: TrainConfig, out: Path, dist: Distributed, tracker: NullTracker = NullTracker(),
                 labels: dict[str, str] | None = None) -> LoopResult:
    out = Path(out)
    partial = resume_path(out)
    start, source = 0, None
    for candidate in (out, partial):  # both exist only if a run was killed after writing `out`
        if candidate.exists():
            try:
                ckpt = load_checkpoint(candidate, kind=task.kind)
            except CheckpointError as err:
                raise CheckpointError(f"{err}; this run would resume from it: move it away to start afresh") from None
            task.restore(ckpt)
            start, source = int(ckpt.training.get("step", 0)), candidate
            break
    if start >= config.iterations:
        if dist.is_main:
            print(f"{out}: already trained for {start} iterations (asked: {config.iterations}); nothing to do")
        return LoopResult(out, start, {})
    if source is not None and dist.is_main:
        print(f"resuming from {source} at step {start}")

    def save(path: Path, step: int) -> None:
        if dist.is_main:
            save_checkpoint(path, task.checkpoint({"step": step, "iterations": config.iterations,
                                                   "rng": {"scheme": "derive_seed(seed, step, rank)",
                                                           "seed": config.seed}, **(labels or {})}))
        dist.barrier()

    last_good = source
    metrics: dict[str, float] = {}
    progress = tqdm(total=config.iterations, initial=start, desc=f"train {task.kind}", disable=not dist.is_main,
                    dynamic_ncols=True)
    with StopSignal() as stop:
        step = start
        for batch in task.batches(start):
            # Dropout and any other global-RNG use: a pure function of (seed, step, rank), so resumable.
            torch.manual_seed(derive_seed(config.seed, step, dist.rank))
            losses = task.train_step(batch, step)
            finite_or_raise(losses, step, dist, last_good)
            step += 1
            metrics = {f"train/{k}": float(v) for k, v in losses.items()}
            progress.update(1)
            if step % config.log_every == 0 or step == config.iterations:
                progress.set_postfix({k.split("/")[-1]: f"{v:.4g}" for k, v in metrics.items()}, refresh=False)
                tracker.log_metrics(metrics, step)
            if step % config.eval_every == 0 or step == config.iterations:
                evaluation = task.evaluate()
                metrics.update(evaluation)
                tracker.log_metrics(evaluation, step)
                if dist.is_main:
                    progress.write(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in evaluation.items()))
            if step == config.iterations:
                break
            stop_now = not dist.all_true(stop.received is None)
            if stop_now or step % config.checkpoint_every == 0:
                save(partial, step)
                last_good = partial
            if stop_now:
                progress.close()
                raise TrainingStopped(f"stopped by signal at step {step}: state saved to {partial}; "
                                      "re-run the same command to resume")
    progress.close()
    save(out, step)
    return LoopResult(out, step, metrics)


def discard_resume_state(out: Path, dist: Distributed) -> None:
    """The stage's last act once `out` is written and everything is logged (see the module docstring)."""
    if dist.is_main:
        resume_path(Path(out)).unlink(missing_ok=True)


def check_resumable(ckpt: Checkpoint, expected_model: dict) -> None:
    """A checkpoint made with another model config cannot be resumed into this one."""
    if ckpt.config.get("model") != expected_model:
        raise CheckpointError(f"{ckpt.path}: was written with a different model config than the current one; "
                              "restore the parameters it was made with, or move the file away to start afresh")

"""The tracker protocol every stage calls, and the tracker that records nothing (PUT_TRACKING=0, tests)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np


class NullTracker:
    """What a stage may ask of its tracker; this one records nothing (the MLflow run: put/tracking/runs.py)."""

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

    def log_evaluation(self, metrics: dict[str, Any], manifest: Path) -> None:
        pass

    def finish(self, status: str = "FINISHED") -> None:
        pass

    def called_at(self, time_ms: int) -> contextlib.AbstractContextManager:
        """The calls made in this block (by this thread) log their points at `time_ms`, the time the stage made
        the call: a call spooled after part of it went through, and replayed, sends the same points again, which
        the store keeps once (put/tracking/spool.py)."""
        return contextlib.nullcontext()


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

"""The tracker protocol every stage calls, and the tracker that records nothing (PUT_TRACKING=0, tests)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Protocol

import numpy as np


class Tracker(Protocol):
    """What a stage may ask of its tracker: NullTracker records nothing, MlflowTracker (put/tracking/runs.py) logs
    a run, ResilientTracker (put/tracking/resilient.py) spools while the server is down. The bodies do nothing:
    NullTracker subclasses the protocol for them (PEP 544's default implementations)."""

    def log_metrics(self, metrics: dict[str, float], step: int, **links: str) -> None:
        return None

    def log_params(self, params: dict[str, Any]) -> None:
        return None

    def log_image(self, image: np.ndarray, name: str) -> None:
        return None

    def log_artifact(self, path: Path) -> None:
        return None

    def log_dataset(self, path: Path, name: str, context: str) -> dict[str, str] | None:
        return None

    def log_model(self, checkpoint: Path, kind: str, metrics: dict[str, float], params: dict[str, Any],
                  step: int = 0) -> str | None:
        return None

    def use_model(self, kind: str) -> None:
        return None

    def log_evaluation(self, metrics: dict[str, Any], manifest: Path) -> None:
        return None

    def finish(self, status: str = "FINISHED") -> None:
        return None

    def called_at(self, time_ms: int) -> contextlib.AbstractContextManager:
        """The calls made in this block (by this thread) log their points at `time_ms`, the time the stage made
        the call: a call spooled after part of it went through, and replayed, sends the same points again, which
        the store keeps once (put/tracking/spool.py)."""
        return contextlib.nullcontext()


class NullTracker(Tracker):
    """The tracker that records nothing."""


@contextlib.contextmanager
def tracked(tracker: Tracker):
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

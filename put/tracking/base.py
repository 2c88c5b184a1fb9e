"""The tracker protocol every stage calls, and the tracker that records nothing (PUT_TRACKING=0, tests)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Protocol

import numpy as np


class Tracker(Protocol):
    """What a stage may ask of its tracker: NullTracker records nothing, MlflowTracker (put/tracking/runs.py) logs
    a run, ResilientTracker (put/tracking/resilient.py) spools while the server is down."""

    def log_metrics(self, metrics: dict[str, float], step: int, **links: str) -> None: ...

    def log_params(self, params: dict[str, Any]) -> None: ...

    def log_image(self, image: np.ndarray, name: str) -> None: ...

    def log_artifact(self, path: Path) -> None: ...

    def log_dataset(self, path: Path, name: str, context: str) -> dict[str, str] | None: ...

    def log_model(self, checkpoint: Path, kind: str, metrics: dict[str, float], params: dict[str, Any],
                  step: int = 0) -> str | None: ...

    def use_model(self, kind: str) -> None: ...

    def log_evaluation(self, metrics: dict[str, Any], manifest: Path) -> None: ...

    def finish(self, status: str = "FINISHED") -> None: ...

    def called_at(self, time_ms: int) -> contextlib.AbstractContextManager:
        """The calls made in this block (by this thread) log their points at `time_ms`, the time the stage made
        the call: a call spooled after part of it went through, and replayed, sends the same points again, which
        the store keeps once (put/tracking/spool.py)."""
        ...


class NullTracker:
    """The tracker that records nothing."""

    def log_metrics(self, metrics: dict[str, float], step: int, **links: str) -> None:
        pass

    def log_params(self, params: dict[str, Any]) -> None:
        pass

    def log_image(self, image: np.ndarray, name: str) -> None:
        pass

    def log_artifact(self, path: Path) -> None:
        pass

    def log_dataset(self, path: Path, name: str, context: str) -> dict[str, str] | None:
        pass

    def log_model(self, checkpoint: Path, kind: str, metrics: dict[str, float], params: dict[str, Any],
                  step: int = 0) -> str | None:
        pass

    def use_model(self, kind: str) -> None:
        pass

    def log_evaluation(self, metrics: dict[str, Any], manifest: Path) -> None:
        pass

    def finish(self, status: str = "FINISHED") -> None:
        pass

    def called_at(self, time_ms: int) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


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

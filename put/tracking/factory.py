"""The tracker of a stage's run: MLflow's, resilient to the server's outages, or none (PUT_TRACKING=0)."""

from __future__ import annotations

import time
from typing import Any

from put.tracking.base import NullTracker, Tracker
from put.tracking.source import tracking_enabled, tracking_uri


def stage_tracker(preset: str, variant: str | None, stage: str, dag_id: str, tags: dict[str, str] | None = None,
                  **options: Any) -> Tracker:
    """MlflowTracker unless PUT_TRACKING=0 (options: labels, system_metrics, seed, from_outputs), whose calls are
    spooled once the server stops answering (put/tracking/resilient.py)."""
    if not tracking_enabled():
        return NullTracker()
    from put.tracking.resilient import ResilientTracker
    from put.tracking.runs import MlflowTracker, stage_code

    # sampled through ResilientTracker, so that its figures are spooled too; a run logged from outputs ran nothing
    system = options.pop("system_metrics", False) and not options.get("from_outputs", False)
    # the run's identity, the attempt's start and its store, fixed now: a replay after a code change logs into
    # this run and store, whatever the process's environment says later
    init = {"preset": preset, "variant": variant, "stage": stage, "dag_id": dag_id, "tags": tags,
            "code": stage_code(stage), "attempt": int(time.time() * 1000), "uri": tracking_uri(), **options}
    return ResilientTracker(MlflowTracker.open, init, system)

"""The two private MLflow names the tracking uses, one wrapper each, so that a release that moves them breaks
here and in tests/test_tracking_private.py, not in a stage."""

from __future__ import annotations

from typing import Any


def module_tracking_uri() -> str | None:
    """The default store MLflow's module holds for the process (None until set), which may differ from
    MLFLOW_TRACKING_URI: no public call returns it unresolved."""
    from mlflow.tracking._tracking_service import utils

    return utils._tracking_uri


def dataset_entity(dataset: Any) -> Any:
    """A dataset (mlflow.data) as the entity that MlflowClient.log_inputs takes: no public call converts it."""
    return dataset._to_mlflow_entity()

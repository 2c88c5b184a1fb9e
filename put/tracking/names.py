"""Names in MLflow: the experiment, the tags that identify and link a stage's runs, flattened parameters, metric
names that end with what they measure, the parent run's name, the saved runs-table view of
the variants and the link that opens it."""

from __future__ import annotations

import base64
import json
import time
import zlib
from collections.abc import Sequence
from typing import Any

VARIANTS_VIEW = "put-variants"  # the saved runs-table view of the evaluations (docs/mlflow.md)
VIEW_METRICS_TAG = "put.view_metrics"  # the experiment's evaluation columns so far, which the saved view shows
CODE_TAG = "put.code"  # a stage run's code version (put/tracking/source.py): part of the run's identity
SUPERSEDED = "put.superseded_by"  # on a run whose stage was re-run with other code: the newer run's id
LOGGED_FROM = "put.logged_from"  # "outputs": the stage did not run; `put track` logged its run from its outputs
ATTEMPT_TAG = "put.attempt"  # when the latest attempt on a run started (ms): an earlier one leaves its status alone
LAST_STATUS = "put.last_status"  # a run's status as its latest attempt left it
DUPLICATE_OF = "put.duplicate_of"  # on a run that lost a creation race: the run kept instead (docs/mlflow.md)
RUN_NAME = "attributes.`Run Name`"  # the runs table's column of run names
UI_HOST, UI_PORT = "127.0.0.1", 5000  # where `put ui` serves MLflow's UI by default


def tag_filter(tags: dict[str, str]) -> str:
    """MLflow's filter for runs or logged models that carry all of `tags`."""
    return " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())


def experiment_name(preset: str) -> str:
    return f"put-{preset}"


def runs_link(server: str, experiment_id: str) -> str:
    """The page a user is sent to: the experiment's training runs (MLflow's model-training view, not its GenAI
    overview) in the saved view of the variants side by side."""
    return (f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
            f"&viewStateShareKey={VARIANTS_VIEW}")


def flatten(data: dict[str, Any], prefix: str = "", sep: str = ".") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(flatten(value, name, sep))
        else:
            flat[name] = value
    return flat


def metric_names(nested: dict[str, Any]) -> dict[str, float]:
    """{mode: {group: {metric: value}}} -> {"mode/group/metric": value}: the metrics files' nesting, whose last
    key says what is measured."""
    return {k: float(v) for k, v in flatten(nested, sep="/").items() if isinstance(v, (int, float))}


def parent_name(preset: str, dag_id: str, labels: Sequence[str] | None) -> str:
    """`demo · 6 variants · 3f2a91c` (`+ 1 official` when released weights are evaluated too, `+ 2 external`
    when other methods are)."""
    from put.config import VARIANTS
    from put.config.external import EXTERNAL_PREFIX

    labels = list(labels) if labels is not None else list(VARIANTS)
    variants = [label for label in labels if label in VARIANTS]
    external = sum(str(label).startswith(EXTERNAL_PREFIX) for label in labels)
    official = len(labels) - len(variants) - external
    described = (f"{len(variants)} variants" + (f" + {official} official" if official else "")
                 + (f" + {external} external" if external else ""))
    return f"{preset} · {described} · {dag_id[:7]}"


def variants_view(metric_keys: Sequence[str], sort_key: str) -> str:
    """The value of MLflow's saved-view experiment tag (`mlflow.sharedViewState.<id>`, what the runs page's
    "Views -> Save as new view" writes): the evaluation runs with their PSNR and SSIM columns, best first."""
    columns = [f"metrics.`{key}`" for key in metric_keys]
    widths = dict.fromkeys(columns, 150) | {RUN_NAME: 230}  # the run names whole (`evaluate no_ref`)
    state = {"searchFilter": f"tags.`put.stage` = 'evaluate' and tags.`{SUPERSEDED}` IS NULL "
                             f"and tags.`{DUPLICATE_OF}` IS NULL",
             "orderByKey": f"metrics.`{sort_key}`",
             "orderByAsc": False, "startTime": "ALL", "lifecycleFilter": "Active", "datasetsFilter": [],
             "modelVersionFilter": "All Runs", "selectedColumns": ["attributes.`Models`", *columns],
             "columnOrder": [RUN_NAME, *columns], "columnWidths": widths,
             "runsHiddenMode": "SHOW_ALL",
             "viewMaximized": False, "runListHidden": False, "isAccordionReordered": False,
             "useGroupedValuesInCharts": True, "hideEmptyCharts": True, "groupBy": None, "groupsExpanded": {},
             "globalLineChartConfig": {"xAxisKey": "step", "lineSmoothness": 0, "selectedXAxisMetricKey": ""}}
    packed = "deflate;" + base64.b64encode(zlib.compress(json.dumps(state).encode())).decode()
    now = int(time.time() * 1000)
    return json.dumps({"name": "Variants side by side: PSNR and SSIM", "createdAt": now, "updatedAt": now,
                       "state": packed})

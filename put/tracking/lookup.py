"""Look-ups in the store that open no run: a stage instance's finished run (`put track`), the link to a preset's
runs (`put ui`)."""

from __future__ import annotations

from put.tracking.names import CODE_TAG, DUPLICATE_OF, UI_HOST, UI_PORT, experiment_name, runs_link, tag_filter
from put.tracking.runs import lineage_tags, locked_client, stage_code
from put.tracking.source import tracking_uri


def finished_run(preset: str, variant: str | None, stage: str, dag_id: str, seed: int = 0) -> str | None:
    """The id of this stage instance's finished run at the current code version, or None (`put track` logs the
    runs that are missing)."""
    code = stage_code(stage)
    query = f"{tag_filter(lineage_tags(preset, variant, stage, dag_id, seed) | {CODE_TAG: code})} and " \
            f"attributes.status = 'FINISHED' and tags.`{DUPLICATE_OF}` IS NULL"  # a duplicate is no instance's run
    with locked_client() as client:
        experiment = client.get_experiment_by_name(experiment_name(preset))
        if experiment is None:
            return None
        found = client.search_runs([experiment.experiment_id], query, max_results=1)
    return found[0].info.run_id if found else None


def experiment_link(preset: str, server: str | None = None) -> str | None:
    """The link that opens the preset's training runs in the saved view of the variants (names.runs_link) on
    `server`: by default the tracking server when MLFLOW_TRACKING_URI names one, else where `put ui` serves the
    local store. None while the experiment does not exist."""
    uri = tracking_uri()
    with locked_client(uri) as client:
        experiment = client.get_experiment_by_name(experiment_name(preset))
    if experiment is None:
        return None
    if server is None:
        server = uri if uri.startswith(("http://", "https://")) else f"http://{UI_HOST}:{UI_PORT}"
    return runs_link(server, experiment.experiment_id)

"""The private MLflow names put/tracking/mlflow_private.py wraps, called directly: a release of MLflow that moves
or renames one fails here first."""

import mlflow
import pandas as pd


def test_mlflow_still_holds_its_module_tracking_uri_where_the_wrapper_reads_it(tmp_path, monkeypatch):
    from mlflow.tracking._tracking_service import utils

    from put.tracking.mlflow_private import module_tracking_uri

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    before = utils._tracking_uri
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    try:
        mlflow.set_tracking_uri(uri)
        assert utils._tracking_uri == uri and module_tracking_uri() == uri
        mlflow.set_tracking_uri(None)
        assert utils._tracking_uri is None and module_tracking_uri() is None
    finally:
        mlflow.set_tracking_uri(before)


def test_a_dataset_still_converts_to_the_entity_log_inputs_takes(tmp_path):
    from mlflow.entities import Dataset, DatasetInput

    from put.tracking.mlflow_private import dataset_entity

    frame = pd.DataFrame({"image": ["a.png"], "mask": ["m.png"]})
    dataset = mlflow.data.from_pandas(frame, source=str(tmp_path / "split.csv"), name="split", digest="0123abcd")
    entity = dataset._to_mlflow_entity()
    assert isinstance(entity, Dataset) and (entity.name, entity.digest) == ("split", "0123abcd")
    wrapped = dataset_entity(dataset)
    assert isinstance(wrapped, Dataset) and (wrapped.name, wrapped.digest) == ("split", "0123abcd")
    assert DatasetInput(wrapped).dataset.name == "split"


def test_no_other_module_of_the_package_uses_the_private_names():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "put"
    users = {p.relative_to(root).as_posix() for p in root.rglob("*.py")
             if "._tracking_uri" in p.read_text() or "._to_mlflow_entity" in p.read_text()}
    assert users == {"tracking/mlflow_private.py"}

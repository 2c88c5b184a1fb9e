from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from put.config import ModelConfig, PVQVAEConfig, TransformerConfig

# Under pytest-xdist (`make test`), the workers share the cores: torch's threads per worker, so that two workers on
# two cores do not run four threads.
if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))

TINY = ModelConfig(
    image_size=32,
    pvqvae=PVQVAEConfig(embed_dim=16, width=16, base_channels=4, num_res_blocks=1, codebook_size=16),
    transformer=TransformerConfig(n_layer=2, n_head=2, n_embd=32),
)


@pytest.fixture(autouse=True, scope="session")
def no_tracking_by_default():
    """Stages log to MLflow unless PUT_TRACKING=0; tests of tracking itself turn it back on (monkeypatch). For the
    whole session: a module's fixture (a training it shares) is set up before any test's own fixtures, and would
    otherwise log into ./mlflow.db of the checkout."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PUT_TRACKING", "0")
        yield


@pytest.fixture(scope="session")
def mlflow_db_template(tmp_path_factory) -> Path:
    """An MLflow SQLite database created and migrated once per test run (MLflow's migration of a new database takes
    seconds); tests get copies (`mlflow_db`)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    folder = tmp_path_factory.mktemp("mlflow-template")
    path = folder / "mlflow.db"
    SqlAlchemyStore(f"sqlite:///{path}", str(folder / "mlruns"))
    SqlAlchemyStore._engine_map.pop(f"sqlite:///{path}").dispose()  # closed: the file is complete on disk
    return path


@pytest.fixture
def mlflow_db(mlflow_db_template, tmp_path, monkeypatch) -> str:
    """A fresh MLflow database of this test's own (a copy of the migrated template) at tmp_path/mlflow.db, set as
    MLFLOW_TRACKING_URI; returns the URI."""
    path = tmp_path / "mlflow.db"
    shutil.copyfile(mlflow_db_template, path)
    uri = f"sqlite:///{path}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


@pytest.fixture
def tiny_config() -> ModelConfig:
    return TINY


def random_batch(batch: int = 2, size: int = 32, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Images in [-1, 1] and a keep-mask with a rectangular hole crossing patch borders."""
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(batch, 3, size, size, generator=g) * 2 - 1
    keep = torch.ones(batch, 1, size, size)
    keep[:, :, size // 4: size // 2 + 3, size // 8: size // 2 + 1] = 0
    return images, keep


@pytest.fixture
def tiny_checkpoints(tmp_path):
    """A random-weight PUT model saved as a P-VQVAE and a transformer checkpoint."""
    from put.models.checkpoint import save_pvqvae, save_transformer
    from put.models.put_model import PUTModel

    torch.manual_seed(0)
    model = PUTModel(TINY).eval()
    run = tmp_path / "run"
    pvqvae_path, transformer_path = run / "pvqvae.pt", run / "transformer.pt"
    save_pvqvae(pvqvae_path, model.pvqvae, TINY, preset="tiny", variant="put")
    save_transformer(transformer_path, model, pvqvae_path, preset="tiny", variant="put")
    return model, pvqvae_path, transformer_path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A folder with the tiny params file, the demo split at 32 px and its prepared images (built once per
    module): the training tests' (tests/test_training.py, test_tracking_spool.py, gpu/test_cuda.py).
    tests/test_serve.py has a `workdir` of its own."""
    import yaml

    from put.config.params import load_params
    from put.stages.prepare import run_prepare
    from put.stages.split import run_split
    from tests.tiny_training import TINY_PARAMS

    root = tmp_path_factory.mktemp("train")
    params = dict(TINY_PARAMS)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    run_split(load_params(root / "params.yaml"), root / "splits")
    run_prepare(load_params(root / "params.yaml"), root / "splits", root / "prepared")
    return root


@pytest.fixture
def eval_masks(tmp_path) -> Path:
    """A `put masks` folder at 32 px for two test images: masks, manifest and ground truth."""
    from PIL import Image

    from put.masks.evaluation import write_eval_masks
    from tests.image_files import write_inputs

    images = []
    for i in range(2):
        image, _ = write_inputs(tmp_path / "test" / str(i))
        images.append(str(image.rename(image.with_name(f"img{i}.png"))))
    masks = tmp_path / "masks"
    write_eval_masks(images, masks, (32, 32), seed=0, progress=False)
    for i, image in enumerate(images):
        (masks / "gt").mkdir(exist_ok=True)
        Image.open(image).save(masks / "gt" / f"img{i}.png")
    return masks


@pytest.fixture
def tracking(mlflow_db, tmp_path, monkeypatch):
    """An MLflow client of this test's own SQLite store, the working directory tmp_path (tests/test_tracking.py,
    test_tracking_races.py). tests/slurm/test_cluster.py has a `tracking` of its own."""
    monkeypatch.chdir(tmp_path)
    from mlflow.tracking import MlflowClient

    return MlflowClient(mlflow_db)


@pytest.fixture
def store(mlflow_db, tmp_path, monkeypatch):
    """Tracking on, into this test's SQLite store; spools under tmp_path/spool (tests/test_tracking_spool.py,
    test_tracking_replay.py)."""
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PUT_TRACKING", "1")
    monkeypatch.setenv("PUT_MLFLOW_SPOOL", str(tmp_path / "spool"))
    return MlflowClient(mlflow_db)

"""The DAG's two front ends describe the same outputs; params.yaml is validated; `dvc repro` of the
demo preset behaves as users rely on (slow: runs the whole demo pipeline)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from put.config import VARIANTS
from put.config.params import ParamsError, load_params
from put.paths import metrics_file, pvqvae_checkpoint, report_dir, transformer_checkpoint
from tests.helpers import ROOT, working_copy

BIN = Path(sys.executable).parent


def dvc_outputs(repo: Path) -> set[str]:
    from dvc.repo import Repo

    with Repo(str(repo)) as dvc:
        return {os.path.relpath(out.fs_path, repo) for stage in dvc.index.stages for out in stage.outs}


def snakemake_outputs(repo: Path) -> set[str]:
    result = subprocess.run([str(BIN / "snakemake"), "--summary", "--cores", "1", "all"], cwd=repo,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line.split("\t")[0] for line in result.stdout.splitlines()[1:] if line.strip()]
    return {os.path.normpath(line) for line in lines}


def test_dvc_and_snakemake_define_the_same_outputs():
    dvc, snake = dvc_outputs(ROOT), snakemake_outputs(ROOT)
    assert dvc == snake, f"only in dvc.yaml: {sorted(dvc - snake)}; only in the Snakefile: {sorted(snake - dvc)}"
    # And both follow put/paths.py: 4 P-VQVAEs, 6 transformers, a metrics file per variant, the report.
    expected = {str(pvqvae_checkpoint("demo", v)) for v in VARIANTS} | {str(report_dir("demo"))}
    expected |= {str(transformer_checkpoint("demo", v)) for v in VARIANTS} | {str(metrics_file("demo", v))
                                                                            for v in VARIANTS}
    assert expected <= dvc
    assert len({str(pvqvae_checkpoint("demo", v)) for v in VARIANTS}) == 4


@pytest.mark.parametrize("text,message", [
    ("preset: demo\noverrides: {pvqvae_train: {iteratons: 3}}\n", "overrides.pvqvae_train.iteratons: Extra inputs"),
    ("preset: demo\nvariants: {qua0: {transformer: {random_quant_prob: 2}}}\n",
     "variants.qua0.transformer.random_quant_prob: Input should be less than or equal to 1"),
    ("preset: demo\noverrides: {pvqvae_train: {batch_size: many}}\n", "overrides.pvqvae_train.batch_size"),
    ("prest: demo\n", "prest: Extra inputs are not permitted"),
    ("preset: ffhh\n", "unknown preset 'ffhh'"),
    ("variants: {qua1: {}}\n", "unknown variant(s) ['qua1']"),
])
def test_params_typos_are_errors_naming_the_key(tmp_path, text, message):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_the_repository_params_file_is_valid():
    params = load_params(ROOT / "params.yaml")
    assert params.preset == "demo"
    assert set(yaml.safe_load((ROOT / "params.yaml").read_text())["variants"]) == set(VARIANTS)


def test_cli_reports_a_params_typo_without_a_traceback(tmp_path):
    (tmp_path / "params.yaml").write_text("preset: demo\noverrides: {sample: {top_kk: 5}}\n")
    result = subprocess.run([sys.executable, "-m", "put", "split", "--out", str(tmp_path / "s")], cwd=tmp_path,
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 2
    assert "overrides.sample.top_kk: Extra inputs are not permitted" in result.stderr
    assert "Traceback" not in result.stderr


def dvc(repo: Path, *args: str, timeout: int = 1500) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PUT_TRACKING": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)  # the default: sqlite:///mlflow.db in the repository
    return subprocess.run([str(BIN / "dvc"), *args], cwd=repo, capture_output=True, text=True, env=env,
                          timeout=timeout)


def changed_stages(repo: Path) -> set[str]:
    status = json.loads(dvc(repo, "status", "--json").stdout or "{}")
    return {name.split(":")[-1] for name in status}


def mlflow_run_count(repo: Path) -> int:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{repo / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("put-demo")
    return len(client.search_runs([experiment.experiment_id], max_results=1000))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_dvc_repro_of_the_demo_preset(tmp_path):
    """Full DAG on 2 CPU cores within 15 minutes; a second repro runs nothing; one variant's parameter
    re-runs that variant only; a failing stage keeps earlier outputs and runs, and the rerun continues."""
    repo = working_copy(tmp_path / "repo")

    start = time.monotonic()
    first = dvc(repo, "repro")
    elapsed = time.monotonic() - start
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert elapsed <= 15 * 60, f"dvc repro of the demo took {elapsed:.0f} s"
    for variant in VARIANTS:
        assert (repo / metrics_file("demo", variant)).is_file()
    for name in ("table1.tex", "table3.tex", "speed.tex", "metrics.csv", "curves_psnr_ssim_mae.png", "samples_put.png"):
        assert (repo / report_dir("demo") / name).is_file(), name
    # The tables carry the measured numbers of the metrics files, and the document compiled.
    table1 = (repo / report_dir("demo") / "table1.tex").read_text()
    table3 = (repo / report_dir("demo") / "table3.tex").read_text()
    for variant in VARIANTS:
        metrics = json.loads((repo / metrics_file("demo", variant)).read_text())  # {mode: {group: {metric: value}}}
        for mode, groups in metrics.items():
            for cell in groups.values():
                if variant == "put" and mode != "bins":
                    assert f"{cell['psnr']:.3f}" in table1 and f"{cell['mae']:.4f}" in table1
                if mode == "k50":
                    assert f"{cell['ssim']:.3f}" in table3
    if shutil.which("pdflatex"):
        assert (repo / report_dir("demo") / "report.pdf").read_bytes()[:4] == b"%PDF"
    runs_after_first = mlflow_run_count(repo)
    assert runs_after_first == 1 + len(VARIANTS)  # a parent per DAG run, a child per variant

    second = dvc(repo, "repro")
    assert second.returncode == 0 and "didn't change, skipping" in second.stdout
    assert "Running stage" not in second.stdout

    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["variants"]["qua0"] = {"transformer": {"random_quant_prob": 0.1}}
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    assert changed_stages(repo) == {"train_transformer@qua0"}  # downstream stages follow from its output

    # A failing stage: an SSIM window larger than the images makes every evaluation fail.
    params["variants"]["qua0"] = {}
    params["overrides"]["evaluate"] = {"ssim_window": 99}
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    checkpoints = {p: p.stat().st_mtime_ns for p in (repo / "runs").rglob("*.pt")}
    failed = dvc(repo, "repro")
    assert failed.returncode != 0
    assert "ssim" in (failed.stdout + failed.stderr).lower()
    assert {p: p.stat().st_mtime_ns for p in (repo / "runs").rglob("*.pt")} == checkpoints
    assert mlflow_run_count(repo) >= runs_after_first  # nothing lost; the failed stage's run is marked FAILED

    params["overrides"]["evaluate"] = {}
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    rerun = dvc(repo, "repro")
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    assert "Running stage 'train_" not in rerun.stdout and "Running stage 'sample" not in rerun.stdout
    assert {p: p.stat().st_mtime_ns for p in (repo / "runs").rglob("*.pt")} == checkpoints

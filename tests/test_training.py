"""Training of both stages: resume equality, signals, kill -9, non-finite losses, DDP, VGG weights."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from put.config.params import load_params
from put.errors import PutError
from put.io.pretrained import MissingWeightsError
from put.models.checkpoint import CheckpointError, load_checkpoint
from put.stages.train import train_pvqvae, train_transformer
from put.train.launch import TORCHRUN
from put.train.loop import (
    MIN_STEP_ENV,
    STOPPED_EXIT_CODE,
    TrainingDiverged,
    TrainingStopped,
    final_state_path,
    resume_path,
)
from tests.tiny_training import params, stop_at


@pytest.fixture(scope="module")
def trained_pvqvae(workdir) -> Path:
    """The tiny `put` P-VQVAE trained straight through, once per module: tests that need one read or copy it."""
    out = workdir / "reference_pvqvae.pt"
    train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu")
    return out


def states_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def final_state(out: Path) -> Path:
    from put.stages.train import training_code

    return final_state_path(out, training_code("train-pvqvae" if "pvqvae" in out.name else "train-transformer"))


def test_a_kill_after_the_stage_ended_leaves_the_final_state_for_its_retry(workdir, tmp_path, capsys, trained_pvqvae):
    """A time limit in a job's last seconds, after the training command exited 0 (while Snakemake's job step or DVC
    records it): the job counts as failed and Snakemake deletes its output, so the final state must still be there
    for the retry, which writes the same checkpoint again instead of training anew."""
    out, straight = tmp_path / "pvqvae.pt", trained_pvqvae
    train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu")
    assert out.read_bytes() == straight.read_bytes()  # two runs, one checkpoint: DVC sees no change in a re-run
    assert final_state(out).samefile(out) and not resume_path(out).exists()  # a hard link: no second copy on disk
    out.unlink()  # what Snakemake does to a failed job's output
    capsys.readouterr()
    train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu")
    assert f"already trained for 8 iterations with these settings; written again from {final_state(out)}" \
        in capsys.readouterr().out
    assert out.read_bytes() == straight.read_bytes() and final_state(out).samefile(out)


def test_a_finished_state_of_other_settings_or_code_is_trained_again(workdir, tmp_path, monkeypatch, capsys,
                                                                   trained_pvqvae):
    """DVC re-runs a training whose settings or code changed, having deleted its output: the final state the
    earlier training kept is neither reused (new code must train) nor refused as a stale state."""
    import put.stages.train as train_stage

    out = tmp_path / "pvqvae.pt"
    train_pvqvae(load_params(write_params(workdir, tmp_path / "six.yaml", iterations=6)), "put", workdir / "splits",
                 out, device="cpu")
    earlier = final_state(out)
    out.unlink()
    capsys.readouterr()
    assert train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu").step == 8
    printed = capsys.readouterr().out
    assert f"{earlier}: the final state of an earlier training with other settings; training afresh" in printed
    assert "resuming" not in printed and "already trained" not in printed
    assert out.read_bytes() == trained_pvqvae.read_bytes() and earlier.samefile(out)  # trained afresh: the same
    out.unlink()
    with monkeypatch.context() as m:
        m.setattr(train_stage, "training_code", lambda command: "edited")
        assert train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu").step == 8
    printed = capsys.readouterr().out
    assert f"removed {earlier}: the final state of an earlier training by other code" in printed
    assert "already trained" not in printed and not earlier.exists()
    assert out.read_bytes() == trained_pvqvae.read_bytes()  # the checkpoint does not record the code version
    assert final_state_path(out, "edited").samefile(out)


@pytest.mark.parametrize("stage", ["pvqvae", "transformer"])
def test_interrupted_and_resumed_run_is_bit_identical(workdir, tmp_path, monkeypatch, stage, trained_pvqvae):
    """Also across the data's source and the loader's worker count: the straight run decodes the original files
    in the main process, the interrupted one reads the prepared images, the resumed one with two workers. The
    curves of the two runs are the same bytes (every step computed twice, by different processes): DVC, which
    tells a changed output by its bytes, sees no change in a re-run (timings, which would differ, go to MLflow
    only)."""
    p = params(workdir)
    pvqvae = trained_pvqvae

    def run(out, p=p, prepared=workdir / "prepared"):
        curves = out.with_suffix(".curves")
        if stage == "pvqvae":
            return train_pvqvae(p, "put", workdir / "splits", out, device="cpu", prepared=prepared, curves=curves)
        return train_transformer(p, "put", pvqvae, workdir / "splits", out, device="cpu", prepared=prepared,
                                 curves=curves)

    straight = tmp_path / "straight.pt"
    run(straight, prepared=None)

    from put.train.pvqvae import PVQVAETask
    from put.train.transformer import TransformerTask
    task_cls = PVQVAETask if stage == "pvqvae" else TransformerTask
    resumed = tmp_path / "resumed.pt"
    with monkeypatch.context() as m:
        m.setattr(task_cls, "train_step", stop_at(4, task_cls))
        with pytest.raises(TrainingStopped) as stopped:
            run(resumed)
    assert stopped.value.code == STOPPED_EXIT_CODE
    assert not resumed.exists()  # no final output from an unfinished run
    partial = load_checkpoint(resume_path(resumed))
    assert partial.training["step"] == 5
    raw = yaml.safe_load((workdir / "params.yaml").read_text())
    raw["overrides"][f"{stage}_train"]["num_workers"] = 2
    (tmp_path / "workers.yaml").write_text(yaml.safe_dump(raw))
    run(resumed, load_params(tmp_path / "workers.yaml"))
    (final,) = tmp_path.glob("resumed.final-*.pt")  # the final state kept for a retry, the resumable one gone
    assert final.samefile(resumed) and not resume_path(resumed).exists()
    a, b = load_checkpoint(straight), load_checkpoint(resumed)
    assert states_equal(a.model, b.model)
    assert a.training["step"] == b.training["step"] == 8
    if stage == "pvqvae":
        assert states_equal(a.training["discriminator"], b.training["discriminator"])
    for curve in ("train.csv", "eval.csv"):
        assert (tmp_path / "straight.curves" / curve).read_bytes() == (tmp_path / "resumed.curves" / curve).read_bytes()
    assert "data_wait" not in (tmp_path / "resumed.curves" / "train.csv").read_text()


def test_rerun_of_finished_training_does_nothing(workdir, tmp_path, capsys, trained_pvqvae):
    p = params(workdir)
    out = tmp_path / "pvqvae.pt"
    shutil.copy(trained_pvqvae, out)  # a finished training
    before = out.read_bytes()
    train_pvqvae(p, "put", workdir / "splits", out, device="cpu")
    assert out.read_bytes() == before
    assert "already trained" in capsys.readouterr().out


def test_a_floor_on_the_step_time_slows_training_and_changes_nothing_else(workdir, tmp_path, monkeypatch,
                                                                          trained_pvqvae):
    """PUT_TRAIN_MIN_STEP_S (the Slurm time-limit test's): every step lasts at least that long, and the weights are
    those of a run without it."""
    import put.train.loop

    # The loop's clock, faked: every reading 0.01 s after the last, so a step measures 0.02 s (two readings)
    # whatever the machine's speed, and must sleep the rest of the floor; the sleeps are recorded, not slept.
    readings, slept = itertools.count(), []
    monkeypatch.setattr(put.train.loop, "time", SimpleNamespace(perf_counter=lambda: next(readings) * 0.01,
                                                                sleep=slept.append))
    monkeypatch.setenv(MIN_STEP_ENV, "0.15")
    out = tmp_path / "pvqvae.pt"
    train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu")
    assert slept == pytest.approx([0.15 - 0.02] * 8), slept  # 8 iterations, each sleeping the rest of its floor
    reference = load_checkpoint(trained_pvqvae, kind="pvqvae")
    assert states_equal(load_checkpoint(out, kind="pvqvae").model, reference.model)


@pytest.mark.parametrize("value", ["fast", "-1"])
def test_a_step_time_floor_that_is_not_seconds_is_refused_naming_the_variable(workdir, tmp_path, monkeypatch, value):
    monkeypatch.setenv(MIN_STEP_ENV, value)
    with pytest.raises(PutError, match=f"{MIN_STEP_ENV}='{value}': expected a number of seconds >= 0"):
        train_pvqvae(params(workdir), "put", workdir / "splits", tmp_path / "pvqvae.pt", device="cpu")


def test_non_finite_loss_stops_with_last_checkpoint_intact(workdir, tmp_path, monkeypatch):
    from put.train.pvqvae import PVQVAETask

    original = PVQVAETask.train_step

    def poisoned(self, batch, step):
        losses = original(self, batch, step)
        if step == 4:
            losses["pixel"] = torch.tensor(float("nan"))
        return losses

    monkeypatch.setattr(PVQVAETask, "train_step", poisoned)
    out = tmp_path / "pvqvae.pt"
    with pytest.raises(TrainingDiverged, match=r"non-finite loss at step 4 \(pixel=nan\).*resume.pt is intact"):
        train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu")
    assert not out.exists()
    assert load_checkpoint(resume_path(out)).training["step"] == 3  # the last good one, still loadable


def test_transformer_refuses_a_changed_pvqvae_on_resume(workdir, tmp_path, monkeypatch, trained_pvqvae):
    from put.models.checkpoint import CheckpointError
    from put.train.transformer import TransformerTask

    p = params(workdir)
    pvqvae = tmp_path / "pvqvae.pt"
    shutil.copy(trained_pvqvae, pvqvae)
    out = tmp_path / "transformer.pt"
    with monkeypatch.context() as m:
        m.setattr(TransformerTask, "train_step", stop_at(4, TransformerTask))
        with pytest.raises(TrainingStopped):
            train_transformer(p, "put", pvqvae, workdir / "splits", out, device="cpu")
    raw = yaml.safe_load((workdir / "params.yaml").read_text())
    raw["overrides"]["pvqvae_train"]["seed"] = 1
    (tmp_path / "seed1.yaml").write_text(yaml.safe_dump(raw))
    other = tmp_path / "other.pt"
    train_pvqvae(load_params(tmp_path / "seed1.yaml"), "put", workdir / "splits", other, device="cpu")
    other.replace(pvqvae)  # the same config, other weights, at the same path
    with pytest.raises(CheckpointError, match="changed: pvqvae_sha256: "):
        train_transformer(p, "put", pvqvae, workdir / "splits", out, device="cpu")


def write_params(workdir: Path, path: Path, **train_changes) -> Path:
    raw = yaml.safe_load((workdir / "params.yaml").read_text())
    raw["overrides"]["pvqvae_train"].update(train_changes)
    path.write_text(yaml.safe_dump(raw))
    return path


def test_a_state_saved_with_other_settings_is_refused_and_kept(workdir, tmp_path, monkeypatch):
    """The stale-resume scenario: a run stopped after a save, the iteration count changed, then re-run. It must
    stop with the changed key named, leave the state in place, and never exit 0 without its output."""
    from put.train.loop import StaleState
    from put.train.pvqvae import PVQVAETask

    out = tmp_path / "p.pt"
    with monkeypatch.context() as m:
        m.setattr(PVQVAETask, "train_step", stop_at(4, PVQVAETask))
        with pytest.raises(TrainingStopped):
            train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu")
    state = resume_path(out).read_bytes()
    shorter = load_params(write_params(workdir, tmp_path / "shorter.yaml", iterations=6))
    with pytest.raises(StaleState, match=r"changed: train\.iterations: 8 -> 6\)\..*--restart"):
        train_pvqvae(shorter, "put", workdir / "splits", out, device="cpu")
    assert resume_path(out).read_bytes() == state and not out.exists()  # nothing lost, nothing pretended
    # A saved step at or past the new iteration count is refused the same way (it used to exit 0 without output).
    with pytest.raises(StaleState, match=r"train\.iterations: 8 -> 5"):
        train_pvqvae(load_params(write_params(workdir, tmp_path / "five.yaml", iterations=5)), "put",
                     workdir / "splits", out, device="cpu")
    result = train_pvqvae(shorter, "put", workdir / "splits", out, device="cpu", restart=True)
    assert result.step == 6 and out.is_file() and load_checkpoint(out).training["step"] == 6
    fresh = tmp_path / "fresh.pt"
    train_pvqvae(shorter, "put", workdir / "splits", fresh, device="cpu")
    assert states_equal(load_checkpoint(out).model, load_checkpoint(fresh).model)  # restart = a fresh run


def test_curves_cover_the_whole_run_across_a_resume(workdir, tmp_path, monkeypatch):
    from put.train.pvqvae import PVQVAETask

    curves = tmp_path / "curves"
    out = tmp_path / "p.pt"
    with monkeypatch.context() as m:
        m.setattr(PVQVAETask, "train_step", stop_at(4, PVQVAETask))
        with pytest.raises(TrainingStopped):
            train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu", curves=curves)
    assert not curves.exists()  # written when the training completes
    train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu", curves=curves)
    train = (curves / "train.csv").read_text().splitlines()
    assert train[0].startswith("step,") and "total" in train[0].split(",")
    assert [int(line.split(",")[0]) for line in train[1:]] == [2, 4, 6, 8]  # log_every 2, no step twice
    evaluation = (curves / "eval.csv").read_text().splitlines()
    assert evaluation[0] == "step,psnr_tokens_only,psnr_with_reference"
    assert [int(line.split(",")[0]) for line in evaluation[1:]] == [4, 8]


def test_tok_and_qua0_have_no_pvqvae_stage(workdir, tmp_path):
    with pytest.raises(ValueError, match="reuses 'put'"):
        train_pvqvae(params(workdir), "tok", workdir / "splits", tmp_path / "x.pt", device="cpu")


def test_vgg_losses_without_weights_fail_at_start(workdir, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    raw = yaml.safe_load((workdir / "params.yaml").read_text())
    raw["overrides"]["pvqvae_train"]["loss"]["perceptual"] = 0.1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(MissingWeightsError, match=r"vgg19-dcbb9e9d.pth into .*torch/hub/checkpoints"):
        train_pvqvae(load_params(tmp_path / "params.yaml"), "put", workdir / "splits", tmp_path / "p.pt", device="cpu")
    assert not (tmp_path / "p.pt").exists() and not resume_path(tmp_path / "p.pt").exists()


def cli(workdir, *args):
    return [sys.executable, "-m", "put", *args, "--params", str(workdir / "params.yaml")]


@pytest.mark.slow
def test_kill_9_then_rerun_resumes_to_the_same_result(workdir, tmp_path):
    raw = yaml.safe_load((workdir / "params.yaml").read_text())
    raw["overrides"]["pvqvae_train"].update(iterations=40, checkpoint_every=5)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    args = ["train-pvqvae", "--split", str(workdir / "splits"), "--device", "cpu", "--params",
            str(tmp_path / "params.yaml")]
    straight, killed = tmp_path / "straight.pt", tmp_path / "killed.pt"
    subprocess.run([sys.executable, "-m", "put", *args, "--out", str(straight)], check=True, capture_output=True)
    proc = subprocess.Popen([sys.executable, "-m", "put", *args, "--out", str(killed)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not resume_path(killed).exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert resume_path(killed).exists() and not killed.exists(), "kill -9 came too late to test resuming"
    subprocess.run([sys.executable, "-m", "put", *args, "--out", str(killed)], check=True, capture_output=True)
    assert states_equal(load_checkpoint(straight).model, load_checkpoint(killed).model)


@pytest.mark.slow
def test_ddp_two_processes_gloo_matches_one_process(workdir, tmp_path):
    """torchrun with 2 CPU processes (gloo): the global batch is split, gradients are averaged, and the
    transformer ends where a single-process run ends (up to float summation order), stochastic depth (TPAMI's)
    and random quantization included: their draws are those of the global batch, whatever the layout."""
    stochastic = yaml.safe_load((workdir / "params.yaml").read_text())
    stochastic["overrides"]["model"]["transformer"]["drop_path"] = 0.5
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(stochastic))
    p = load_params(tmp_path / "params.yaml")
    pvqvae = tmp_path / "pvqvae.pt"
    train_pvqvae(p, "put", workdir / "splits", pvqvae, device="cpu")
    single = tmp_path / "single.pt"
    train_transformer(p, "put", pvqvae, workdir / "splits", single, device="cpu")
    double = tmp_path / "double.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # Through our torchrun (what `--gpus 2` execs): torchrun's own parser would stop at `--log`, an abbreviation
    # of its `--log-dir` and others.
    result = subprocess.run(
        [*TORCHRUN, "--standalone", "--nproc_per_node", "2",
         "-m", "put", "train-transformer", "--variant", "put", "--pvqvae", str(pvqvae), "--split",
         str(workdir / "splits"), "--out", str(double), "--device", "cpu",
         "--params", str(tmp_path / "params.yaml"), "--log", str(tmp_path / "double.log")],
        capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "double.log").stat().st_size > 0
    a, b = load_checkpoint(single).model, load_checkpoint(double).model
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5, msg=name)
    # The P-VQVAE stage under DDP too: EMA statistics are all-reduced, training completes.
    ddp_pvqvae = tmp_path / "ddp_pvqvae.pt"
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "put",
         "train-pvqvae", "--variant", "put", "--split", str(workdir / "splits"), "--out", str(ddp_pvqvae),
         "--device", "cpu", "--params", str(workdir / "params.yaml")],
        capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert load_checkpoint(ddp_pvqvae).training["step"] == 8


def test_training_logs_losses_params_and_tags_to_mlflow(workdir, tmp_path, monkeypatch, mlflow_db):
    from mlflow.tracking import MlflowClient

    uri = mlflow_db
    monkeypatch.setenv("PUT_TRACKING", "1")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.chdir(tmp_path)
    p = params(workdir)
    train_pvqvae(p, "put", workdir / "splits", tmp_path / "p.pt", device="cpu", tags={"dvc_stage": "train_pvqvae@put"})
    client = MlflowClient(uri)
    (run,) = [r for r in client.search_runs([client.get_experiment_by_name("put-demo").experiment_id])
              if r.data.tags.get("put.level") == "stage"]
    assert run.info.run_name == "train_pvqvae put"
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "train/pixel")]
    assert steps[:4] == [2, 4, 6, 8] and set(steps) == {2, 4, 6, 8}  # every log_every steps (the model's at 8)
    assert "eval/psnr_tokens_only" in run.data.metrics
    waits = client.get_metric_history(run.info.run_id, "train/data_wait_s")  # a starved GPU shows
    assert [m.step for m in waits][:4] == [2, 4, 6, 8] and all(m.value >= 0 for m in waits)
    assert 0 <= run.data.metrics["train/data_wait_fraction"] <= 1
    assert run.data.params["train.iterations"] == "8"
    assert run.data.tags["dvc_stage"] == "train_pvqvae@put"
    assert run.data.tags["put.slurm_job_id"] == "4242" and run.data.tags["put.variant"] == "put"
    assert run.data.tags["put.dag_id"] == p.dag_id() and run.info.status == "FINISHED"


def test_a_damaged_resume_state_is_named_with_what_to_do(workdir, tmp_path):
    out = tmp_path / "pvqvae.pt"
    resume_path(out).write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(CheckpointError, match=f"{resume_path(out)}: not readable as a PUT checkpoint .*"
                                              "this run would resume from it: move it away to start afresh"):
        train_pvqvae(params(workdir), "put", workdir / "splits", out, "cpu")


def test_auto_workers_follow_the_jobs_cpus(monkeypatch):
    """Under Slurm the job's CPUs are shared by its training processes, one CPU kept for each; a number is kept."""
    from put.train.data import loader_workers

    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "32")
    assert (loader_workers("auto", 8), loader_workers("auto", 1), loader_workers(2, 8)) == (3, 31, 2)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "8")
    assert loader_workers("auto", 8) == 0  # one CPU per process: it loads its own batches
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    assert loader_workers("auto") == len(os.sched_getaffinity(0)) - 1


# ---------------------------------------------------------------- a full disk (issue 20)

def test_a_full_disk_at_a_save_keeps_the_last_good_state_and_the_rerun_resumes(workdir, tmp_path, monkeypatch,
                                                                               capsys):
    """Injected ENOSPC inside torch's zip writer at the second periodic save (step 6 of 8; saves every 3)."""
    import put.models.checkpoint
    from put.io.diskspace import DiskFullError
    from tests.faults import FillingFile

    out, partial = tmp_path / "p.pt", resume_path(tmp_path / "p.pt")
    saves = []

    def disk_fills_after_one_save(path, mode="r", *args, **kwargs):
        saves.append(path)
        return FillingFile(path, mode, room=1000) if len(saves) > 1 else open(path, mode, *args, **kwargs)

    monkeypatch.setattr(put.models.checkpoint, "open", disk_fills_after_one_save, raising=False)
    with pytest.raises(DiskFullError) as err:
        train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu")
    assert str(err.value).startswith(f"{partial}: no space left on device (needs about ")
    assert (f"nothing was lost: the last good state {partial} (step 3) is intact; the 3 steps since are not saved. "
            "Free space, then re-run") in str(err.value)
    assert load_checkpoint(partial).training["step"] == 3 and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.resume.pt"]
    monkeypatch.setattr(put.models.checkpoint, "open", open, raising=False)  # space freed
    assert train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu").step == 8
    assert f"resuming from {partial} at step 3" in capsys.readouterr().out


def test_training_warns_at_start_and_refuses_a_save_that_does_not_fit(workdir, tmp_path, monkeypatch, capsys):
    import put.io.diskspace
    import put.train.room
    from put.cli import main

    for module in (put.io.diskspace, put.train.room):
        monkeypatch.setattr(module, "free_bytes", lambda path: 1000)
    out = tmp_path / "p.pt"
    assert main(["train-pvqvae", "--params", str(workdir / "params.yaml"), "--split", str(workdir / "splits"),
                 "--out", str(out), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if line.startswith("warning:")][0].startswith(
        f"warning: {tmp_path} has 1000 bytes free, but this training's saves need about ")
    assert re.fullmatch(re.escape(f"put train-pvqvae: error: {resume_path(out)}: not enough space left on device "
                                  "(needs about ") + r"[\d.]+ [KM]iB" + re.escape(
        ", 1000 bytes free); nothing was lost: no state had been saved yet, so the next run starts afresh. Free "
        "space, then re-run"), err[-1])
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_full_disk_while_keeping_the_final_state_leaves_a_finished_training_and_no_temporary(workdir, tmp_path,
                                                                                              monkeypatch, capsys):
    """Issue 43, 7: where hard links fail, the final state is a copy; a full disk during it turned a finished
    training into a failed stage (Snakemake then deletes the checkpoint and trains again), and a killed copy
    left its temporary file for good."""
    import errno
    import shutil
    import subprocess

    import put.io.files
    from put.io.files import this_host

    out = tmp_path / "pvqvae.pt"

    def no_links(source, target):
        raise OSError(errno.EPERM, "Operation not permitted")

    def disk_fills(source, target):
        Path(target).write_bytes(Path(source).read_bytes()[:1000])  # part of it, then no room
        raise OSError(errno.ENOSPC, "No space left on device")

    copyfile = shutil.copyfile
    monkeypatch.setattr(put.io.files.os, "link", no_links)
    monkeypatch.setattr(put.io.files.shutil, "copyfile", disk_fills)
    assert train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu").step == 8
    assert load_checkpoint(out).training["step"] == 8
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert line.startswith(f"warning: {out} is complete, but its final state could not be kept as "
                           f"{final_state(out)}") and f"resumes from {resume_path(out)}" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pvqvae.pt", "pvqvae.resume.pt"]  # no temporary

    # A copy killed half-way left its temporary file; the retry (Snakemake deleted the output) removes it.
    monkeypatch.setattr(put.io.files.shutil, "copyfile", copyfile)  # room again
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = tmp_path / f".{final_state(out).name}.tmp-{this_host()}-{dead.pid}"
    leftover.write_bytes(b"half a copy")
    out.unlink()
    assert train_pvqvae(params(workdir), "put", workdir / "splits", out, device="cpu").step == 8
    assert f"{leftover}: removed, left by an interrupted run" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["pvqvae.pt", final_state(out).name])

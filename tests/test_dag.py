"""The DAG's two front ends come from one declaration and invalidate alike: dvc.yaml is generated and current,
both run the same commands on the same inputs and outputs, an edited source file or parameter makes exactly the
stages that use it out of date (and what follows them), params.yaml is validated, Snakemake passes its
--config values to the jobs and lints clean, and `dvc repro` of the demo preset behaves as users rely on
(slow: runs the whole demo pipeline)."""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
import shutil
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from put.commands.track import instance_run_name
from put.config import VARIANTS
from put.config.params import ParamsError, load_params
from put.config.paths import (
    CODE_VERSIONS,
    MASKS_DIR,
    PREPARED_DIR,
    PVQVAE_CURVES,
    REPORT_PDF,
    TRAIN_CURVE,
    TRANSFORMER_CURVES,
    metrics_info_file,
    pasted_metrics_file,
    path_of,
    samples_dir,
    split_dir,
)
from put.dag import dvc_plots, dvc_yaml
from put.dag.code import all_sources, code_key
from put.dag.declaration import CONFIG, REPLICATED, STAGES
from put.dag.dvc_yaml import instance_command
from put.dag.graph import instances
from put.dag.report_captions import caption
from put.tracking.names import VARIANTS_VIEW, runs_link
from tests.helpers import (
    BIN,
    ENV,
    ROOT,
    compare_experiments,
    is_product,
    metrics_file,
    planned_jobs,
    product_roots,
    pvqvae_checkpoint,
    report_dir,
    snakemake,
    transformer_checkpoint,
    working_copy,
)

ALL = {stage.key(variant) for stage, variant in instances()}


def test_dvc_yaml_is_generated_from_the_declaration():
    assert dvc_yaml.is_current(), "dvc.yaml is stale: run `put dag` (make dag) and commit it"
    assert dvc_plots.stale() == [], "the dvc plots templates are stale: run `put dag` (make dag) and commit them"


def dvc_stages(repo: Path) -> dict[str, dict]:
    """DVC's view of `repo`'s stages (this checkout's read once: two tests look at it)."""
    return _checkout_dvc_stages() if repo == ROOT else _dvc_stages(repo)


@functools.cache
def _checkout_dvc_stages() -> dict[str, dict]:
    return _dvc_stages(ROOT)


def _dvc_stages(repo: Path) -> dict[str, dict]:
    from dvc.repo import Repo

    with Repo(str(repo)) as dvc:
        return {stage.name: {"cmd": stage.cmd, "outs": {os.path.relpath(o.fs_path, repo) for o in stage.outs},
                                   "deps": {os.path.relpath(d.fs_path, repo) for d in stage.deps
                                            if not hasattr(d, "params")},
                                   "params": {(os.path.relpath(d.fs_path, repo), key) for d in stage.deps
                                              if hasattr(d, "params") for key in d.params or ()}}
                for stage in dvc.index.stages}


def normalised(command: str) -> str:
    """A stage command without what only one front end adds (bookkeeping, not what the stage computes)."""
    command = re.sub(r"^exec ", "", command)
    command = re.sub(r" --(params|log|tag|gpus|nodes) \S+", "", command)
    return " ".join(command.split())


def with_official_entry(repo: Path) -> dict[str, dict]:
    """params.yaml of `repo` with one entry under `official` (the authors'-format checkpoint of the fixtures)."""
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["official"] = {"release": {"transformer": "tests/fixtures/parity/models/official_tiny_transformer.pth"}}
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return params


def with_seeds(repo: Path, seeds: list[int]) -> None:
    """params.yaml of `repo` with seed replicates."""
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["seeds"] = seeds
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def replicate_keys(seeds: list[int]) -> set[str]:
    return {stage.key(str(seed)) for stage in STAGES if stage.fan_out == "seeds" for seed in seeds}


@pytest.mark.parametrize("extra", ["", "official", "seeds"],
                         ids=["ablations", "with-an-official-entry", "with-seed-replicates"])
def test_both_front_ends_run_the_same_commands_on_the_same_files(tmp_path, extra):
    repo = ROOT
    # the committed params.yaml's `external` entries (the demo's built-in baselines): two stages each
    expected = set(ALL) | {stage.key(name) for stage, name in instances(load_params(ROOT / "params.yaml"))
                           if stage.fan_out == "external"}
    if extra == "official":
        repo = working_copy(tmp_path / "repo")
        with_official_entry(repo)
        expected |= {f"{name}@release" for name in ("import_official", "sample_official", "evaluate_official")}
    if extra == "seeds":
        repo = working_copy(tmp_path / "repo")
        with_seeds(repo, [1, 2])
        before = len(expected)
        expected |= replicate_keys([1, 2])
        per_seed = sum(len(stage.variants) for stage in REPLICATED)  # 5 P-VQVAEs, 7 transformers, samples, evaluations
        assert "train_transformer_tok@2" in expected and len(expected) == before + 2 * per_seed
    dvc = dvc_stages(repo)
    plan = snakemake(repo, "-n", "-p", "--forceall", "--cores", "1", "all")
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    snake = planned_jobs(plan.stdout)
    assert set(dvc) == set(snake) == expected
    bookkeeping = re.compile(r"^(\.snakemake/put/|put/config/presets\.yaml$)")
    code_versions = str(path_of(CODE_VERSIONS, "demo"))
    params = load_params(repo / "params.yaml")
    commands = {declared.key(name): declared.command for declared, name in instances(params)}
    for key, entry in dvc.items():
        job = snake[key]
        assert entry["outs"] == job["outputs"], key
        inputs = {i for i in job["inputs"] if not bookkeeping.match(i) and not i.startswith("put/")}
        # DVC depends on the folder of every metrics file (it also holds the official entries' ones).
        inputs = {next((d for d in entry["deps"] if i.startswith(d + "/")), i) for i in inputs}
        assert {d for d in entry["deps"] if not d.startswith("put/")} - {"put/config/presets.yaml"} == inputs, key
        assert normalised(entry["cmd"]).replace("${preset}", "demo") == normalised(job["shell"]), key
        # The code a job runs: a Snakemake rule's inputs; for DVC the `config` stage's dependencies, and each
        # stage's parameter, its command's version (put/dag/code.py).
        code = {i for i in job["inputs"] if i.startswith("put/")}
        assert code, key
        if key == "config":
            assert code < entry["deps"] and set(all_sources()) <= entry["deps"], key
        else:
            assert not entry["deps"] & code and (code_versions, code_key(commands[key])) in entry["params"], key
    for declared, name in instances(params):  # `put track` parses each stage's command line as DVC runs it
        command = " ".join(["python -m put", *instance_command(declared, name, "demo", params)])
        key = declared.key(name)
        assert command == " ".join(dvc[key]["cmd"].replace("${preset}", "demo").split()), key


def test_a_bare_snakemake_dry_run_plans_the_whole_dag(tmp_path):
    repo = working_copy(tmp_path / "repo")  # not this checkout: it may hold a demo
    plan = snakemake(repo, "-n", "-p", "--cores", "2")
    assert plan.returncode == 0, plan.stderr[-3000:]
    # The repository carries the outputs of `config` and `bench` (and DVC's lock calls them current): Snakemake,
    # which has no record of them, plans them when a file they read is newer (e.g. code edited since the commit).
    everything = {stage.key(name) for stage, name in instances(load_params(repo / "params.yaml"))}  # + `external`
    assert everything - {"config", "bench"} <= set(planned_jobs(plan.stdout)) <= everything, plan.stdout[-2000:]


def test_snakemake_lint_finds_nothing_but_the_environment_note_and_writes_nothing(tmp_path):
    repo = working_copy(tmp_path / "repo")
    lint = snakemake(repo, "--lint")
    findings = set(re.findall(r"^    \* (.+?):?$", lint.stdout + lint.stderr, re.M))
    assert findings <= {"Specify a conda environment or container for each rule."}, findings
    assert not (repo / ".snakemake" / "put").exists()


def test_snakemake_config_values_reach_the_jobs_and_reading_the_snakefile_writes_nothing(tmp_path):
    """The real job also shows that each rule runs its own command: Snakemake evaluates a rule's `shell:` when
    the job runs, and rules built in a loop body all ran the last stage's (the report's), which only a real job
    shows, never a dry run."""
    repo = working_copy(tmp_path / "repo")
    config = ("--config", 'overrides={"transformer_train": {"lr": 0.0005}}')
    plan = snakemake(repo, "ablations", "-n", "-p", "--cores", "1", *config)
    assert plan.returncode == 0, plan.stderr[-3000:]
    jobs = planned_jobs(plan.stdout)
    assert all("--params .snakemake/put/params.yaml" in job["shell"] for job in jobs.values())
    assert not (repo / ".snakemake" / "put").exists()  # a dry run only reads the Snakefile
    resolved = path_of(CONFIG.outputs["--out"].pattern, "demo")
    run = snakemake(repo, "--cores", "1", "--force", str(resolved), *config)  # committed, hence current
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert load_params(repo / ".snakemake" / "put" / "params.yaml").resolved().transformer_train.lr == 0.0005
    assert yaml.safe_load((repo / resolved).read_text())["transformer_train"]["lr"] == 0.0005
    assert (repo / "logs/demo/benchmarks/config.tsv").is_file()  # run time and memory of the job
    typo = snakemake(repo, "-n", "--cores", "1", "--config", 'overrides={"transformer_train": {"lrr": 0.0005}}')
    assert typo.returncode != 0
    assert "overrides.transformer_train.lrr: Extra inputs are not permitted" in typo.stdout + typo.stderr


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@put", *args], cwd=repo, check=True,
                   capture_output=True, timeout=120)


def test_working_copy_takes_the_code_and_leaves_pipeline_products_out(tmp_path):
    """Issue 13: after `make demo`, the metrics and benchmark files (DVC outputs with cache: false, which DVC
    does not git-ignore) were copied into the cluster test's repository, and Snakemake found nothing to do."""
    source = tmp_path / "checkout"
    committed = {"put/stage.py": "v1", "put/gone.py": "", "dvc.lock": "committed", ".gitignore": "mlflow.db\n",
                 f"{report_dir('demo')}/table1.tex": "committed"}
    for name, text in committed.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)
    git(source, "init", "-q")
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "code")
    # The code under test: edited, new and deleted files.
    (source / "put/stage.py").write_text("v2")
    (source / "put/new.py").write_text("new")
    (source / "put/gone.py").unlink()
    # What a `make demo` leaves: untracked outputs, DVC's .gitignore files, a regenerated report, a new lock.
    products = [metrics_file("demo", "put"), Path("results/demo/bench/sampling.json"), pvqvae_checkpoint("demo", "put"),
                transformer_checkpoint("demo", "tok"), split_dir("demo") / "train.csv", Path("data/demo/.gitignore"),
                samples_dir("demo", "put") / "samples.csv", report_dir("demo") / "curve_fid.png", Path("mlflow.db")]
    for name in products:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text("made by the pipeline")
    (source / report_dir("demo") / "table1.tex").write_text("regenerated")
    (source / "dvc.lock").write_text("rewritten")

    copy = working_copy(tmp_path / "copy", source=source)
    assert (copy / "put/stage.py").read_text() == "v2" and (copy / "put/new.py").is_file()
    assert not (copy / "put/gone.py").exists()
    assert [str(name) for name in products if (copy / name).exists()] == []
    assert (copy / report_dir("demo") / "table1.tex").read_text() == "committed"
    assert (copy / "dvc.lock").read_text() == "committed"


def test_every_dag_output_lies_where_working_copies_leave_products_out():
    roots = product_roots()
    assert {"data", "runs", "results", "reports", "logs"} <= roots
    outputs = {out for stage in dvc_stages(ROOT).values() for out in stage["outs"]}
    assert [name for name in outputs if not is_product(Path(name).as_posix(), roots)] == []
    # and no code does: a location added to put/config/paths.py must not take a code folder or file with it
    tracked = filter(None, subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True,
                                          text=True).stdout.split("\0"))
    code_like = [n for n in tracked if n.endswith((".py", ".smk")) or "/" not in n]
    assert [n for n in code_like if is_product(n, roots)] == ["dvc.lock"]


@pytest.mark.parametrize("text,message", [
    ("preset: demo\noverrides: {pvqvae_train: {iteratons: 3}}\n", "overrides.pvqvae_train.iteratons: Extra inputs"),
    ("preset: demo\nvariants: {qua0: {transformer: {random_quant_prob: 2}}}\n",
     "variants.qua0.transformer.random_quant_prob: Input should be less than or equal to 1"),
    ("preset: demo\noverrides: {pvqvae_train: {batch_size: many}}\n", "overrides.pvqvae_train.batch_size"),
    ("prest: demo\n", "prest: Extra inputs are not permitted"),
    ("preset: ffhh\n", "unknown preset 'ffhh'"),
    ("variants: {qua1: {}}\n", "unknown variant(s) ['qua1']"),
    ("seeds: [0, 1, 2]\n", "seeds: expected distinct positive seeds: seed 0 is the base run"),
    ("seeds: [1, 1]\n", "seeds: expected distinct positive seeds"),
])
def test_params_typos_are_errors_naming_the_key(tmp_path, text, message):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_params_yaml_lists_every_setting_so_that_dvc_set_param_finds_it():
    """`dvc exp run -S overrides.transformer_train.lr=5e-4` only sets keys that exist in params.yaml (Hydra's rule):
    every setting that cannot be null is listed there, null meaning the preset's value."""
    from put.config.params import unset_overrides
    from put.config.presets import Preset

    assert yaml.safe_load((ROOT / "params.yaml").read_text())["overrides"] == unset_overrides(Preset)


def test_a_null_override_keeps_the_presets_value_unless_the_setting_may_be_null(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("preset: ffhq\n"
                    "overrides: {transformer_train: {lr: null, iterations: 7000}, masks: {pconv_root: null}}\n")
    resolved = load_params(path).resolved()
    assert resolved.transformer_train.lr == 3e-4 and resolved.transformer_train.iterations == 7000
    assert resolved.masks.pconv_root is None  # ffhq's is data/raw/pconv_masks: null sets it to none


def test_the_preset_is_merged_and_validated_once_per_load_and_replicates_shift_only_their_seeds(tmp_path,
                                                                                                 monkeypatch):
    import put.config.params as params_module

    path = tmp_path / "params.yaml"
    path.write_text("preset: demo\noverrides: {sample: {top_k: 10}}\nseeds: [1]\n")
    params = load_params(path)
    validated = []
    real = params_module.Preset.model_validate
    monkeypatch.setattr(params_module.Preset, "model_validate", lambda data: validated.append(1) or real(data))
    base, again, shifted = params.resolved(), params.resolved(), params.replicate(1).resolved()
    assert not validated and base is again  # made by the check at load, then reused
    assert base.sample.top_k == shifted.sample.top_k == 10 and shifted.sample.seed == base.sample.seed + 1
    assert params.replicate(1).resolved().data == base.data  # the split and masks are every replicate's


def test_the_repository_params_file_is_valid():
    params = load_params(ROOT / "params.yaml")
    assert params.preset == "demo"
    assert set(yaml.safe_load((ROOT / "params.yaml").read_text())["variants"]) == set(VARIANTS)


def test_cli_reports_a_params_typo_without_a_traceback(tmp_path, monkeypatch, capsys):
    from put.cli import main

    (tmp_path / "params.yaml").write_text("preset: demo\noverrides: {sample: {top_kk: 5}}\n")
    monkeypatch.chdir(tmp_path)  # the params.yaml `put` reads by default
    assert main(["split", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "overrides.sample.top_kk: Extra inputs are not permitted" in err
    assert "Traceback" not in err


def dvc_env(tracking: bool = True) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PUT_TRACKING": "1" if tracking else "0"}
    env.pop("MLFLOW_TRACKING_URI", None)  # the default: sqlite:///mlflow.db in the repository
    return env


def dvc(repo: Path, *args: str, timeout: int = 1500, tracking: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "dvc"), *args], cwd=repo, capture_output=True, text=True, env=dvc_env(tracking),
                          timeout=timeout)


def changed_stages(repo: Path) -> set[str]:
    status = json.loads(dvc(repo, "status", "--json").stdout or "{}")
    return {name.split(":")[-1] for name in status}


def mlflow_run_count(repo: Path) -> int:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{repo / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("put-demo")
    return len(client.search_runs([experiment.experiment_id], max_results=1000))


def flat_numbers(data, prefix: str = "") -> dict[str, float]:
    if isinstance(data, dict):
        return {k: v for key, value in data.items() for k, v in flat_numbers(value, f"{prefix}.{key}").items()}
    return {prefix: data} if isinstance(data, (int, float)) and not isinstance(data, bool) else {}


# The committed params' tracked stage instances (the variants and the demo's external baselines), by MLflow's run
# name (`frontier tpami`, `evaluate external_telea`, `report`) and by the DVC stage their runs are tagged with.
COMMITTED = load_params(ROOT / "params.yaml")
TRACKED = {instance_run_name(stage, name, COMMITTED) for stage, name in instances(COMMITTED) if stage.tracked}
DVC_STAGES = {stage.key(name) for stage, name in instances(COMMITTED) if stage.tracked}


def check_mlflow(repo: Path, tmp_path: Path, skipped: set[str], browser: bool = True) -> None:
    """The demo's runs through `put ui` (what `make mlflow` runs; a client, then the UI in Chromium): the experiment
    marked as model training; a named run per tracked stage instance, those of the stages DVC `skipped` logged from
    their outputs and marked so, the others not; a registered LoggedModel with metrics per trained model, listed
    with its registered version; system metrics of the stages that ran; datasets; dirty only where code or params
    differ from the commit (none here). In Chromium, the link `put ui` prints opens the evaluation runs with the
    variants' PSNR and SSIM columns on screen."""
    from mlflow.tracking import MlflowClient

    from put.config import PVQVAE_VARIANTS, VARIANT_COLOURS
    from put.config.external import EXTERNAL_PREFIX
    from put.tracking.names import parent_name
    from tests.tools import browser_missing, offline_page, put_ui

    with put_ui(repo, tmp_path / "mlflow-ui.log") as (url, link):
        client = MlflowClient(url)
        experiment = client.get_experiment_by_name("put-demo")
        assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
        runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id], max_results=1000)}
        parent = parent_name("demo", COMMITTED.dag_id(), COMMITTED.evaluated_labels())  # `+ 2 external`
        assert set(runs) == TRACKED | {parent}
        models = client.search_logged_models([experiment.experiment_id], max_results=100)
        assert sorted((m.tags["put.kind"], m.tags["put.variant"]) for m in models) == sorted(
            [("pvqvae", v) for v in PVQVAE_VARIANTS] + [("transformer", v) for v in VARIANTS])
        for model in models:
            linked = {m.key for m in model.metrics}
            assert linked and str(model.status).endswith("READY"), model.name
            if model.tags["put.kind"] == "transformer":
                assert {"k50/10-60/psnr", "k50/10-60/ssim"} <= linked, model.name
            name = f"put-demo-{model.tags['put.variant']}-{model.tags['put.kind']}"
            assert client.get_model_version_by_alias(name, "current").source == f"models:/{model.model_id}"
            assert name in model.tags["mlflow.modelVersions"]  # the Models tab's "Registered models" column
        for name, run in runs.items():
            run = client.get_run(run.info.run_id)
            tags, stage = run.data.tags, run.data.tags.get("put.stage")
            assert run.info.status == "FINISHED", name
            if stage is None:
                continue
            assert tags["mlflow.source.git.commit"] and tags["put.git.dirty"] == "False", name
            assert tags.get("mlflow.runColor") == VARIANT_COLOURS.get(tags.get("put.variant")), name  # as everywhere
            from_outputs = tags.get("put.logged_from") == "outputs"
            assert from_outputs == (tags["dvc_stage"] in skipped), (name, tags["dvc_stage"], skipped)
            if stage in ("train_pvqvae", "train_transformer", "sample", "frontier") and not from_outputs:
                assert any(k.startswith("system/cpu_utilization") for k in run.data.metrics), name
            if stage == "evaluate":  # a deterministic method (an external baseline) has one result per input
                modes = ("all",) if tags["put.variant"].startswith(EXTERNAL_PREFIX) else ("k50", "all")
                assert {f"{mode}/10-60/{metric}" for mode in modes for metric in ("psnr", "ssim")} <= set(
                    run.data.metrics), name
            datasets = {d.dataset.name for d in run.inputs.dataset_inputs}
            splits, masks = {"demo train split", "demo test split"}, {"demo test masks"}
            expected = {"train_pvqvae": splits, "train_transformer": splits, "sample": masks, "evaluate": masks,
                        "frontier": masks}.get(stage)
            assert expected is None or datasets == expected, (name, datasets)
        assert f"mlflow.sharedViewState.{VARIANTS_VIEW}" in experiment.tags
        assert link == runs_link(url, experiment.experiment_id) and "workflowType=machine_learning" in link
        if not browser:
            return
        if reason := browser_missing():
            warnings.warn(f"the MLflow UI was not opened: {reason}", stacklevel=2)
            return
        with offline_page() as page:  # exactly the link the user is given
            page.goto(link)
            for label in COMMITTED.evaluated_labels():  # the variants and the external baselines
                page.get_by_text(f"evaluate {label}", exact=True).wait_for(timeout=60_000)
            for metric in ("k50/10-60/psnr", "k50/10-60/ssim"):  # columns of the table, on screen
                header = page.locator(".ag-header-cell", has_text=metric)
                header.first.wait_for(timeout=10_000)
                assert header.first.is_visible() and header.first.bounding_box()["x"] < 1600, metric
            page.screenshot(path=str(tmp_path / "mlflow-runs.png"))
            if os.environ.get("PUT_MLFLOW_SCREENSHOT"):
                shutil.copyfile(tmp_path / "mlflow-runs.png", os.environ["PUT_MLFLOW_SCREENSHOT"])
            # The model registry lists every registered model by name (the experiment's Models tab draws only the
            # columns in view, and with the seven variants' parameters its Registered models column lies beyond).
            page.goto(link.split("#")[0] + "#/models")
            registered = page.get_by_text("put-demo-put-transformer", exact=True)
            registered.first.wait_for(state="visible", timeout=120_000)
            assert registered.first.is_visible()
            assert page.blocked == []


def check_inpaint_by_name(repo: Path, out: Path) -> None:
    """`put inpaint` of the demo's registered put transformer by name gives the bytes it gives by path, on a test
    image as the models see it (the masks stage's gt/ copy) and one of its evaluation masks."""
    masks = repo / path_of(MASKS_DIR, "demo")
    mask = pd.read_csv(masks / "manifest.csv").query("group == '20-40'")["mask"].iloc[0]
    env = {**ENV, "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}"}
    results = {}
    for how, checkpoint in (("path", repo / transformer_checkpoint("demo", "put")),
                            ("name", "models:/put-demo-put-transformer@current")):
        done = subprocess.run([str(BIN / "put"), "inpaint", "--checkpoint", str(checkpoint), "--image",
                               str(masks / "gt" / Path(mask).name), "--mask", str(masks / mask), "--samples", "2",
                               "--seed", "3", "--out", str(out / how)],
                              cwd=repo, capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        results[how] = [p.read_bytes() for p in sorted((out / how).glob("*.png"))]
    assert len(results["path"]) == 2 and results["name"] == results["path"]


def check_report_on_a_folder(repo: Path, work: Path) -> None:
    """The report stage's own command on the demo's results, in a copy of its inputs, with params.yaml saying the
    images were a folder named by the user: Table 1 and Table 3 name it and carry none of the paper's rows (the
    demo's own tables carry FFHQ's), over the same measured numbers."""
    import shlex

    command = shlex.split(dvc_stages(repo)["report"]["cmd"].replace("${preset}", "demo"))
    command = [str(BIN / "python"), *command[1:command.index("--tag")], "--params", "params.yaml"]
    for option, value in zip(command, command[1:]):  # the inputs it names
        if option.startswith("--") and option != "--out" and (repo / value).exists():
            copy = shutil.copytree if (repo / value).is_dir() else shutil.copyfile
            (work / value).parent.mkdir(parents=True, exist_ok=True)
            copy(repo / value, work / value)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["overrides"]["data"] |= {"dataset": "folder", "root": str(repo / split_dir("demo") / "images"),
                                    "name": "Demo photographs"}
    (work / "params.yaml").write_text(yaml.safe_dump(params))
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=600,
                          env={**ENV, "PUT_TRACKING": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("table1.tex", "table3.tex"):
        demo, folder = ((where / report_dir("demo") / name).read_text() for where in (repo, work))
        assert "reported, FFHQ" in demo and "reported" not in folder.replace("no reported rows", ""), name
        assert "on Demo photographs (a folder of the user's images; the paper reports no numbers on it" in folder
        measured = set(re.findall(r"\d+\.\d{3,4}", folder))
        assert measured and measured <= set(re.findall(r"\d+\.\d{3,4}", demo)), name


def check_plots_offline(repo: Path, out: Path) -> None:
    """`dvc plots show` writes a page that loads no script from elsewhere and draws every plot offline."""
    from put.dag.declaration import PLOTS
    from tests.tools import browser_missing, offline_page

    plots = dvc(repo, "plots", "show", "-o", str(out))
    assert plots.returncode == 0, plots.stderr[-2000:]
    page_text = (out / "index.html").read_text()
    assert not re.search(r"<script[^>]*\bsrc\s*=\s*[\"']?(https?:)?//", page_text, re.I)
    assert all(plot.title in page_text for plot in PLOTS)
    if reason := browser_missing():
        warnings.warn(f"the dvc plots page was not opened: {reason}", stacklevel=2)
        return
    with offline_page() as page:
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto((out / "index.html").as_uri())
        page.wait_for_function(f"document.querySelectorAll('.vega-embed svg, .vega-embed canvas').length >= "
                               f"{len(PLOTS)}", timeout=60_000)
        page.screenshot(path=str(out / "plots.png"), full_page=True)
        assert page.blocked == [] and errors == []


def make(repo: Path, target: str, timeout: int = 1500) -> subprocess.CompletedProcess:
    """`make TARGET` in `repo` with this environment (VENV: the tests' own, so nothing is installed)."""
    env = {k: v for k, v in ENV.items() if k != "MLFLOW_TRACKING_URI"} | {"PUT_TRACKING": "1"}
    return subprocess.run(["make", "--no-print-directory", target, f"VENV={BIN.parent}"], cwd=repo,
                          capture_output=True, text=True, env=env, timeout=timeout)


# `make repro` of the demo on 2 cores: 14 min 15 s on an idle Xeon, 21 min 52 s on AMD EPYC cores (this project's
# CI machine in November 2026; 26 min 44 s before the Makefile kept Python's bytecode cache on). Much of its
# time is the fixed cost of each of 38 stages: Python and MLflow imports, DVC's rewrite of dvc.lock
# (docs/testing.md). The bound catches a slowdown, not a slower machine.
DEMO_REPRO_BOUND_S = 35 * 60
# The seed replicate test's experiment: tok's replicate; its 3 sources get a 50% interval (a 95% one would take
# the 99.99999% percentiles, put/stats/bootstrap.py), with the minimum of units lowered.
SEED_REPLICATE = ("exp", "run", "-S", "seeds=[1]", "-S", "overrides.evaluate.min_units=2", "-S",
                  "overrides.evaluate.interval_level=0.5", "evaluate@tok", "evaluate_tok@1")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Iterator[dict]:
    """`make repro` (`make demo` less the installation) once for the module, in a fresh clone of the code under
    test, committed as in a fresh clone (no run is dirty). The repro test checks it and goes on in it; the seed
    replicate runs in a copy of the workspace as `make repro` left it (started here, beside the repro test), whose
    base run is the demo's: nothing is trained twice."""
    root = tmp_path_factory.mktemp("demo")
    repo = working_copy(root / "repo")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "the code under test")
    start = time.monotonic()
    first = make(repo, "repro", timeout=DEMO_REPRO_BOUND_S + 600)
    elapsed = time.monotonic() - start
    copy = root / "copy"
    seeds = None
    if first.returncode == 0:
        shutil.copytree(repo, copy, symlinks=True)
        # The seed replicate test's run, started now in the copy: it trains on the core the repro test's checks
        # leave idle (MLflow's UI, the plots page, Snakemake's report, the re-runs). Its output goes to files (a
        # full pipe would stop it).
        with open(root / "seeds.out", "w") as out, open(root / "seeds.err", "w") as err:
            seeds = (time.monotonic(), subprocess.Popen([str(BIN / "dvc"), *SEED_REPLICATE], cwd=copy, text=True,
                                                        stdout=out, stderr=err, env=dvc_env(tracking=False)))
    yield {"repo": repo, "first": first, "seconds": elapsed, "copy": copy, "seeds": seeds, "root": root}
    if seeds is not None and seeds[1].poll() is None:  # no test of the copy ran (deselected, or failed before)
        seeds[1].kill()
        seeds[1].wait()


def copy_ready(demo: dict) -> subprocess.CompletedProcess:
    """The seed replicate the fixture started in the copy, waited for (once): the tests that run in the copy
    begin after it, in whatever order they are selected. Its stdout and stderr, and `seconds` since its start."""
    if "seed_run" not in demo:
        start, process = demo["seeds"]
        process.wait(timeout=1500)
        demo["seed_run"] = subprocess.CompletedProcess(process.args, process.returncode,
                                                       (demo["root"] / "seeds.out").read_text(),
                                                       (demo["root"] / "seeds.err").read_text())
        demo["seed_seconds"] = time.monotonic() - start
    return demo["seed_run"]


def demo_made(demo: dict) -> subprocess.CompletedProcess:
    first = demo["first"]
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    return first


@pytest.mark.slow
@pytest.mark.timeout(DEMO_REPRO_BOUND_S + 40 * 60)  # the fixture's repro, then the checks and re-runs below
def test_dvc_repro_of_the_demo_preset(demo, tmp_path):
    """What `make demo` does in a fresh clone (the DAG through DVC, with nothing forced, then Snakemake's record and
    MLflow's runs of the stages DVC skipped) within DEMO_REPRO_BOUND_S on 2 CPU cores: MLflow holds every stage's run
    and the saved view, opened in Chromium by the link printed; Snakemake has nothing to do and its report no missing
    metadata; DVC's metrics and plots see the results; a second repro runs nothing; one variant's parameter re-runs
    that variant only; a failing stage keeps earlier outputs and runs, and the rerun continues with it; an `official`
    entry adds its stages; DVC's experiment tools see an experiment's resolved parameters."""
    repo, first, elapsed = demo["repo"], demo_made(demo), demo["seconds"]
    assert elapsed <= DEMO_REPRO_BOUND_S, f"dvc repro of the demo took {elapsed:.0f} s"
    skipped = set(re.findall(r"Stage '([^']+)' didn't change, skipping", first.stdout))
    print(f"make repro (make demo less the install): {elapsed:.0f} s; DVC skipped: {sorted(skipped)}")
    assert first.stdout.strip().splitlines()[-1].startswith("MLflow, the variants side by side: `make mlflow`")
    for variant in VARIANTS:
        assert (repo / metrics_file("demo", variant)).is_file()
    for name in ("table1.tex", "table3.tex", "generations.tex", "generations_diversity.tex", "speed.tex",
                 "speed_summary.tex", "frontier.tex", "frontier.png", "frontier_tpami.tex", "generations_frontier.png",
                 "metrics.csv", "curves_psnr_ssim_mae.png", "samples_put.png", "resolved_params.yaml"):
        assert (repo / report_dir("demo") / name).is_file(), name
    # The tables carry the measured numbers of the metrics files, and the document compiled.
    table1 = (repo / report_dir("demo") / "table1.tex").read_text()
    table3 = (repo / report_dir("demo") / "table3.tex").read_text()
    generations = (repo / report_dir("demo") / "generations.tex").read_text()  # the CVPR and TPAMI models
    for entry in COMMITTED.external.values():  # the built-in baselines: measured rows, run as the caption says
        assert f"& {entry.label} &" in table1 and f"{entry.label} ({entry.citation}): built in here" in table1
    # Table 1 ranks every row under one rule, said in its caption: PUT and the baselines with the known pixels pasted
    # back (the evaluate stage's pasted/ files); PUT's raw rows, the paper's rule, in a block of their own
    assert "Ranked block (``measured, pasted''): our reproduction;" in table1
    assert "; every row scored with the input's known pixels pasted back over its results" in table1
    assert r"& measured, pasted & PUT$_{\rm all}$ &" in table1 and r"& measured, raw & PUT$_{\rm all}$ &" in table1
    for label in ("put", *(f"external_{name}" for name in COMMITTED.external)):
        pasted = json.loads(pasted_metrics_file(repo / metrics_file("demo", label)).read_text())
        assert set(pasted) == {"all", "k50"} - ({"k50"} if label != "put" else set())
        for cell in (c for groups in pasted.values() for c in groups.values()):
            assert f"{cell['psnr']:.3f}" in table1 and f"{cell['mae']:.4f}" in table1
    for variant in VARIANTS:
        metrics = json.loads((repo / metrics_file("demo", variant)).read_text())  # {mode: {group: {metric: value}}}
        for mode, groups in metrics.items():
            for cell in groups.values():
                if variant == "put" and mode != "bins":
                    assert f"{cell['psnr']:.3f}" in table1 and f"{cell['mae']:.4f}" in table1
                if mode == "k50":
                    assert f"{cell['ssim']:.3f}" in (generations if variant == "tpami" else table3)
                if variant in ("put", "tpami") and mode != "bins":
                    assert f"{cell['psnr']:.3f}" in generations
    if shutil.which("pdflatex"):
        assert (repo / path_of(REPORT_PDF, "demo")).read_bytes()[:4] == b"%PDF"
        assert "runs off the page" not in first.stdout + first.stderr  # put/report/document.py layout_problems
    # The demo's 16 test images are crops of 3 photographs: the split names them, every interval would resample
    # those 3 sources, which are too few for one (evaluate.min_units), so no cell prints an interval or a dagger
    # and each says why; differences.csv keeps the raw and the adjusted p-values (none here) of Table 3's family.
    sources = pd.read_csv(repo / split_dir("demo") / "test.csv")["source"]
    assert sources.nunique() == 3 and len(sources) == 16
    # ... read as a folder of images (put/data/folder.py) with the demo's own lists and sources file.
    screened = json.loads((repo / split_dir("demo") / "split_report.json").read_text())["screened"]
    assert screened == {"found": 216, "usable": 216, "excluded": {}, "train": 192, "test": 16, "unused": 8,
                        "sources": {"train": 8, "test": 3}}
    info = json.loads((repo / metrics_info_file(repo / metrics_file("demo", "put"))).read_text())
    minimum = load_params().resolved().evaluate.min_units
    reason = f"n = 3 sources (16 images): too few for an interval (evaluate.min_units = {minimum})"
    assert info["intervals"]["k50/40-60/psnr"] == {"units": 3, "reason": reason}
    assert r"\scriptsize$\pm$" not in table3 and r"n = 3 sources (16 images): too few for an interval" in table3
    assert "(0 tested; 0 marked;" in table3 and "Holm's step-down procedure" in table3
    differences = pd.read_csv(repo / report_dir("demo") / "differences.csv")
    assert {"p", "p_adjusted", "significant", "family", "method"} <= set(differences.columns)
    k50 = differences[differences["mode"] == "k50"]
    assert len(k50[k50["variant"] != "tpami"]) == 45 and len(k50[k50["variant"] == "tpami"]) == 9  # two families
    assert not differences["significant"].any()
    # The prepare stage wrote every split image once, and the trainings read them and logged their wait for data.
    manifest = json.loads((repo / path_of(PREPARED_DIR, "demo") / "manifest.json").read_text())
    for split in ("train", "test"):
        listed = (repo / split_dir("demo") / f"{split}.csv").read_text().strip().splitlines()[1:]
        assert manifest["images"][split] == len(listed) and manifest["settings"]["storage"] == "float16"
    for curves in (path_of(PVQVAE_CURVES, "demo"), path_of(TRANSFORMER_CURVES, "demo")):  # timings: MLflow only
        assert "data_wait_s" not in (repo / curves / TRAIN_CURVE).read_text().splitlines()[0].split(",")
    runs_after_first = mlflow_run_count(repo)
    assert runs_after_first == 1 + len(TRACKED)  # a parent per DAG run, a child per tracked stage instance
    seconds = time.monotonic()
    check_mlflow(repo, tmp_path, skipped)
    ux_seconds = time.monotonic() - seconds
    check_inpaint_by_name(repo, tmp_path / "inpaint")
    check_report_on_a_folder(repo, tmp_path / "folder-report")

    # DVC's own tools see the measured numbers, the curves and the resolved parameters.
    metrics = json.loads(dvc(repo, "metrics", "show", "--json").stdout)
    shown = flat_numbers(metrics)
    for variant in VARIANTS:
        assert any(f"{variant}.json" in key and "psnr" in key for key in shown), (variant, sorted(shown)[:20])
    seconds = time.monotonic()
    check_plots_offline(repo, tmp_path / "plots")

    # Snakemake agrees (`make demo` recorded every job for it): nothing to do, and its HTML report of the same
    # tables and figures finds every job's metadata.
    plan = snakemake(repo, "-n", "--cores", "1")
    assert plan.returncode == 0 and "Nothing to be done" in plan.stdout + plan.stderr, plan.stdout[-2000:]
    html = snakemake(repo, "--report", str(tmp_path / "report.html"))
    assert html.returncode == 0, html.stdout[-2000:] + html.stderr[-2000:]
    assert "Missing metadata" not in html.stdout + html.stderr
    page = (tmp_path / "report.html").read_text(errors="replace")
    assert all(name in page for name in ("table1.tex", "table1.html", "frontier.png", "curves_psnr_ssim_mae.png"))
    for name in sorted(p.name for p in (repo / report_dir("demo")).iterdir() if not p.name.startswith(".")):
        assert caption(name) in page, name  # every file of the report folder has its caption
    ux_seconds += time.monotonic() - seconds
    print(f"MLflow, dvc plots and Snakemake report checks: {ux_seconds:.0f} s")

    second = dvc(repo, "repro")
    assert second.returncode == 0 and "didn't change, skipping" in second.stdout
    assert "Running stage" not in second.stdout

    # MLflow lost (a new machine, a deleted mlflow.db): `make sync` logs every stage's run from its outputs.
    (repo / "mlflow.db").rename(tmp_path / "mlflow-first.db")
    synced = make(repo, "sync", timeout=900)
    assert synced.returncode == 0, synced.stdout[-3000:] + synced.stderr[-3000:]
    assert "MLflow: 0 stage run(s) present" in synced.stdout
    assert mlflow_run_count(repo) == runs_after_first
    check_mlflow(repo, tmp_path, DVC_STAGES, browser=False)
    # That a second `put track` finds the runs logged from outputs and logs nothing twice: the Slurm suite's tracking
    # test on its server, and test_tracking.py::test_a_stage_dvc_skipped_is_logged_from_its_outputs_and_marked.

    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "demo results")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["variants"]["qua0"] = {"transformer": {"random_quant_prob": 0.1}}
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    assert changed_stages(repo) == {"config"}
    assert dvc(repo, "repro", "config").returncode == 0
    # The report prints the resolved file; the stages downstream of the transformer follow from its output.
    assert changed_stages(repo) == {"train_transformer@qua0", "report"}

    # A failing stage: an SSIM window larger than the images makes the first evaluation fail. Checkpoints and runs
    # stay; with the setting restored, the rerun runs the stage that failed and nothing trained or sampled.
    params["variants"]["qua0"] = {}
    evaluate = params["overrides"]["evaluate"]
    params["overrides"]["evaluate"] = {**evaluate, "ssim_window": 99}
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    checkpoints = {p: p.stat().st_mtime_ns for p in (repo / "runs").rglob("*.pt")}
    failed = dvc(repo, "repro")
    assert failed.returncode != 0
    assert "ssim" in (failed.stdout + failed.stderr).lower()
    failing = re.findall(r"Running stage '([^']+)'", failed.stdout)[-1]
    assert failing.startswith(("evaluate@", "frontier")), failing
    assert {p: p.stat().st_mtime_ns for p in (repo / "runs").rglob("*.pt")} == checkpoints
    assert mlflow_run_count(repo) >= runs_after_first  # nothing lost; the failed stage's run is marked FAILED

    params["overrides"]["evaluate"] = evaluate
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    rerun = dvc(repo, "repro")
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    ran = set(re.findall(r"Running stage '([^']+)'", rerun.stdout))
    assert failing in ran and not any(name.startswith(("train_", "sample")) for name in ran), ran
    assert {p: p.stat().st_mtime_ns for p in (repo / "runs").rglob("*.pt")} == checkpoints

    # The authors' released weights as rows of Table 1: an `official` entry is imported, sampled and evaluated
    # under the same protocol (a demo-sized checkpoint in their format, from the parity fixtures).
    from tests.official_fixtures import DEMO_OVERRIDES, write_official

    released = write_official(tmp_path / "released_demo.pth", "transformer_put")
    params["official"] = {"demo_release": {"transformer": str(released),
                                           "model": json.loads(DEMO_OVERRIDES.read_text())}}
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    official = dvc(repo, "repro")
    assert official.returncode == 0, official.stdout[-3000:] + official.stderr[-3000:]
    ran = set(re.findall(r"Running stage '([^']+)'", official.stdout))
    assert ran == {"config", "import_official@demo_release", "sample_official@demo_release",
                   "evaluate_official@demo_release", "report"}, ran
    table1 = (repo / report_dir("demo") / "table1.tex").read_text()
    assert r"& PUT$_{\rm all}$, released \texttt{demo\_release} &" in table1  # in the measured block

    # A DVC experiment on an evaluation setting, for one variant's evaluation (every evaluation would re-run the
    # same code six times more): DVC's experiment tools see the resolved parameter.
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "an official entry")
    experiment = dvc(repo, "exp", "run", "-S", "overrides.evaluate.bootstrap_seed=7", "evaluate@put")
    assert experiment.returncode == 0, experiment.stdout[-3000:] + experiment.stderr[-3000:]
    ran = set(re.findall(r"Running stage '([^']+)'", experiment.stdout))
    assert ran == {"config", "evaluate@put"}, ran
    diff = json.loads(dvc(repo, "params", "diff", "--json").stdout)
    assert diff["results/demo/resolved_params.yaml"]["evaluate.bootstrap_seed"] | {"diff": None} == {
        "old": 0, "new": 7, "diff": None}  # DVC adds the difference too
    table = list(csv.DictReader(io.StringIO(dvc(repo, "exp", "show", "--csv").stdout)))  # a column per parameter
    assert {row["evaluate.bootstrap_seed"] for row in table} == {"0", "7"}  # the commit; workspace, experiment


# ----------------------------------------------------------------------------------------- seed replicates


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_seed_replicates_through_dvc_exp_run_and_their_aggregation(demo):
    """The generated dvc.yaml runs seed replicates from `dvc exp run -S 'seeds=[1]'` alone (foreach over params.yaml's
    `seeds`), in the demo that `make repro` built (a copy of its workspace, no MLflow): `tok`'s replicate, which
    trains on PUT's replicate P-VQVAE, beside the demo's `tok` as seed 0. Only the replicate's stages run (and
    `config`, and tok's evaluation, whose minimum of units is lowered so that the demo's 3 sources get intervals).
    The replicate gets its own seeds and files, and the report's aggregation gives each metric's spread over the
    seeds beside the image bootstrap's. (The paired differences and the report's tables are tested fast, in
    test_frontier and test_intervals.)"""
    from put.metrics.files import read_metrics
    from put.report.latex import render_latex
    from put.report.replicates import seed_summary, seeds_table
    from put.stats.bootstrap import seed_interval

    demo_made(demo)
    repo = demo["copy"]
    run = copy_ready(demo)  # `dvc SEED_REPLICATE`, started by the fixture
    elapsed = demo["seed_seconds"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ran = set(re.findall(r"Running stage '([^']+)'", run.stdout))
    assert ran == {"config", "evaluate@tok", "train_pvqvae_put@1", "train_transformer_tok@1", "sample_tok@1",
                   "evaluate_tok@1"}, ran  # the base run's training and sampling are the demo's
    print(f"\nseed replicates: dvc exp run of {len(ran)} stages done within {elapsed:.0f} s of its start")

    assert (repo / transformer_checkpoint("demo", "tok_seed1")).is_file()
    assert (repo / pvqvae_checkpoint("demo", "put_seed1")).is_file()  # tok's replicate trained on PUT's
    table, _ = read_metrics([repo / metrics_file("demo", label) for label in ("tok", "tok_seed1")], "demo")
    assert sorted(set(zip(table["variant"], table["seed"]))) == [("tok", 0), ("tok", 1)]
    info = json.loads((repo / "results/demo/metrics/tok_seed1_info.json").read_text())
    test_images = len(pd.read_csv(repo / split_dir("demo") / "test.csv"))
    assert info["seed"] == 1 and info["sampling"]["seed"] == 1 and info["n"]["k50"]["40-60"] == test_images
    k50 = table[table["mode"] == "k50"].set_index(["seed", "group"])
    assert k50.loc[(0, "10-60"), "psnr"] != k50.loc[(1, "10-60"), "psnr"]  # another seed, another model

    summary = seed_summary(table)
    row = summary.set_index(["variant", "mode", "group", "metric"]).loc[("tok", "k50", "10-60", "psnr")]
    expected = seed_interval([k50.loc[(s, "10-60"), "psnr"] for s in (0, 1)])
    assert row["replicates"] == 2
    assert (row["mean"], row["std"], row["lo"]) == pytest.approx((expected.mean, expected.std, expected.lo))
    halves = [(k50.loc[(s, "10-60"), "psnr_hi"] - k50.loc[(s, "10-60"), "psnr_lo"]) / 2 for s in (0, 1)]
    assert row["image_half_width"] == pytest.approx(np.mean(halves))
    assert "seeds 0, 1" in render_latex(seeds_table(summary, "demo"))


# ----------------------------------------------------------------------------------------- did a change help?


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_dvc_experiments_of_the_demo_compared_by_name(demo):
    """Issue 47, what a user does (docs/dvc-snakemake.md, "Change, run, compare"), in the demo `make repro` built (the
    copy of its workspace, no MLflow): `dvc exp run` of the workspace as it is (nothing re-runs), then of
    `-S overrides.sample.top_k=10`, PUT's sampling and evaluation only; `put compare` of the two experiments by the
    names `dvc exp show` prints (read from git's objects) gives the same table as against the workspace, paired on
    the demo's test images, the sampled mode's K = 50 against K = 10, and says why the demo's 3 photographs give no
    interval. The steps are tests/helpers.py's `compare_experiments`, which test_compare.py runs on a one-stage
    pipeline in the fast suite."""
    from put.compare.results import read_result
    from put.stats.bootstrap import finite_mean

    demo_made(demo)
    copy_ready(demo)
    repo = demo["copy"]
    git(repo, "checkout", "HEAD", "--", "params.yaml")  # as `make repro` left it, had the seed test run here first
    env = {**ENV, "PUT_TRACKING": "0"}
    done = compare_experiments(repo, lambda where, *args: dvc(where, *args, tracking=False),
                               "overrides.sample.top_k=10", ["sample@put", "evaluate@put"], env)
    print(f"\ncompare: {', '.join(f'{step} {seconds:.0f} s' for step, seconds in done['seconds'].items())}")
    assert {"sample@put", "evaluate@put"} <= done["ran"] <= {"config", "sample@put", "evaluate@put"}, done["ran"]
    table = done["table"]
    test_images = len(pd.read_csv(repo / split_dir("demo") / "test.csv"))
    assert len(table) == 2 * 3 * 3 and set(table["modes"]) == {"all", "k50 vs k10"}, table
    assert (table["n"] == test_images).all() and (table["units"] == 3).all()
    assert table["no_interval"].str.contains("too few for an interval").all() and table["lo"].isna().all()
    base, changed = (read_result(name, "demo", "put", repo) for name in ("compare-base", "compare-changed"))
    assert base.info["sampling"]["top_k"] == 50 and changed.info["sampling"]["top_k"] == 10
    cell = [frame.query("mode == @mode and group == '10-60'")["psnr"]
            for frame, mode in ((base.images, "k50"), (changed.images, "k10"))]
    row = table.set_index(["modes", "group", "metric"]).loc[("k50 vs k10", "10-60", "psnr")]
    assert row["difference"] == pytest.approx(finite_mean(cell[1]) - finite_mean(cell[0]))
    # argmax does not depend on K: re-sampled on the same machine, the same results (measured: exactly 0)
    assert (table.loc[table["modes"] == "all", "difference"].abs() < 1e-9).all(), table
    assert done["seconds"]["compare experiments"] < 60


# ----------------------------------------------------------------------------------------- a queued sweep


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_queued_sweep_of_the_demo_keeps_every_run_in_the_workspaces_store(demo, tmp_path):
    """What a lab sweeping K does (docs/dvc-snakemake.md, "Sweeps"), in a copy of the workspace `make repro` built,
    tracking to its mlflow.db: `dvc exp run --queue -S 'overrides.sample.top_k=choice(20,30)'` of PUT's sampling
    and evaluation, run by `dvc queue start -j 2` in DVC's temporary copies. The workspace's store holds each
    experiment's sampling and evaluation runs once, tagged with its experiment and the commit it was queued from;
    nothing of MLflow's is left in .dvc/tmp; `put compare` of the commit and the sweep is one family. (On a loaded
    2-core machine, the same sweep took 482 s and 544 s by hand.)"""
    from mlflow.tracking import MlflowClient

    from put.tracking.workspace import BASELINE_TAG, EXPERIMENT_TAG

    demo_made(demo)
    copy_ready(demo)
    repo = tmp_path / "repo"
    shutil.copytree(demo["copy"], repo, symlinks=True)  # as `make repro` left it (the other tests' experiments aside)
    git(repo, "checkout", "HEAD", "--", "params.yaml")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "the demo made")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    before = mlflow_run_count(repo)
    # K values no other test ran: DVC's run cache would restore their outputs, and a restored stage logs no run
    queued = dvc(repo, "exp", "run", "--queue", "-n", "k", "-S", "overrides.sample.top_k=choice(20,30)",
                 "sample@put", "evaluate@put")
    assert queued.returncode == 0, queued.stdout[-3000:] + queued.stderr[-3000:]
    start = time.monotonic()
    assert dvc(repo, "queue", "start", "-j", "2").returncode == 0
    while re.search(r"Queued|Running", status := dvc(repo, "queue", "status").stdout):
        assert time.monotonic() - start < 1500, status
        time.sleep(5)
    print(f"\nqueued sweep: 2 experiments of sample@put and evaluate@put, 2 workers, {time.monotonic() - start:.0f} s")
    names = ["k-1", "k-2"]
    assert all(re.search(rf"{name}\s.*Success", status) for name in names), status
    client = MlflowClient(f"sqlite:///{repo / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("put-demo")
    runs = client.search_runs([experiment.experiment_id], f"tags.`{EXPERIMENT_TAG}` LIKE 'k-%'", max_results=100)
    found = sorted((r.data.tags[EXPERIMENT_TAG], r.data.tags["put.stage"]) for r in runs)
    assert found == [(name, stage) for name in names for stage in ("evaluate", "sample")], found
    assert {r.data.tags[BASELINE_TAG] for r in runs} == {commit}
    assert all(r.info.status == "FINISHED" and "put.variant" in r.data.tags for r in runs)
    assert mlflow_run_count(repo) == before + 2 * 3  # and a parent run per experiment (its DAG configuration)
    left = [p for p in (repo / ".dvc" / "tmp").rglob("*") if p.name.startswith(("mlflow", "mlruns"))]
    assert left == []
    done = subprocess.run([str(BIN / "python"), "-m", "put", "compare", commit, *names, "--preset", "demo", "--format",
                           "csv"], cwd=repo, capture_output=True, text=True, env={**ENV, "PUT_TRACKING": "0"},
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    table = pd.read_csv(io.StringIO(done.stdout))
    assert table["family"].nunique() == 1 and sorted(set(table["result"])) == names, table

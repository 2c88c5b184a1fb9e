"""`put compare`: the report's paired differences between two results of one preset, read from workspaces, folders,
git revisions and DVC experiments without checking them out, each under its own params.yaml's preset and one
compositing rule's files; one family over everything compared; refusals, in one line naming what differs, of
results with other presets, rules, masks, test images or metric protocols, and of the same files twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from put.cli import main
from put.compare.pairing import compare
from put.compare.results import read_result, read_results
from put.config.evaluation import MetricProtocol
from put.config.paths import (
    METRICS_FILE,
    masks_dir,
    metrics_images_file,
    metrics_info_file,
    path_of,
)
from put.metrics.files import read_images
from put.metrics.per_image import PIXEL_METRICS
from put.report.differences import family_sentence
from put.stats.bootstrap import Bootstrap, difference_interval
from put.stats.differences import paired_differences
from put.stats.multiplicity import adjust
from tests.compare_results import PER_SOURCE, PROTOCOL, SOURCES, STAGE_SCRIPT, TABLE_CELLS, per_image, write_result


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch) -> Path:
    """Two variants of one run, PUT and an ablation 0.3 dB better, in a workspace that is the working directory."""
    write_result(tmp_path, "put", per_image())
    write_result(tmp_path, "tok", per_image(shift=0.3, seed=2), variant="tok")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_paired_numbers_are_the_reports_own(workspace):
    """Two variants of one run: each difference, interval, p-value, n and units exactly as the report's
    paired_differences gives them (its input read as the report reads it), and one family over all 18."""
    results = [read_result(name, "demo", "put") for name in (":put", ":tok")]
    found = compare(results)
    images = {(label, 0): read_images(workspace / path_of(METRICS_FILE, "demo", label)) for label in ("put", "tok")}
    expected = paired_differences(images, PIXEL_METRICS, Bootstrap.of(PROTOCOL), "holm")
    assert len(found) == len(expected) == len(TABLE_CELLS) * len(PIXEL_METRICS)
    keys = ["mode", "group", "metric"]
    mine = found.assign(mode=found["modes"]).set_index(keys).sort_index()
    theirs = expected.set_index(keys).sort_index()
    for column in ("difference", "lo", "hi", "p", "n", "units"):
        np.testing.assert_array_equal(mine[column].to_numpy(float), theirs[column].to_numpy(float), err_msg=column)
    # the report's families are per mode (9 each); the command's is everything it compares (18)
    np.testing.assert_allclose(found["p_adjusted"], adjust(found["p"].to_numpy(), "holm"))
    assert (found["family_size"] == 18).all()
    psnr = found[found["metric"] == "psnr"]
    assert psnr["significant"].all() and (psnr["lo"] > 0).all()  # the planted 0.3 dB is found everywhere
    means = found.set_index(keys).loc[("all", "10-60", "psnr")]
    assert means["mean"] - means["mean_reference"] == pytest.approx(means["difference"])


def test_the_command_prints_a_table_csv_and_json(workspace, capsys):
    assert main(["compare", ":put", ":tok"]) == 0
    table = capsys.readouterr().out
    assert "baseline: :put = workspace ., put" in table and "variant put vs tok" in table
    assert "survives Holm's step-down procedure at 5% over the 18 differences tested" in table
    row = next(line for line in table.splitlines() if re.match(r"\s*k50\s+10-60\s+PSNR", line))
    assert row.rstrip().endswith("120 images, 60 sources") and " * " in row
    assert main(["compare", ":put", ":tok", "--format", "csv"]) == 0
    frame = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    assert list(frame["result"].unique()) == [":tok"] and len(frame) == 18
    assert main(["compare", ":put", ":tok", "--format", "json", "--bins"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["baseline"]["name"] == ":put" and len(record["differences"]) == 18  # no bins in these files


def test_a_sweep_against_one_baseline_is_one_family(tmp_path, monkeypatch, capsys):
    """Three results: each against the first, one Holm family over both (36 differences); the sampled mode pairs
    k50 of the baseline with k10 and k20 of the others."""
    for label, k, shift in (("base", 50, 0.0), ("k10", 10, 0.2), ("k20", 20, 0.0)):
        write_result(tmp_path / label, "put", per_image(shift=shift, seed=k, top_k=k),
                     sampling={"top_k": k, "temperature": 1.0})
    drawn = per_image(seed=20, top_k=20)  # one more sample of one image: no counterpart in the baseline
    write_result(tmp_path / "k20", "put", pd.concat([drawn, drawn.iloc[[0]].assign(sample=1)]),
                 sampling={"top_k": 20, "temperature": 1.0})
    monkeypatch.chdir(tmp_path)
    results = [read_result(name, "demo", "put") for name in ("base", "k10", "k20")]
    found = compare(results)
    assert list(found["variant"].unique()) == ["k10", "k20"] and (found["family_size"] == 36).all()
    np.testing.assert_allclose(found["p_adjusted"], adjust(found["p"].to_numpy(), "holm"))
    assert set(found["modes"]) == {"all", "k50 vs k10", "k50 vs k20"}
    assert found.groupby("variant")["unpaired"].max().to_dict() == {"k10": 0, "k20": 1}
    assert main(["compare", "base", "k10", "k20"]) == 0
    assert "left out: 1 rows of base and k20 without a counterpart" in capsys.readouterr().out


@pytest.mark.parametrize("change, message", [
    (lambda root: write_result(root, "tok", per_image(), MetricProtocol(bootstrap_resamples=3000, ssim_window=11)),
     "their metric protocols differ (ssim_window 51 vs 11)"),
    (lambda root: write_result(root, "tok", per_image(), protocol=PROTOCOL, masks="ffff"),
     "their masks differ (manifest sha256 a1b2 vs manifest sha256 ffff)"),
    (lambda root: write_result(root, "tok", per_image(images=SOURCES * PER_SOURCE - 1)),
     "their test images differ (1 of the all/20-40 cell only in :put, e.g. data/demo/splits/images/test/img_119.png)"),
    (lambda root: write_result(root, "tok", per_image().assign(source="one photo")),
     "their test images' sources differ (data/demo/splits/images/test/img_000.png: 'photo_00' vs 'one photo')"),
    (lambda root: write_result(root, "tok", per_image(), preset="ffhq"), "their presets differ ('demo' vs 'ffhq')"),
    (lambda root: write_result(root, "tok", per_image(), masks=None),
     "which masks :tok was measured on is not recorded"),
], ids=["protocol", "masks", "images", "sources", "preset", "unrecorded masks"])
def test_refusals_name_what_differs(workspace, capsys, change, message):
    change(workspace)
    assert main(["compare", ":put", ":tok"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("put compare: error: cannot pair :put and :tok: " + message), err
    assert len(err.strip().splitlines()) == 1


def test_a_protocol_field_of_a_newer_record_is_compared_too(workspace, capsys):
    """The whole record is compared: a field one record has and the other lacks (an evaluation written after the
    protocol grew one) is a difference."""
    metrics = workspace / path_of(METRICS_FILE, "demo", "tok")
    info = json.loads(metrics_info_file(metrics).read_text())
    info["protocol"]["composite"] = "pasted"
    metrics_info_file(metrics).write_text(json.dumps(info))
    assert main(["compare", ":put", ":tok"]) == 2
    assert "their metric protocols differ (composite not recorded vs 'pasted')" in capsys.readouterr().err


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_results_read_from_git_revisions_and_experiments_without_checkout(tmp_path, monkeypatch, capsys):
    """Two commits (and the second as a DVC experiment's ref, as `dvc exp run` leaves it): compared from git's
    objects while the working tree holds something else, which stays as it was; the masks are told apart by the
    hash each commit's dvc.lock records when the evaluation record has none."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    metrics = path_of(METRICS_FILE, "demo", "put")

    def lock(md5: str) -> None:
        stage = {"outs": [{"path": metrics.as_posix()}], "deps": [{"path": masks_dir("demo").as_posix(), "md5": md5}]}
        (repo / "dvc.lock").write_text(json.dumps({"schema": "2.0", "stages": {"evaluate@put": stage}}))

    write_result(repo, "put", per_image(), masks=None)
    lock("m1.dir")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "baseline")
    write_result(repo, "put", per_image(shift=0.3, seed=5, top_k=10), masks=None)
    git(repo, "commit", "-qam", "top_k 10")
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "update-ref", f"refs/exps/{head[:2]}/{head[2:]}/k10-exp", head)  # DVC's layout of an experiment
    git(repo, "update-ref", "refs/exps/exec/EXEC_HEAD", head)  # DVC's machinery: not an experiment
    (repo / metrics_images_file(metrics)).write_text("not, the, committed, values\n")  # the working tree differs
    monkeypatch.chdir(repo)

    found = compare([read_result(name, "demo", "put") for name in ("HEAD~1", "k10-exp")])
    expected = paired_differences({("a", 0): per_image(), ("b", 0): per_image(shift=0.3, seed=5)},
                                  PIXEL_METRICS, Bootstrap.of(PROTOCOL), reference="a")
    np.testing.assert_allclose(found["difference"], expected["difference"])
    assert read_result("k10-exp", "demo", "put").where == f"DVC experiment k10-exp ({head[:7]}), put; preset " \
        "demo (--preset: no params.yaml), rule raw (its evaluate.known_pixels)"
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == \
        f"M {metrics_images_file(metrics).as_posix()}"

    git(repo, "checkout", "--", metrics_images_file(metrics).as_posix())
    lock("m2.dir")  # a third commit whose masks DVC hashed differently
    git(repo, "commit", "-qam", "other masks")
    assert main(["compare", "HEAD~2", "HEAD"]) == 2
    assert "cannot pair HEAD~2 and HEAD: their masks differ (dvc.lock md5 m1.dir vs dvc.lock md5 m2.dir)" in \
        capsys.readouterr().err
    assert main(["compare", "HEAD", "no-such-exp"]) == 2
    assert "'no-such-exp': not a folder, a git revision or a DVC experiment of" in capsys.readouterr().err
    assert main(["compare", "HEAD", "HEAD~1:tok"]) == 2
    assert "HEAD~1:results/demo/metrics/tok_images.csv: not found in revision HEAD~1" in capsys.readouterr().err


def new_repo(root: Path) -> Path:
    """An empty git repository at `root`, with a committer."""
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    return root


def experiment(repo: Path, name: str) -> str:
    """HEAD kept as a DVC experiment `name` of its parent (DVC's layout: refs/exps/<baseline's 2>/<38>/<name>) and
    HEAD moved back to that baseline, as `dvc exp run` leaves the repository: the experiment's commit."""
    head, base = git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", "HEAD~1")
    git(repo, "update-ref", f"refs/exps/{base[:2]}/{base[2:]}/{name}", head)
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    return head


def commit_params(repo: Path, text: str | None, message: str) -> None:
    """params.yaml set to `text` (None: removed) and committed."""
    if text is None:
        (repo / "params.yaml").unlink(missing_ok=True)
    else:
        (repo / "params.yaml").write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message, "--allow-empty")


def test_an_experiment_that_changed_the_preset_is_read_under_its_own(tmp_path, monkeypatch, capsys):
    """`dvc exp run -n tp -S preset=demo_tpami config`: the experiment's commit says demo_tpami and still holds the
    demo files it was branched from. Compared with a demo experiment it is refused, naming tp and where each preset
    came from, whether or not --preset names one; never +0 from the stale demo files."""
    repo = new_repo(tmp_path / "repo")
    write_result(repo, "put", per_image())
    commit_params(repo, "preset: demo\n", "demo")
    write_result(repo, "put", per_image(shift=0.3, seed=3))
    commit_params(repo, "preset: demo\n", "base")
    experiment(repo, "base")
    commit_params(repo, "preset: demo_tpami\n", "tp: the config stage only")
    experiment(repo, "tp")
    (repo / "params.yaml").write_text("preset: demo_tpami\n")  # dvc exp run leaves the workspace so
    monkeypatch.chdir(repo)
    assert main(["compare", "base", "tp", "--preset", "demo"]) == 2
    err = capsys.readouterr().err
    assert err == "put compare: error: tp: preset demo_tpami (its params.yaml) vs --preset demo: a result is read " \
                  "under its own params.yaml's preset; compare results of one preset\n"
    assert main(["compare", "base", "tp"]) == 2
    err = capsys.readouterr().err
    assert err == "put compare: error: cannot pair base and tp: tp: preset demo_tpami (its params.yaml) vs base: " \
                  "demo (its params.yaml); compare results of one preset\n"


def test_revisions_of_another_preset_than_the_workspace_are_read_under_theirs(tmp_path, monkeypatch, capsys):
    """Two experiments of ffhq compared from a workspace whose params.yaml says demo: each read under its own
    params.yaml (results/ffhq/...), the preset shown for each."""
    repo = new_repo(tmp_path / "repo")
    write_result(repo, "put", per_image(), under="ffhq")
    commit_params(repo, "preset: ffhq\n", "ffhq")
    write_result(repo, "put", per_image(shift=0.3, seed=4), under="ffhq")
    commit_params(repo, "preset: ffhq\noverrides: {}\n", "ffhq, better")
    experiment(repo, "better")
    (repo / "params.yaml").write_text("preset: demo\n")
    monkeypatch.chdir(repo)
    results = read_results(["HEAD", "better"], "put")
    assert [r.preset for r in results] == ["ffhq", "ffhq"]
    assert results[1].where.endswith("put; preset ffhq (its params.yaml), rule raw (its evaluate.known_pixels)")
    expected = paired_differences({("a", 0): per_image(), ("b", 0): per_image(shift=0.3, seed=4)},
                                  PIXEL_METRICS, Bootstrap.of(PROTOCOL), reference="a")
    np.testing.assert_allclose(compare(results)["difference"], expected["difference"])
    assert main(["compare", "HEAD", "better", "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert "preset ffhq (its params.yaml)" in record["baseline"]["where"]


@pytest.mark.parametrize("params, message", [
    ("preset: nosuch\n", "old:params.yaml: preset 'nosuch' is not a known preset (one of demo, ffhq, "),
    ("- preset\n", "old:params.yaml: expected a mapping (parameters such as `preset: demo`) at the top level, got "
                   "list"),
    ("preset: [demo\n", "old:params.yaml: line 2: not valid YAML: "),
    ("preset: demo\npreset: ffhq\n", "old:params.yaml: line 2: key 'preset' given twice (first at line 1)"),
], ids=["unknown preset", "not a mapping", "not YAML", "preset twice"])
def test_a_revision_whose_params_yaml_cannot_say_its_preset_is_named(tmp_path, monkeypatch, capsys, params,
                                                                       message):
    repo = new_repo(tmp_path / "repo")
    write_result(repo, "put", per_image())
    commit_params(repo, "preset: demo\n", "demo")
    commit_params(repo, params, "broken params")
    git(repo, "tag", "old")
    monkeypatch.chdir(repo)
    assert main(["compare", "HEAD~1", "old"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("put compare: error: " + message), err
    assert len(err.strip().splitlines()) == 1


def test_a_revision_without_params_yaml_is_read_under_the_default_or_the_preset_named(tmp_path, monkeypatch,
                                                                                       capsys):
    """A commit without params.yaml: its stages ran with the defaults, so it is read under the default preset, or
    under --preset; the source of each side's preset is shown. The workspace's params.yaml is not its."""
    repo = new_repo(tmp_path / "repo")
    write_result(repo, "put", per_image())
    write_result(repo, "put", per_image(), under="ffhq")
    commit_params(repo, None, "no params.yaml")
    write_result(repo, "put", per_image(shift=0.3, seed=4))
    commit_params(repo, "preset: demo\n", "demo, better")
    (repo / "params.yaml").write_text("preset: ffhq\n")
    monkeypatch.chdir(repo)
    old, new = read_results(["HEAD~1", "HEAD"], "put")
    assert old.preset == new.preset == "demo" and "preset demo (the default: no params.yaml)" in old.where
    assert main(["compare", "HEAD~1", "HEAD"]) == 0
    assert "preset demo (the default: no params.yaml)" in capsys.readouterr().out
    assert main(["compare", "HEAD~1", "HEAD", "--preset", "ffhq"]) == 2  # HEAD's own says demo
    assert "HEAD: preset demo (its params.yaml) vs --preset ffhq" in capsys.readouterr().err
    assert read_result("HEAD~1", "ffhq", "put").where.endswith("preset ffhq (--preset: no params.yaml), rule raw "
                                                               "(its evaluate.known_pixels)")


def test_an_experiment_name_two_baselines_share_is_named_and_its_ref_reads_it(tmp_path, monkeypatch, capsys):
    """`dvc exp run -n dup` on two baselines: the name alone is refused, listing both refs; a ref reads one. A name
    that is no experiment, revision or folder is refused naming it."""
    repo = new_repo(tmp_path / "repo")
    write_result(repo, "put", per_image())
    commit_params(repo, "preset: demo\n", "demo")
    refs = []
    for shift in (0.3, 0.6):
        write_result(repo, "put", per_image(shift=shift, seed=5))
        commit_params(repo, "preset: demo\n", f"dup {shift}")
        base = git(repo, "rev-parse", "HEAD~1")
        experiment(repo, "dup")
        refs.append(f"refs/exps/{base[:2]}/{base[2:]}/dup")
        commit_params(repo, "preset: demo\n# a new baseline\n", "next baseline")
    monkeypatch.chdir(repo)
    assert main(["compare", "HEAD", "dup"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"put compare: error: 'dup': 2 DVC experiments have this name ({', '.join(sorted(refs))}); " \
                          "name one by its ref or commit", err
    assert read_result(refs[1], None, "put").info["preset"] == "demo"
    assert main(["compare", "HEAD", "no-such-exp"]) == 2
    assert "error: 'no-such-exp': not a folder, a git revision or a DVC experiment of" in capsys.readouterr().err


def test_the_same_files_named_twice_are_refused(tmp_path, monkeypatch, capsys):
    """A commit under two names, the working directory under two names: a result compared with itself (all
    zeros), refused naming both; the working tree against its own commit is a comparison (it may differ)."""
    repo = new_repo(tmp_path / "repo")
    write_result(repo, "put", per_image())
    commit_params(repo, "preset: demo\n", "demo")
    git(repo, "branch", "other")
    monkeypatch.chdir(repo)
    images = metrics_images_file(path_of(METRICS_FILE, "demo", "put")).as_posix()
    assert main(["compare", "HEAD", "other"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"put compare: error: HEAD and other: both name {images} of commit "), err
    assert main(["compare", ":put", f"{repo}:put"]) == 2
    assert f"error: :put and {repo}:put: both name {repo / images}: a result compared with itself" in \
        capsys.readouterr().err
    assert main(["compare", "HEAD", "HEAD"]) == 2
    assert "error: HEAD and HEAD: both name" in capsys.readouterr().err
    assert main(["compare", "HEAD", "."]) == 0


def pasted_and_raw(root: Path) -> None:
    """PUT (raw by default) and a classical method that pastes the known pixels itself, each with its pasted files:
    pasting lifts PUT's PSNR by 1 dB (its known region redrawn), the outside method's not at all."""
    write_result(root, "put", per_image())
    write_result(root, "put", per_image(shift=1.0), pasted=True)
    write_result(root, "external_telea", per_image(shift=1.5, seed=7))
    write_result(root, "external_telea", per_image(shift=1.5, seed=7), pasted=True)
    write_result(root, "tok", per_image(shift=0.3, seed=2))


def test_put_against_an_outside_method_is_compared_under_the_pasted_rule(tmp_path, monkeypatch, capsys):
    """`:put :external_telea`: raw PUT against a method that pastes would credit the rule (+1.5 dB); the pasted
    files on both sides give the methods' difference (+0.5), shown with each side's rule; --rule raw is refused,
    naming both sides."""
    pasted_and_raw(tmp_path)
    monkeypatch.chdir(tmp_path)
    results = read_results([":put", ":external_telea"], "put")
    assert [r.rule for r in results] == ["pasted", "pasted"]
    found = compare(results)
    expected = paired_differences({("a", 0): per_image(shift=1.0), ("b", 0): per_image(shift=1.5, seed=7)},
                                  PIXEL_METRICS, Bootstrap.of(PROTOCOL), reference="a")
    np.testing.assert_allclose(found["difference"], expected["difference"])
    assert (found["rule"] == "pasted").all()
    assert main(["compare", ":put", ":external_telea"]) == 0
    out = capsys.readouterr().out
    assert "baseline: :put = workspace ., put; preset demo (the default: no params.yaml), rule pasted (PUT against " \
           "another method: Table 1's rule)" in out
    assert main(["compare", ":put", ":external_telea", "--format", "csv"]) == 0
    assert set(pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))["rule"]) == {"pasted"}
    assert main(["compare", ":put", ":external_telea", "--rule", "raw"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("put compare: error: --rule raw: :put (PUT's output as its decoder returns it) against "
                          ":external_telea (another method's results, the input's known pixels pasted back by the "
                          "method itself) compares compositing rules"), err
    assert len(err.strip().splitlines()) == 1


def test_the_rule_selects_the_files_of_revisions_too(tmp_path, monkeypatch, capsys):
    """--rule pasted reads every result's pasted/ files (a revision's from git, a folder of metrics files' from its
    pasted/ folder); a result without them is named; main files of two rules are refused without --rule."""
    repo = new_repo(tmp_path / "repo")
    pasted_and_raw(repo)
    commit_params(repo, "preset: demo\n", "base")
    write_result(repo, "put", per_image(shift=0.2, seed=9))
    write_result(repo, "put", per_image(shift=2.0, seed=9), pasted=True)
    commit_params(repo, "preset: demo\n", "change")
    monkeypatch.chdir(repo)
    raw = compare(read_results(["HEAD~1", "HEAD"], "put"))
    pasted = compare(read_results(["HEAD~1", "HEAD"], "put", rule="pasted"))
    for found, before, after in ((raw, 0.0, 0.2), (pasted, 1.0, 2.0)):
        expected = paired_differences({("a", 0): per_image(shift=before), ("b", 0): per_image(shift=after, seed=9)},
                                      PIXEL_METRICS, Bootstrap.of(PROTOCOL), reference="a")
        np.testing.assert_allclose(found["difference"], expected["difference"])
    assert (raw["rule"] == "raw").all() and (pasted["rule"] == "pasted").all()
    folder = repo / "results" / "demo" / "metrics"
    by_name = read_results([f"{folder}:put", f"{folder}:external_telea"], "put", rule="pasted")
    assert [r.rule for r in by_name] == ["pasted", "pasted"]
    assert main(["compare", "HEAD", "HEAD:tok", "--rule", "pasted"]) == 2
    assert "error: HEAD:results/demo/metrics/pasted/tok_images.csv: not found in revision HEAD (" in \
        capsys.readouterr().err

    write_result(repo, "tok", per_image(shift=0.3, seed=2), protocol=PROTOCOL.model_copy(
        update={"known_pixels": "pasted"}))  # its main files scored pasted
    assert main(["compare", ":put", ":tok"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("put compare: error: cannot pair :put and :tok: :tok: rule pasted (its "
                          "evaluate.known_pixels) vs :put: raw -- compare under one rule"), err
    assert main(["compare", ":put", ":tok", "--rule", "raw"]) == 2
    assert f"error: :tok: {Path('.') / 'results/demo/metrics/tok_images.csv'} is scored under rule pasted" in \
        capsys.readouterr().err
    assert [r.rule for r in read_results([":put", ":tok"], "put", rule="pasted")] == ["pasted", "pasted"]


def test_the_working_directorys_params_file_applies_to_it_only(workspace, capsys):
    """--params replaces the working directory's params.yaml (for `.` only: a revision or folder has its own)."""
    (workspace / "mine.yaml").write_text("preset: ffhq\n")
    assert main(["compare", ":put", ":tok", "--params", "mine.yaml"]) == 2
    assert "error: results/ffhq/metrics/put_images.csv: not found in workspace . (expected the evaluation of 'put' " \
           "for preset ffhq (--params mine.yaml) (is it evaluated there" in capsys.readouterr().err
    assert main(["compare", ":put", ":tok", "--params", "none.yaml"]) == 2
    assert "error: none.yaml: parameter file not found (--params, the working directory's)" in \
        capsys.readouterr().err
    folder = workspace / "results" / "demo" / "metrics"
    assert main(["compare", f"{folder}:put", f"{folder}:tok", "--params", "mine.yaml"]) == 2
    assert "error: --params mine.yaml: the working directory's parameter file, but no result is read from the " \
           "working directory" in capsys.readouterr().err


def test_a_folder_of_metrics_files_and_an_mlflow_run(workspace, tmp_path, mlflow_db, capsys):
    """A folder holding the metrics files themselves (no workspace around them) compares too, and --mlflow logs the
    comparison as a run of the preset's experiment with each difference as a metric."""
    from mlflow.tracking import MlflowClient

    folder = workspace / "results" / "demo" / "metrics"
    assert main(["compare", f"{folder}:put", f"{folder}:tok", "--mlflow"]) == 0
    captured = capsys.readouterr()
    assert f"baseline: {folder}:put = folder {folder}, put" in captured.out
    run_id = re.search(r"logged to MLflow: run (\w+)", captured.err).group(1)
    run = MlflowClient(mlflow_db).get_run(run_id)
    assert run.data.tags["put.level"] == "comparison" and run.info.status == "FINISHED"
    assert run.data.params["result_1"] == f"folder {folder}, tok; preset demo (its evaluation record), rule raw " \
        "(its evaluate.known_pixels)"
    key = "result_1/top-K/10-60/psnr/difference"
    assert run.data.metrics[key] == pytest.approx(compare(
        [read_result(f"{folder}:{v}", "demo", "put") for v in ("put", "tok")]).set_index(
        ["modes", "group", "metric"]).loc[("k50", "10-60", "psnr"), "difference"])


def test_compare_does_not_import_torch():
    """Seconds, not the time it takes to load torch: the command needs numbers only."""
    loaded = subprocess.run([sys.executable, "-c", "import sys, put.commands.compare, put.compare.output, "
                             "put.compare.pairing, put.compare.results, put.tracking.comparison; "
                             "print('torch' in sys.modules)"], capture_output=True, text=True)
    assert loaded.stdout.strip() == "False", loaded.stderr


def test_two_dvc_experiments_compared_by_name_as_the_slow_test_does_on_the_demo(tmp_path):
    """The slow test's steps (tests/helpers.py `compare_experiments`) on a one-stage DVC pipeline that writes an
    evaluation's files from a sampling parameter: `dvc exp run` of the workspace and of `-S top_k=10`, compared by
    the experiments' names and against the workspace; top_k 10 is 0.5 dB better in the sampled mode, the same in
    the deterministic one."""
    from tests.helpers import ROOT, compare_experiments

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "evaluate.py").write_text(STAGE_SCRIPT.format(protocol=repr(PROTOCOL.model_dump())))
    (repo / "params.yaml").write_text("top_k: 50\n")
    metrics = path_of(METRICS_FILE, "demo", "put")
    (repo / "dvc.yaml").write_text(json.dumps({"stages": {"evaluate": {
        "cmd": f"{sys.executable} evaluate.py", "deps": ["evaluate.py"], "params": ["top_k"],
        "outs": [{metrics_images_file(metrics).as_posix(): {"cache": False}},
                 {metrics_info_file(metrics).as_posix(): {"cache": False}}]}}}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PUT_TRACKING": "0"}
    bin_dir = Path(sys.executable).parent

    def dvc(where: Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(bin_dir / "dvc"), *args], cwd=where, capture_output=True, text=True, env=env,
                              timeout=300)

    for command in (["git", "init", "-q"], ["git", "config", "user.email", "t@example.com"],
                    ["git", "config", "user.name", "t"], [str(bin_dir / "dvc"), "init", "-q"],
                    [str(bin_dir / "dvc"), "repro", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        subprocess.run(command, cwd=repo, check=True, capture_output=True, env=env, timeout=300)
    done = compare_experiments(repo, dvc, "top_k=10", ["evaluate"], env)
    assert done["ran"] == {"evaluate"}
    table = done["table"].set_index(["modes", "metric"])
    assert table.loc[("all", "psnr"), "difference"] == pytest.approx(0, abs=0.2)
    assert table.loc[("k50 vs k10", "psnr"), "difference"] == pytest.approx(0.5, abs=0.2)
    assert table.loc[("k50 vs k10", "psnr"), "significant"] and (table["n"] == 120).all()


# --------------------------------------------------------------------------------------------- misuse

def cells(frame: pd.DataFrame, *modes: str, bins: bool = False) -> pd.DataFrame:
    """Only the rows of `modes`, with fine-bin rows (mode `bins`) added from the first cell when asked."""
    kept = frame[frame["mode"].isin(modes)]
    fine = frame[(frame["mode"] == "all") & (frame["group"] == "20-40")].assign(mode="bins", group="20-30")
    return pd.concat([kept, fine]) if bins else kept


@pytest.mark.parametrize("options", [[], ["--format", "csv"], ["--format", "json"], ["--mlflow"]],
                         ids=["table", "csv", "json", "mlflow"])
def test_results_sharing_no_cell_are_refused_in_every_format(workspace, mlflow_db, capsys, options):
    """A deterministic method's `all` beside a sampled one's `k50` (both with fine bins): no mode and mask group in
    common, refused in one line whatever the output, nothing printed and nothing logged."""
    write_result(workspace, "put", cells(per_image(), "all", bins=True))
    write_result(workspace, "tok", cells(per_image(shift=0.3, seed=2), "k50", bins=True), variant="tok")
    assert main(["compare", ":put", ":tok", *options]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured.err
    assert captured.err.strip() == ("put compare: error: cannot pair :put and :tok: no mode and mask group in common "
                                    "(:put has all 20-40, 40-60, 10-60; :tok has k50 20-40, 40-60, 10-60); both "
                                    "have the fine hole-ratio bins, which --bins compares")


def test_a_partial_overlap_names_the_cells_left_out(workspace, capsys):
    """A result with the deterministic mode only, against a baseline with both: the shared mode is compared, and
    every output says which cells were left out (not counted as unpaired samples)."""
    write_result(workspace, "tok", cells(per_image(shift=0.3, seed=2), "all"), variant="tok")
    line = "left out: k50 20-40, 40-60, 10-60 of :put (not in :tok)"
    assert main(["compare", ":put", ":tok"]) == 0
    table = capsys.readouterr().out
    assert line in table and "rows of :put and :tok without a counterpart" not in table
    assert main(["compare", ":put", ":tok", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == line
    frame = pd.read_csv(pd.io.common.StringIO(captured.out))
    assert set(frame["modes"]) == {"all"} and (frame["unpaired"] == 0).all() and len(frame) == 9
    assert main(["compare", ":put", ":tok", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["left_out"] == [line]


def test_an_infinite_psnr_drops_the_pair_from_both_sides(workspace, capsys):
    """One perfect fill (PSNR inf) on the baseline's side: the difference, both means and the interval are over
    the 119 pairs where both are finite, n says 119 and the table says one was left out."""
    frame = per_image()
    perfect = frame.index[(frame["mode"] == "all") & (frame["group"] == "20-40")][7]
    frame.loc[perfect, "psnr"] = np.inf
    write_result(workspace, "put", frame)
    found = compare([read_result(name, "demo", "put") for name in (":put", ":tok")]).set_index(
        ["modes", "group", "metric"])
    row = found.loc[("all", "20-40", "psnr")]
    a, b = (f[(f["mode"] == "all") & (f["group"] == "20-40")].drop(index=perfect)
            for f in (per_image(shift=0.3, seed=2), frame))
    assert row["difference"] == pytest.approx(a["psnr"].mean() - b["psnr"].mean(), abs=1e-12)
    assert row["mean"] - row["mean_reference"] == pytest.approx(row["difference"], abs=1e-12)
    assert (row["n"], row["dropped"], row["units"]) == (119, 1, 60)
    bounds = difference_interval([a["psnr"].to_numpy()], [a["source"].to_numpy()], [b["psnr"].to_numpy()],
                                 [b["source"].to_numpy()], Bootstrap.of(PROTOCOL), images=119)
    assert (row["lo"], row["hi"], row["p"]) == pytest.approx((bounds.lo, bounds.hi, bounds.p))
    others = found.drop(index=("all", "20-40", "psnr"))
    assert (others["dropped"] == 0).all() and (others["n"] == 120).all()
    assert main(["compare", ":put", ":tok"]) == 0
    table = capsys.readouterr().out
    shown = next(line for line in table.splitlines() if re.match(r"\s*all\s+20-40\s+PSNR", line))
    assert shown.rstrip().endswith("119 images, 60 sources, 1 not finite")
    assert "not finite: pairs left out of both sides" in table


def test_the_reports_differences_pair_finite_values_and_say_so():
    """The report's paired differences (Tables 1 and 3, the generations table, differences.csv): a pair with an
    infinite value on one side or NaN on the other is left out of both; the caption counts what was left out and
    the n used."""
    put, tok = per_image(), per_image(shift=0.3, seed=2)
    cell = put.index[(put["mode"] == "k50") & (put["group"] == "40-60")]
    put.loc[cell[:2], "psnr"] = np.inf
    tok.loc[cell[2], "psnr"] = np.nan
    found = paired_differences({("put", 0): put, ("tok", 0): tok}, PIXEL_METRICS, Bootstrap.of(PROTOCOL))
    row = found.set_index(["mode", "group", "metric"]).loc[("k50", "40-60", "psnr")]
    kept = cell[3:]
    assert row["difference"] == pytest.approx(tok.loc[kept, "psnr"].mean() - put.loc[kept, "psnr"].mean(), abs=1e-12)
    assert (row["n"], row["dropped"]) == (117, 3)
    assert int(found["dropped"].sum()) == 3
    sentence = family_sentence(found, "holm", 0.95, "the ablation differs from PUT")
    assert sentence.endswith("each difference is over the pairs where both values are finite: 1 of them leave out 3 "
                             "pairs with an infinite (a perfect fill's PSNR) or missing value, n = 117 images.")
    assert "leave out" not in family_sentence(found[found["dropped"] == 0], "holm", 0.95, "x")


@pytest.mark.parametrize("value", [np.inf, np.nan], ids=["infinite", "nan"])
def test_a_cell_without_a_finite_pair_has_a_row_saying_why(workspace, capsys, value):
    """Every PSNR of a cell infinite (a method that copies the ground truth) or missing on one side: that
    difference has no value, no interval and no mark, and the table says why; the other 17 are tested."""
    frame = per_image(shift=0.3, seed=2)
    frame.loc[(frame["mode"] == "all") & (frame["group"] == "20-40"), "psnr"] = value
    write_result(workspace, "tok", frame, variant="tok")
    found = compare([read_result(name, "demo", "put") for name in (":put", ":tok")])
    row = found.set_index(["modes", "group", "metric"]).loc[("all", "20-40", "psnr")]
    assert np.isnan(row["difference"]) and np.isnan(row["p"]) and not row["significant"]
    assert (row["n"], row["dropped"]) == (0, 120) and (found["family_size"] == 17).all()
    reason = "no pair of finite values (120 of 120 pairs: a value is infinite, e.g. a perfect fill's PSNR, or missing"
    assert row["no_interval"].startswith(reason)
    assert main(["compare", ":put", ":tok"]) == 0
    assert f"no interval, no mark: {reason}" in capsys.readouterr().out


def test_a_result_compared_with_itself_is_refused(workspace, capsys):
    """The same result twice, by one name or by two: refused in one line naming both."""
    images = metrics_images_file(workspace / path_of(METRICS_FILE, "demo", "put"))
    assert main(["compare", ":put", ":put"]) == 2
    assert capsys.readouterr().err.strip() == f"put compare: error: :put and :put: both name {images}: a result " \
        "compared with itself"
    assert main(["compare", ":put", ":tok", ".:put"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"put compare: error: :put and .:put: both name {images}: a result compared with itself"


def test_a_copy_of_the_baseline_differs_by_exactly_zero(workspace, tmp_path):
    """The baseline's files copied to another folder (another result with the same values): every difference is
    0 with a zero-width interval, p = 1, nothing marked."""
    write_result(tmp_path / "copy", "put", per_image())
    found = compare([read_result(name, "demo", "put") for name in (":put", str(tmp_path / "copy"))])
    assert len(found) == 18 and (found["difference"] == 0).all() and (found["lo"] == 0).all()
    assert (found["hi"] == 0).all() and (found["p"] == 1).all() and not found["significant"].any()


def test_results_without_a_test_image_in_common_are_refused(workspace, capsys):
    """Two results on disjoint test images: refused in one line, not an empty comparison."""
    other = per_image(shift=0.3, seed=2)
    write_result(workspace, "tok", other.assign(image=other["image"].str.replace("img_", "other_")), variant="tok")
    assert main(["compare", ":put", ":tok"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("put compare: error: cannot pair :put and :tok: their test images differ (120 of the "
                          "all/20-40 cell only in :put") and len(err.strip().splitlines()) == 1


def test_a_rerun_with_the_same_arguments_prints_the_same(workspace, capsys):
    """The bootstrap is seeded by the protocol: the same command twice prints the same table and CSV."""
    outputs = []
    for options in ([], [], ["--format", "csv"], ["--format", "csv"]):
        assert main(["compare", ":put", ":tok", *options]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and outputs[2] == outputs[3]


def test_a_row_repeated_in_a_per_image_file_is_refused(workspace, capsys):
    """A per-image file holding one row twice (concatenated by hand): pairing by row would count it twice, so it
    is refused in one line naming the result and the row."""
    frame = per_image(shift=0.3, seed=2)
    write_result(workspace, "tok", pd.concat([frame, frame.iloc[[5]]]), variant="tok")
    assert main(["compare", ":put", ":tok"]) == 2
    images = metrics_images_file(workspace / path_of(METRICS_FILE, "demo", "tok"))
    assert capsys.readouterr().err.strip() == (
        f"put compare: error: {images} (:tok): 2 per-image rows share their mode, group, image and sample (e.g. all "
        "20-40 data/demo/splits/images/test/img_005.png 0): each row is paired by them, so each must be once")


@pytest.mark.parametrize("column, value, why", [
    ("psnr", "abc", "psnr 'abc' is not a number"),
    ("ssim", 7.5, "ssim 7.5 is outside [-1, 1]"),
    ("mae", -3, "mae -3.0 is outside [0, 1]"),
    ("psnr", 1e308, "psnr 1e+308 is outside [0, 125] (or +inf)"),
    ("psnr", -np.inf, "psnr -inf is outside [0, 125] (or +inf)"),
    ("image", np.nan, "image nan is empty"),
    ("sample", 1.5, "sample 1.5 is not a sample number"),
])
def test_a_per_image_value_that_no_evaluation_writes_is_refused_naming_its_row(workspace, capsys, column, value,
                                                                              why):
    """A hand-edited or truncated per-image file (a word, an impossible SSIM or MAE, a PSNR no 8-bit image gives,
    a row of commas): one line naming the file, the row and the value, never a traceback or a number."""
    frame = per_image(shift=0.3, seed=2).astype({column: object})
    frame.loc[4, column] = value
    write_result(workspace, "tok", frame, variant="tok")
    assert main(["compare", ":put", ":tok"]) == 2
    err = capsys.readouterr().err.strip()
    images = metrics_images_file(path_of(METRICS_FILE, "demo", "tok"))
    assert err.startswith(f"put compare: error: {images}: row 5: {why} (1 row(s) so)") and "\n" not in err, err


def test_a_folder_without_the_files_asked_for_names_no_empty_preset(workspace, tmp_path, capsys):
    """A folder of metrics files without pasted/ (or without its record): the missing file named, and no blank
    where a preset would be (the folder's record, which names it, is what is missing)."""
    folder = tmp_path / "np"
    folder.mkdir()
    metrics = workspace / path_of(METRICS_FILE, "demo", "tok")
    for name in (metrics_images_file(metrics).name,):
        (folder / name).write_bytes((metrics.parent / name).read_bytes())
    for rule in ("pasted", "raw"):
        assert main(["compare", ":put", f"{folder}:tok", "--rule", rule]) == 2
        err = capsys.readouterr().err
        assert "not found in" in err and "preset  " not in err, err

"""The code-dependency test of both front ends (slow): from a state where every stage is up to date, an edit of a source
file or of a parameter's value makes exactly the stages that use it out of date, in DVC and in Snakemake. A file of
its own: `make test-slow` runs each slow test file on one worker (--dist loadfile), this one beside the demo's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from put.config import TPAMI_VARIANT
from put.config.params import load_params
from put.dag.declaration import CONFIG, stage
from put.dag.dvc_yaml import instance_command
from put.dag.graph import downstream, instances, output_paths
from tests.helpers import BIN, ENV, planned_jobs, snakemake, working_copy


def placeholder_outputs(repo: Path) -> None:
    """Stand-ins for the outputs of every stage but `config` (the code-dependency test runs only that one), the
    committed params.yaml's `external` entries included."""
    for declared, variant in instances(load_params(repo / "params.yaml")):
        if declared is CONFIG:
            continue
        for out, path in zip(declared.outputs.values(), output_paths(declared, variant, "demo")):
            target = repo / path
            if out.directory:
                target.mkdir(parents=True, exist_ok=True)
                (target / "placeholder").write_text("x")
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("{}")


def dvc_status(repo: Path) -> set[str]:
    """The stages `dvc status` lists."""
    status = subprocess.run([str(BIN / "dvc"), "status", "--json"], cwd=repo, capture_output=True, text=True,
                            env=ENV, timeout=300)
    assert status.returncode == 0, status.stderr[-2000:]
    return set(json.loads(status.stdout or "{}"))


def out_of_date(repo: Path) -> tuple[set[str], set[str]]:
    """(stages `dvc status` lists, jobs `snakemake --dry-run` plans)."""
    plan = snakemake(repo, "-n", "-p", "--cores", "1")
    assert plan.returncode == 0, plan.stderr[-3000:]
    return dvc_status(repo), set(planned_jobs(plan.stdout))


def resolve(repo: Path) -> None:
    """What the `config` stage runs: the resolved parameters and the stage commands' code versions."""
    command = instance_command(CONFIG, None, "demo", load_params(repo / "params.yaml"))
    done = subprocess.run([sys.executable, "-m", "put", *command], cwd=repo, env=ENV, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def edited(path: Path, old: str, new: str):
    """Edit a file for the duration of a `with` block; its content and time stamp come back afterwards."""
    class Edit:
        def __enter__(self):
            self.text, self.stat = path.read_text(), path.stat()
            assert old in self.text, f"{old!r} not in {path}"
            path.write_text(self.text.replace(old, new, 1))

        def __exit__(self, *exc):
            path.write_text(self.text)
            os.utime(path, ns=(self.stat.st_atime_ns, self.stat.st_mtime_ns))
    return Edit()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_an_edit_makes_exactly_the_stages_that_use_it_out_of_date(tmp_path):
    """Both front ends, from a state where every stage is up to date (placeholder outputs, recorded as such)."""
    repo = working_copy(tmp_path / "repo")
    run = dict(cwd=repo, env=ENV, capture_output=True, text=True, timeout=600)
    resolve(repo)
    placeholder_outputs(repo)
    assert subprocess.run([str(BIN / "dvc"), "commit", "--force", "--quiet"], **run).returncode == 0
    assert snakemake(repo, "--touch", "--forceall", "--cores", "1", "all").returncode == 0
    assert out_of_date(repo) == (set(), set())

    params = load_params(repo / "params.yaml")
    committed = instances(params)  # with the demo's `external` entries
    per_variant = lambda name: {s.key(v) for s, v in committed if s.name == name}  # noqa: E731
    training_onwards = ({"masks", "frontier", "frontier_tpami", "report"} | per_variant("train_pvqvae")
                        | per_variant("train_transformer") | per_variant("sample") | per_variant("evaluate")
                        | per_variant("external") | per_variant("evaluate_external"))
    code_edits = {
        "put/config/presets.py": {s.key(v) for s, v in committed},  # every stage reads its settings through it
        "put/masks/generate.py": training_onwards,        # masks, training masks, and readers of the manifest
        "put/report/plots.py": {"frontier", "frontier_tpami", "report"},  # the stages that draw figures
    }
    for name, expected in code_edits.items():
        with edited(repo / name, '"""', '"""Edited. '):
            # DVC: the `config` stage depends on every source file, and writes each stage command's code version,
            # which the stages track (put/dag/code.py); Snakemake: each rule on its command's sources.
            status, plan = out_of_date(repo)
            resolve(repo)
            resolved = dvc_status(repo)
        assert status == {"config"}, name
        assert resolved == {"config"} | expected, name
        assert plan == downstream(expected, params=params), name
        resolve(repo)
    assert out_of_date(repo) == (set(), set())

    # A parameter's value: DVC's `config` stage re-resolves it; then only the stages reading it are out of date.
    # The demo preset's transformer learning rate: not the tpami variant's, which trains with its TPAMI preset's.
    readers = per_variant("train_transformer") - {stage("train_transformer").key(TPAMI_VARIANT)}
    with edited(repo / "put/config/presets.yaml", "lr: 1.0e-3", "lr: 2.0e-3"):
        status, plan = out_of_date(repo)
        assert status == {"config"}
        # Snakemake resolves at parse time: `config` (its input changed), the rules reading the value, and what
        # follows them -- not every stage below `config`, since no rule but the report reads its output.
        assert plan == {"config"} | downstream({"report"} | readers, params=params)
        resolve(repo)
        status = dvc_status(repo)
        # The report reads the whole resolved file (it prints it).
        assert status == {"config", "report"} | readers

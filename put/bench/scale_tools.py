"""The bookkeeping around the stages at a size (`put bench scale`): DVC caching and checking each output
(`dvc add`, `dvc status`), Snakemake planning the DAG (`snakemake -n`), and MLflow logging one evaluation."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from put.bench.scale_data import LABEL
from put.bench.scale_run import STAGES, measured_run, output_of
from put.config.params import load_params
from put.dag.declaration import stage
from put.dag.dvc_yaml import instance_command

# the stage outputs DVC caches, by the scale benchmark's stage key (the folders, not the small metrics files)
DVC_OUTPUTS = ("split", "prepare", "masks", "external")
# what `snakemake -n` needs beside params.yaml in a workspace: the Snakefile and what it reads (copies: the DAG's
# code inputs are paths under the Snakefile's folder)
SNAKEMAKE_FILES = ("Snakefile", "workflow", "slurm", "put", "reports/benchmarks")  # the last: the report's input


def _tool(name: str) -> str:
    """A tool of this environment (beside its Python), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else (shutil.which(name) or name)


def bookkeeping(workspace: Path, params_file: Path, repo: Path, log: Path, env: dict,
                ran: tuple[str, ...]) -> dict:
    """Rows of the tools' costs at this size, each with the command measured (of the stages that `ran`)."""
    params = load_params(params_file)
    outputs = {key: output_of(instance_command(stage(name), instance, params.preset, params))
               for key, name, instance in STAGES}
    rows: dict[str, dict] = {}
    # MLflow: the evaluation's logging alone, as the stage ends with it (or `put track` after a skipped stage)
    evaluate = instance_command(stage("evaluate_external"), "telea", params.preset, params)
    masks = evaluate[evaluate.index("--masks") + 1]
    if "evaluate" in ran:
        rows["mlflow_log_evaluation"] = {**measured_run([sys.executable, "-m", "put.bench.scale_log", LABEL, masks,
                                                         output_of(evaluate)], workspace, log, env),
                                         "serves": "evaluate", "command": "the evaluate stage's log_outputs"}
    # Snakemake: planning the whole DAG with these outputs on disk
    for name in SNAKEMAKE_FILES:
        source = Path(repo) / name
        if source.is_dir():
            shutil.copytree(source, workspace / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, workspace / name)
    rows["snakemake_plan"] = {**measured_run([_tool("snakemake"), "-n", "--quiet", "all", "--cores", "1"],
                                             workspace, log, env),
                              "serves": None, "command": "snakemake -n --quiet all --cores 1"}
    # DVC: hashing and caching each output folder (hard links: no second copy), then checking it unchanged
    measured_run([_tool("dvc"), "init", "--no-scm", "-q"], workspace, log, env)
    measured_run([_tool("dvc"), "config", "cache.type", "hardlink"], workspace, log, env)
    for key in (k for k in DVC_OUTPUTS if k in ran):
        target = outputs[key]
        files = sum(1 for p in (workspace / target).rglob("*") if p.is_file())
        rows[f"dvc_add_{key}"] = {**measured_run([_tool("dvc"), "add", "-q", target], workspace, log, env),
                                  "serves": key, "files": files, "command": f"dvc add {target}"}
    rows["dvc_status"] = {**measured_run([_tool("dvc"), "status", "-q"], workspace, log, env),
                          "serves": None, "command": "dvc status (every output above, unchanged)"}
    return rows

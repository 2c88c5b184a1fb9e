"""`put track`: the MLflow runs of the DAG's stages that DVC skipped, logged from their outputs by each stage's
own `log_outputs` and marked put.logged_from = outputs. `make demo` and `make sync` run it after `dvc repro`
(docs/mlflow.md, "Stages DVC skipped")."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from put.commands.common import add_params_arguments, load_cli_params, parse_tags

if TYPE_CHECKING:
    from put.config.params import Params
    from put.dag.declaration import Stage

HELP = "log MLflow runs, from their outputs, for the stages DVC skipped (after `dvc repro`)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_params_arguments(parser)


def out_of_date() -> set[str]:
    """The stages `dvc status` finds changed since dvc.lock (none without DVC or its lock: a Snakemake run)."""
    if not Path("dvc.lock").is_file():
        return set()
    try:
        from dvc.repo import Repo
    except ImportError:
        return set()
    with Repo(".") as repo:
        return {name.split(":")[-1] for name in repo.status()}


def stage_arguments(stage: Stage, name: str | None, params: Params) -> tuple[ModuleType, argparse.Namespace]:
    """The command module of one stage instance and the arguments DVC runs it with (`command`: its name)."""
    from put.commands import COMMANDS
    from put.dag.dvc_yaml import instance_command

    argv = instance_command(stage, name, params.preset, params)
    module = importlib.import_module(COMMANDS[argv[0]])
    parser = argparse.ArgumentParser(prog=f"put {argv[0]}")
    module.add_arguments(parser)
    return module, parser.parse_args(argv[1:], argparse.Namespace(command=argv[0]))


def instance_run_name(stage: Stage, name: str | None, params: Params) -> str:
    """MLflow's name of one stage instance's run (put/tracking/runs.py): `<stage> <variant>`, e.g. `frontier put`,
    `evaluate external_telea`; `report` for the report."""
    from put.tracking.runs import run_name as named

    _, stage_args = stage_arguments(stage, name, params)
    seed = params.replicate(getattr(stage_args, "seed", 0)).seed
    return named(stage_args.command.replace("-", "_"), getattr(stage_args, "variant", None), seed)


def run(args: argparse.Namespace) -> None:
    from put.dag.graph import instances, output_paths
    from put.tracking.base import tracked
    from put.tracking.factory import stage_tracker
    from put.tracking.lookup import finished_run
    from put.tracking.source import tracking_enabled, tracking_uri
    from put.tracking.spool import instance_key, pending_spools

    if not tracking_enabled():
        print("put track: tracking is off (PUT_TRACKING=0): nothing logged")
        return
    params = load_cli_params(args)
    logged, missing, present, stale = [], [], 0, out_of_date()
    # A run whose records wait in a spool is the replay's to complete: logged from the outputs as well, each of its
    # points would be there twice and the run marked as logged from outputs.
    spooled, waiting = pending_spools(tracking_uri()), []
    for stage, name in instances(params):
        if not stage.tracked:
            continue
        key = stage.key(name)
        module, stage_args = stage_arguments(stage, name, params)
        stage_args.params = args.params
        stage_params = load_cli_params(stage_args)
        variant, tracker_stage = getattr(stage_args, "variant", None), stage_args.command.replace("-", "_")
        if finished_run(params.preset, variant, tracker_stage, params.dag_id(), stage_params.seed):
            present += 1
            continue
        spool = spooled.get(instance_key({"preset": params.preset, "variant": variant, "stage": tracker_stage,
                                          "dag_id": params.dag_id(), "seed": stage_params.seed}))
        if spool is not None:
            waiting.append(str(spool))
            continue
        if key in stale or not all(Path(path).exists() for path in output_paths(stage, name, params.preset)):
            missing.append(key)
            continue
        tracker = stage_tracker(params.preset, variant, tracker_stage, params.dag_id(), parse_tags(stage_args.tag),
                                labels=params.evaluated_labels(), seed=stage_params.seed, from_outputs=True)
        with tracked(tracker):
            module.log_outputs(tracker, stage_params, stage_args)
        logged.append(key)
    print(f"MLflow: {present} stage run(s) present; logged from their outputs (the stage did not run): "
          f"{', '.join(logged) or 'none'}")
    if waiting:
        print(f"MLflow: runs not logged from their outputs, their records wait in a spool; replay them, then run "
              f"`put track` again: put track-replay {' '.join(waiting)}")
    if missing:
        print(f"MLflow: no run, and no current outputs to log it from (run `dvc repro` first): {', '.join(missing)}")

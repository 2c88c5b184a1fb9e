"""The code version of each stage command, tracked by DVC as a parameter instead of every source file as a
dependency: the same stages re-run, with one dvc.lock line per stage (docs/dvc-snakemake.md, "What re-runs")."""

from __future__ import annotations

from put.dag.declaration import CONFIG, STAGES
from put.io.code import command_sources
from put.tracking.source import code_version


def code_key(command: str) -> str:
    """The key of a command's version in the file: `train-pvqvae` -> `train_pvqvae`."""
    return command.replace("-", "_")


def stage_commands() -> list[str]:
    """The commands of every stage but `config` (which depends on all their sources)."""
    return sorted({stage.command for stage in STAGES if stage is not CONFIG})


def all_sources() -> list[str]:
    """Every source file a stage command runs: the `config` stage's code dependencies in dvc.yaml."""
    return sorted({path for command in [CONFIG.command, *stage_commands()] for path in command_sources(command)})


def code_versions() -> dict[str, str]:
    """{command key: the version of the sources it runs} for every stage command."""
    return {code_key(command): code_version(command_sources(command)) for command in stage_commands()}

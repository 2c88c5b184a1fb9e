"""The Snakemake rules, built from the DAG declaration (the Snakefile loops over the stages): the declared inputs
and the source files each command runs, the resolved parameters it reads as `params`, the declared outputs, a log
and a benchmark file per job, threads and Slurm resources (docs/dvc-snakemake.md, "Snakemake")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from put.config import PVQVAE_OF_VARIANT
from put.config.external import EXTERNAL_PREFIX
from put.config.params import OFFICIAL_PREFIX, Params, settings_prefix
from put.config.paths import LOG_DIR
from put.config.presets import PRESET_FILE
from put.dag.declaration import CONFIG, STAGES, TARGETS, Evaluated, OfficialFile, Stage
from put.dag.graph import concrete, evaluated, instance_names
from put.dag.report_captions import Captions
from put.io.code import ROOT, command_sources
from put.io.files import atomic_write_text

EFFECTIVE_PARAMS = Path(".snakemake") / "put" / "params.yaml"  # written by the Snakefile's onstart handler


def effective_params_text(config: dict[str, Any]) -> str:
    return ("# Written by the Snakefile before its first job: params.yaml with the --config values merged in.\n"
            + yaml.safe_dump(config, sort_keys=True))


def write_effective_params(config: dict[str, Any], root: Path) -> None:
    """Snakemake's `config` (params.yaml + --config) as the file every job reads; left alone (with its time stamp)
    when it holds the same."""
    path = root / EFFECTIVE_PARAMS
    if not path.is_file() or path.read_text() != effective_params_text(config):
        atomic_write_text(path, effective_params_text(config))


def section(document: dict[str, Any], dotted: str) -> Any:
    value = document
    for key in dotted.split("."):
        value = value[key]
    return value


def resolved_values(stage: Stage, params: Params, document: dict[str, Any]) -> Callable:
    """The resolved values a stage reads, as YAML text per instance (the rule's `params`, see the docstring); a
    function of the job's wildcards, so that Snakemake takes braces in the text for nothing but text."""
    by_name = {name: yaml.safe_dump({p: section(document, p.format(variant=name, official=name, external=name,
                                                                   settings=settings_prefix(name or "")))
                                     for p in stage.params}, sort_keys=True)
               for name in instance_names(stage, params)}
    key = wildcard(stage)
    return lambda wildcards: by_name[getattr(wildcards, key) if key else None]


def option_name(option: str) -> str:
    """--resolved-params -> resolved_params (the name of the input or output in the rule)."""
    return option.lstrip("-").replace("-", "_")


# fan-outs whose instances come from the parameters
WILDCARDS = {"official": "official", "external": "external", "seeds": "seed"}


def wildcard(stage: Stage) -> str | None:
    return WILDCARDS.get(stage.fan_out) or ("variant" if stage.variants else None)


def in_rule(pattern: str, preset: str) -> str:
    """Preset filled in; `{variant}` / `{official}` stay wildcards. A stage writing a `{pvqvae}` path fans out
    over the P-VQVAE variants, where the two placeholders agree."""
    return pattern.replace("{preset}", preset).replace("{pvqvae}", "{variant}")


def input_path(pattern: str | Evaluated | OfficialFile, preset: str, params: Params) -> str | list[str] | Callable:
    if isinstance(pattern, Evaluated):
        return [concrete(pattern.pattern, preset, label) for label in evaluated(params)]
    if isinstance(pattern, OfficialFile):
        return lambda wildcards: getattr(params.official[wildcards.official], pattern.field)
    if "{pvqvae}" in pattern:  # tok and qua0 read put's P-VQVAE
        filled = pattern.replace("{preset}", preset)
        return lambda wildcards: filled.format(variant=wildcards.variant, pvqvae=PVQVAE_OF_VARIANT[wildcards.variant])
    return pattern.replace("{preset}", preset)


def label_option(stage: Stage) -> str:
    if stage.fan_out == "official":
        if stage.command == "import-official":
            return " --official {wildcards.official}"
        return f" --variant {OFFICIAL_PREFIX}{{wildcards.official}}"  # the label its files and runs go under
    if stage.fan_out == "external":
        return f" --variant {EXTERNAL_PREFIX}{{wildcards.external}}"
    if stage.fan_out == "seeds":
        return f" --variant {stage.variant} --seed {{wildcards.seed}}"
    if stage.variants:
        return " --variant {wildcards.variant}"
    return f" --variant {stage.variant}" if stage.variant else ""


@dataclass
class RuleSpec:
    name: str
    inputs: dict[str, Any]
    outputs: dict[str, str]
    directories: set[str]  # names of the outputs that are folders
    log: str
    benchmark: str
    params: dict[str, Any]  # the values whose change re-runs the rule
    shell: str
    wildcard_constraints: dict[str, str]
    report: bool  # its outputs go into `snakemake --report`


def rule_spec(stage: Stage, preset: str, params: Params, config: dict[str, Any],
              params_file: Path = EFFECTIVE_PARAMS) -> RuleSpec | None:
    """The rule of a stage, or None for an official (seed replicate) stage when params.yaml names no official
    checkpoint (no seed)."""
    names = instance_names(stage, params)
    if not names:
        return None
    inputs = {option_name(o): input_path(p, preset, params) for o, p in stage.inputs.items()}
    inputs["code"] = list(command_sources(stage.command))
    rule_params = {"resolved": resolved_values(stage, params, params.resolved_document())} if stage.params else {}
    if stage is CONFIG:  # it resolves the parameters (as dvc.yaml's config stage, which tracks params.yaml)
        inputs["presets"] = PRESET_FILE.relative_to(ROOT).as_posix()
        rule_params["effective"] = lambda wildcards: effective_params_text(config)
    if stage.report:  # the captions of its files in `snakemake --report` (workflow/report/caption.rst)
        rule_params["captions"] = Captions()
    declared = {o: out for o, out in stage.outputs.items() if out.declared}
    outputs = {option_name(o): in_rule(out.pattern, preset) for o, out in declared.items()}
    # The report reads a folder of metrics files; the rule lists the files in it that it reads.
    options = [f"{o} {p.folder.replace('{preset}', preset)}" if isinstance(p, Evaluated)
               else f"{o} {{input.{option_name(o)}}}" for o, p in stage.inputs.items()]
    for option, out in stage.outputs.items():
        if option.startswith("--"):
            value = f"{{output.{option_name(option)}}}" if out.declared else in_rule(out.pattern, preset)
            for field in ("{official}", "{external}"):
                value = value.replace(field, "{wildcards." + field[1:])
            options.append(f"{option} {value}")
    if stage.training:  # more than one process runs the training under torchrun (put/train/launch.py)
        options.append("--gpus {resources.gpus_per_node} --nodes {resources.nodes}")
    if stage.tracked:
        instance = f"@{{wildcards.{wildcard(stage)}}}" if wildcard(stage) else ""
        options.append(f"--tag snakemake_rule={stage.name}{instance}")
    # `exec`: the job's shell becomes the training process, so Slurm's SIGTERM (time limit, preemption) reaches
    # it and it saves its state (put/train/loop.py); a shell in between would die first.
    shell = ("exec " if stage.training else "") + " ".join(
        [f"python -m put {stage.command} --params {params_file} --preset {preset}{label_option(stage)}", *options,
         "--log {log}"])
    log_dir = LOG_DIR.replace("{preset}", preset)
    job = f"{stage.name}/{{{wildcard(stage)}}}" if wildcard(stage) else stage.name
    constraints = {wildcard(stage): "|".join(names)} if wildcard(stage) else {}
    directories = {option_name(o) for o, out in declared.items() if out.directory}
    return RuleSpec(stage.name, inputs, outputs, directories, f"{log_dir}/{job}.log",
                    f"{log_dir}/benchmarks/{job}.tsv", rule_params, shell, constraints, stage.report)


def target_files(target: str, preset: str, params: Params) -> list[str]:
    """Every declared output of the target's stages (every instance)."""
    files = []
    for stage in (s for s in STAGES if s.name in TARGETS[target]):
        for name in instance_names(stage, params):
            files += [concrete(out.pattern, preset, name) for out in stage.outputs.values() if out.declared]
    return sorted(set(files))

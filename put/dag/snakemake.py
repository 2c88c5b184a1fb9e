"""The Snakemake rules, built from the DAG declaration (the Snakefile loops over the stages).

Each rule gets: the declared inputs; the source files its command runs (as inputs, so that an edited file
re-runs exactly the rules that run it); a small file holding the resolved values of the parameters it reads,
rewritten at parse time only when they change (so a changed value re-runs exactly the rules that read it,
with any `--rerun-triggers`, and with no provenance records needed); the declared outputs; a log file per job;
threads and Slurm resources from workflow/resources.yaml. Jobs read the effective parameters -- params.yaml
with any `--config` values merged in -- from one file that the Snakefile writes, so a `--config` value
reaches the jobs instead of only re-triggering them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from put.config import PVQVAE_OF_VARIANT, VARIANTS
from put.config.params import Params
from put.config.presets import PRESET_FILE
from put.dag.code_deps import ROOT, command_sources
from put.dag.declaration import CONFIG, STAGES, TARGETS, EveryVariant, Stage
from put.fileio import atomic_write_text
from put.paths import LOG_DIR, with_variant

STATE = Path(".snakemake") / "put"  # bookkeeping the Snakefile writes at parse time
EFFECTIVE_PARAMS = STATE / "params.yaml"
SECTIONS = STATE / "resolved" / "{stage}.yaml"


def write_if_changed(path: Path, text: str) -> None:
    """Leaves the file (and its time stamp, which Snakemake compares) alone when the content is the same."""
    if not path.is_file() or path.read_text() != text:
        atomic_write_text(path, text)


def effective_params_file(config: dict[str, Any], root: Path) -> Path:
    """Snakemake's `config` (params.yaml + --config) as the file every job reads."""
    write_if_changed(root / EFFECTIVE_PARAMS, "# Written by the Snakefile: params.yaml with the --config values "
                     "merged in.\n" + yaml.safe_dump(config, sort_keys=True))
    return EFFECTIVE_PARAMS


def write_resolved_sections(params: Params, root: Path) -> None:
    """One file per stage instance with the resolved values it reads (see the module docstring)."""
    document = params.resolved_document()
    for stage in (s for s in STAGES if s.params):
        for variant in stage.variants or (None,):
            values = {p: section(document, p.replace("{variant}", variant or "")) for p in stage.params}
            write_if_changed(root / str(SECTIONS).format(stage=stage.key(variant)),
                             yaml.safe_dump(values, sort_keys=True))

def option_name(option: str) -> str:
    """--resolved-params -> resolved_params (the name of the input or output in the rule)."""
    return option.lstrip("-").replace("-", "_")


def concrete(pattern: str, preset: str) -> str:
    """Preset filled in; `{variant}` stays a wildcard (`{pvqvae}` is resolved by `input_path`)."""
    return pattern.replace("{preset}", preset)


def input_path(pattern: str | EveryVariant, preset: str) -> str | list[str] | Callable:
    if isinstance(pattern, EveryVariant):
        return [concrete(with_variant(pattern.pattern, v), preset) for v in VARIANTS]
    pattern = concrete(pattern, preset)
    if "{pvqvae}" in pattern:
        return lambda wildcards: pattern.format(variant=wildcards.variant,
                                                pvqvae=PVQVAE_OF_VARIANT[wildcards.variant])
    return pattern


def section(document: dict[str, Any], dotted: str) -> Any:
    value = document
    for key in dotted.split("."):
        value = value[key]
    return value


@dataclass
class RuleSpec:
    name: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    log: str
    shell: str
    wildcard_constraints: dict[str, str]
    report: list[str]  # names of outputs that go into `snakemake --report`


def rule_spec(stage: Stage, preset: str, params_file: Path) -> RuleSpec:
    inputs = {option_name(o): input_path(p, preset) for o, p in stage.inputs.items()}
    inputs["code"] = list(command_sources(stage.command))
    if stage.params:
        inputs["resolved"] = str(SECTIONS).format(stage=stage.key("{variant}" if stage.variants else None))
    if stage is CONFIG:  # it resolves the parameters (as dvc.yaml's config stage, which tracks params.yaml)
        inputs.update(params=str(params_file), presets=PRESET_FILE.relative_to(ROOT).as_posix())
    # A stage writing a `{pvqvae}` path fans out over the P-VQVAE variants, where the two placeholders agree.
    outputs = {option_name(o): concrete(out.pattern, preset).replace("{pvqvae}", "{variant}")
               for o, out in stage.outputs.items()}
    variant = " --variant {wildcards.variant}" if stage.variants else ""
    options = [f"{o} {{input.{option_name(o)}}}" for o in stage.inputs]
    options += [f"{o} {{output.{option_name(o)}}}" for o in stage.outputs if o.startswith("--")]
    if stage.training:  # more than one GPU runs the training under torchrun (put/cli.py)
        options.append("--gpus {resources.gpu}")
    if stage.tracked:
        options.append(f"--tag snakemake_rule={stage.name}" + ("@{wildcards.variant}" if stage.variants else ""))
    # `exec`: the job's shell becomes the training process, so Slurm's SIGTERM (time limit, preemption) reaches
    # it and it saves its state (put/train/loop.py); a shell in between would die first.
    shell = ("exec " if stage.training else "") + " ".join(
        [f"python -m put {stage.command} --params {params_file} --preset {preset}{variant}", *options, "--log {log}"])
    log_dir = concrete(LOG_DIR, preset)
    log = f"{log_dir}/{stage.name}/{{variant}}.log" if stage.variants else f"{log_dir}/{stage.name}.log"
    constraints = {"variant": "|".join(stage.variants)} if stage.variants else {}
    report = [option_name(o) for o, out in stage.outputs.items() if stage.report]
    return RuleSpec(stage.name, inputs, outputs, log, shell, constraints, report)


def directory_outputs(stage: Stage) -> set[str]:
    return {option_name(o) for o, out in stage.outputs.items() if out.directory}


def target_files(target: str, preset: str) -> list[str]:
    """Every output of the target's stages (all variants)."""
    files = []
    for stage in (s for s in STAGES if s.name in TARGETS[target]):
        for out in stage.outputs.values():
            for variant in stage.variants or ("put",):
                files.append(concrete(with_variant(out.pattern, variant), preset))
    return sorted(set(files))

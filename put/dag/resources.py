"""Slurm resources of the DAG's rules, read by the Snakefile: the workflow half (per preset and rule,
workflow/resources.yaml) joined with the site half (account, partitions, GPU model: slurm/site.yaml).
Outside Slurm the same resources are harmless: the local executor ignores the slurm_* keys."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from put.config import PRESETS
from put.dag.declaration import STAGES
from put.errors import InputError
from put.io.yamlfile import YamlFileError, read_yaml_mapping

RESOURCE_TABLE = Path("workflow") / "resources.yaml"  # relative to the repository root
RULES = tuple(stage.name for stage in STAGES if stage.replica_of is None)  # a seed replicate takes its stage's
RESUMABLE_RULES = tuple(stage.name for stage in STAGES if stage.training)  # they save their state on SIGTERM
RESOURCE_KEYS = {"nodes": int, "gpu": int, "cpus_per_task": int, "mem_mb": int, "runtime": int, "retries": int}
SITE_KEYS = ("account", "partition", "gpu_partition", "gpu_model", "qos")
SITE_ENV = "PUT_SLURM_SITE"
# SIGTERM this long before a long job's limit, so a large checkpoint is written before the SIGKILL (KillWait is
# often 30 s). Shorter jobs rely on the limit's own SIGTERM (the early one may come up to a minute early).
STOP_WARNING_S = 300


class ClusterConfigError(InputError):
    pass


def _read_yaml(path: Path, expected: str, empty_ok: bool = False) -> dict:
    try:
        return read_yaml_mapping(path, expected, empty_ok)
    except YamlFileError as err:
        raise ClusterConfigError(str(err)) from None


def _check_resources(values: object, where: str) -> dict[str, int]:
    if not isinstance(values, dict):
        raise ClusterConfigError(f"{where}: expected a mapping like {{gpu: 1, runtime: 60}}, got {values!r}")
    for key, value in values.items():
        if key not in RESOURCE_KEYS:
            raise ClusterConfigError(f"{where}.{key}: unknown resource; expected one of {', '.join(RESOURCE_KEYS)}")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ClusterConfigError(f"{where}.{key}: expected a whole number >= 0, got {value!r}")
    return values


def load_resource_table(path: Path) -> dict[str, dict[str, dict[str, int]]]:
    """{preset: {rule: resources}} with the defaults filled in, every key checked."""
    data = _read_yaml(path, "Slurm resources per preset and rule: defaults, presets")
    unknown = set(data) - {"defaults", "presets"}
    if unknown:
        raise ClusterConfigError(f"{path}: unknown top-level key(s) {sorted(unknown)}; expected defaults, presets")
    defaults = {"nodes": 1, **_check_resources(data.get("defaults", {}), f"{path}: defaults")}
    missing = set(RESOURCE_KEYS) - set(defaults)
    if missing:
        raise ClusterConfigError(f"{path}: defaults lacks {sorted(missing)}")
    presets = data.get("presets") or {}
    unknown = sorted(set(presets) - set(PRESETS))
    if unknown:
        raise ClusterConfigError(f"{path}: presets.{unknown[0]}: unknown preset; expected one of {', '.join(PRESETS)}")
    table = {}
    for name in PRESETS:
        rules = presets.get(name) or {}
        for rule in rules:
            if rule not in RULES:
                raise ClusterConfigError(f"{path}: presets.{name}.{rule}: unknown rule; expected one of "
                                         f"{', '.join(RULES)}")
        table[name] = {rule: {**defaults, **_check_resources(rules.get(rule, {}), f"{path}: presets.{name}.{rule}")}
                       for rule in RULES}
    return table


def load_site(path: Path | None = None) -> dict[str, str]:
    """The site file: $PUT_SLURM_SITE, else slurm/site.yaml when it exists; {} (cluster defaults) otherwise."""
    if path is None:
        env = os.environ.get(SITE_ENV)
        if env and not Path(env).is_file():
            raise ClusterConfigError(f"{SITE_ENV}={env}: no such file (copy slurm/site.example.yaml)")
        path = Path(env) if env else Path("slurm/site.yaml")
        if not path.is_file():
            return {}
    data = _read_yaml(path, f"the site's Slurm settings ({', '.join(SITE_KEYS)})", empty_ok=True)  # all defaults
    for key, value in data.items():
        if key not in SITE_KEYS:
            raise ClusterConfigError(f"{path}: {key}: unknown setting; expected one of {', '.join(SITE_KEYS)}")
        if value is not None and (not isinstance(value, str) or not value.strip() or "'" in value or '"' in value):
            raise ClusterConfigError(f"{path}: {key}: expected a name such as 'gpu' or null, got {value!r}")
    return {key: value for key, value in data.items() if value is not None}


def rule_resources(table: dict, site: dict[str, str], preset: str, rule: str) -> dict[str, object]:
    """The `resources:` of one rule for the Slurm executor plugin. One node: `gpu` (sbatch --gpus). Several: `mpi`,
    so that the plugin runs the command in the batch step, which starts its own `srun` step (one torchrun per
    node), with --ntasks-per-node=1 --gpus-per-node."""
    wanted = table[preset][rule]
    nodes, gpus = wanted["nodes"], wanted["gpu"]
    resources: dict[str, object] = {key: wanted[key] for key in ("nodes", "cpus_per_task", "mem_mb", "runtime")}
    resources["gpus_per_node"] = gpus
    partition = site.get("gpu_partition", site.get("partition")) if gpus else site.get("partition")
    if partition:
        resources["slurm_partition"] = partition
    if "account" in site:
        resources["slurm_account"] = site["account"]
    if "qos" in site:
        resources["qos"] = site["qos"]
    # A requeued job appends to its log instead of overwriting the first attempt's output.
    extra = ["--open-mode=append"]
    if nodes == 1:
        resources["gpu"] = gpus
        if gpus and "gpu_model" in site:  # only on GPU jobs: the plugin turns it into --gpus=MODEL:N
            resources["gpu_model"] = site["gpu_model"]
    else:
        resources |= {"mpi": "srun", "tasks": nodes}
        extra.append("--ntasks-per-node=1")
        if gpus:
            extra.append(f"--gpus-per-node={site['gpu_model'] + ':' if 'gpu_model' in site else ''}{gpus}")
    if rule in RESUMABLE_RULES and wanted["runtime"] * 60 >= 10 * STOP_WARNING_S:
        extra.append(f"--signal=TERM@{STOP_WARNING_S}")
    resources["slurm_extra"] = " ".join(extra)
    return resources


def partition_nodes(partition: str | None) -> int | None:
    """Nodes of a Slurm partition (None: the default one), from `sinfo`; None when sinfo cannot tell."""
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P %D"], capture_output=True, text=True, timeout=60,
                             check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    sizes = {name: int(count) for name, count in (line.split() for line in out.splitlines() if line.strip())}
    if partition is None:
        return next((n for name, n in sizes.items() if name.endswith("*")), None)
    return sizes.get(partition, sizes.get(partition + "*"))


def check_layouts(table: dict, site: dict[str, str], preset: str) -> None:
    """Before any job is submitted: every rule's `nodes` fits its partition (sbatch would refuse the job only when
    it is due, after hours of the DAG). Partitions sinfo cannot see are left to sbatch."""
    for rule, wanted in table[preset].items():
        if wanted["nodes"] == 1:
            continue
        partition = rule_resources(table, site, preset, rule).get("slurm_partition")
        available = partition_nodes(partition)
        if available is not None and wanted["nodes"] > available:
            raise ClusterConfigError(
                f"{RESOURCE_TABLE}: presets.{preset}.{rule}.nodes: {wanted['nodes']}, but partition "
                f"{partition or '(the default)'} has {available} node(s) (sinfo); lower it or set the site's "
                "partition (slurm/site.yaml)")


def rule_retries(table: dict, preset: str, rule: str) -> int:
    return table[preset][rule]["retries"]

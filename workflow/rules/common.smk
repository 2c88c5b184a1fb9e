# Shared by every rule: the preset (params.yaml, or --config preset=...), the variant list and the
# path patterns, all from the `put` package (one place for each).
import sys
from pathlib import Path

sys.path.insert(0, workflow.basedir)  # the repository root: `put` importable without installing

from put.cluster import load_resource_table, load_site, rule_resources, rule_retries
from put.config import PVQVAE_OF_VARIANT, PVQVAE_VARIANTS, VARIANTS
from put.config.params import load_params
from put.paths import (benchmark_dir, masks_dir, metrics_file, pvqvae_checkpoint, report_dir, samples_dir,
                       split_dir, transformer_checkpoint)

configfile: "params.yaml"

PRESET = config["preset"]
PARAMS = load_params("params.yaml", preset=PRESET)  # validated now: a typo fails before any job starts
OVERRIDES = config.get("overrides") or {}
PUT = "python -m put"
RESOURCE_TABLE = load_resource_table(Path(workflow.basedir) / "workflow" / "resources.yaml")
SITE = load_site()  # slurm/site.yaml or $PUT_SLURM_SITE; {} means the cluster's defaults


def resources_of(rule_name):
    """GPUs, CPUs, memory, time limit and Slurm site settings of a rule (put/cluster.py)."""
    return rule_resources(RESOURCE_TABLE, SITE, PRESET, rule_name)


def retries_of(rule_name):
    return rule_retries(RESOURCE_TABLE, PRESET, rule_name)


def variant_params(variant):
    """The parameters one variant's jobs depend on (a change re-runs that variant only)."""
    return {"preset": PRESET, "overrides": {k: OVERRIDES.get(k, {}) for k in ("model", "masks")},
            "variant": (config.get("variants") or {}).get(variant, {})}


def tag(rule_name, variant=None):
    return f"--tag snakemake_rule={rule_name}" + (f"@{variant}" if variant else "")

# The DAG for Snakemake, built from the declaration that dvc.yaml is generated from (put/dag/declaration.py):
# the same stages, names, commands, inputs, outputs and code dependencies in both front ends.
#   snakemake --cores 2                           (everything, locally; the default target `all`)
#   snakemake --profile slurm ablations           (on a Slurm cluster, see docs/cluster.md)
#   snakemake --config preset=ffhq ...            (another preset; any other params.yaml key works too)
#   snakemake --report report.html                (after a run: tables and figures, with captions, as one HTML file)
# Targets: all (every stage), ablations (every variant trained, sampled and evaluated), or any rule name.
import sys
from pathlib import Path

sys.path.insert(0, workflow.basedir)  # the repository root: `put` importable without installing

from put.dag.resources import check_layouts, load_resource_table, load_site, rule_resources, rule_retries
from put.config.params import params_from_mapping
from put.dag.declaration import STAGES, TARGETS
from put.dag.snakemake import rule_spec, target_files, write_effective_params
from put.dag.report_captions import category
from put.io.yamlfile import read_yaml_mapping

# Read by the stages' own reader first: Snakemake's would take a duplicated key or an empty file silently.
read_yaml_mapping(Path(workflow.basedir) / "params.yaml", "the pipeline's parameters (params.yaml)")
configfile: "params.yaml"

PARAMS = params_from_mapping(config, "params.yaml + --config")  # validated now: a typo fails before any job
PRESET = PARAMS.preset
RESOURCES = load_resource_table(Path(workflow.basedir) / "workflow" / "resources.yaml")
SITE = load_site()  # slurm/site.yaml or $PUT_SLURM_SITE; {} means the cluster's defaults


onstart:
    # The file the jobs read their parameters from: written when jobs are about to run, never when the Snakefile
    # is only read (-n, --lint, --report).
    write_effective_params(config, Path(workflow.basedir))
    if getattr(workflow.executor_plugin, "name", None) == "slurm":  # before the first sbatch: layouts the site holds
        check_layouts(RESOURCES, SITE, PRESET)


rule all:
    input:
        target_files("all", PRESET, PARAMS),
    default_target: True


rule ablations:
    input:
        target_files("ablations", PRESET, PARAMS),


def declare_rule(stage):
    """One rule per stage. A function, not a loop body: Snakemake evaluates `shell:` when the job runs, and a
    loop variable would hold the last stage's command by then."""
    spec = rule_spec(stage, PRESET, PARAMS, config)
    if spec is None:  # an official or seed replicate stage, and params.yaml names no checkpoint or seed
        return
    resources = rule_resources(RESOURCES, SITE, PRESET, stage.replica_of or stage.name)  # replicates: their stage's

    rule:
        name:
            spec.name
        input:
            **spec.inputs,
        output:
            **{
                # every file of the folder but dot files (Snakemake's .snakemake_timestamp), in its category
                name: report(directory(path) if name in spec.directories else path,
                             caption="workflow/report/caption.rst", patterns=["{file,[^./][^/]*}"],
                             category=lambda wildcards: category(wildcards.file))
                if spec.report
                else (directory(path) if name in spec.directories else path)
                for name, path in spec.outputs.items()
            },
        log:
            spec.log,
        benchmark:
            spec.benchmark
        params:
            **spec.params,
        threads: resources["cpus_per_task"]
        resources:
            **resources,
        # Only the main Snakemake retries: a Slurm job's own Snakemake (the job step) would honour a rule's
        # retries too and restart a failed attempt inside the same allocation, so a job whose node was killed
        # never failed, and the attempts multiplied (retries x retries).
        retries: rule_retries(RESOURCES, PRESET, stage.replica_of or stage.name) if workflow.is_main_process else 0
        wildcard_constraints:
            **spec.wildcard_constraints,
        shell:
            spec.shell


for stage in STAGES:
    declare_rule(stage)

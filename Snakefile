# The DAG for Snakemake; dvc.yaml describes the same one (tests/test_dag.py checks they agree).
#   snakemake --cores 2 all                       (locally)
#   snakemake --profile slurm ablations           (on a Slurm cluster, see README)
#   snakemake --config preset=ffhq ...            (another preset; default: params.yaml's)
# Targets: all (everything), ablations (every variant trained, sampled and evaluated), tables (the report).

include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        rules.tables.input,
        report_dir(PRESET),


rule ablations:
    input:
        [metrics_file(PRESET, v) for v in VARIANTS],

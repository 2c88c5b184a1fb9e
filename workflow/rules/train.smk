# Checkpoints: only the final file is an output. The resumable state (<name>.resume.pt beside it) is
# not, so Snakemake never deletes it when a job fails or hits its time limit; the retry resumes.
# `exec`: the job's shell becomes the training process, so that Slurm's SIGTERM (time limit, preemption)
# reaches it and it can save its state (a shell would die first). `--gpus {resources.gpu}`: more than one
# GPU runs the training under torchrun (put/cli.py).

rule train_pvqvae:
    input:
        split_dir(PRESET),
    output:
        pvqvae_checkpoint(PRESET, "{variant}"),
    wildcard_constraints:
        variant="|".join(PVQVAE_VARIANTS),
    params:
        settings=lambda w: {**variant_params(w.variant), "train": OVERRIDES.get("pvqvae_train", {})},
        cmd=lambda w: f"{PUT} train-pvqvae --preset {PRESET} --variant {w.variant} {tag('train_pvqvae', w.variant)}",
    resources:
        **resources_of("train_pvqvae"),
    retries: retries_of("train_pvqvae")
    shell:
        "exec {params.cmd} --gpus {resources.gpu} --split {input} --out {output}"


rule train_transformer:
    input:
        split=split_dir(PRESET),
        pvqvae=lambda w: pvqvae_checkpoint(PRESET, w.variant),
    output:
        transformer_checkpoint(PRESET, "{variant}"),
    wildcard_constraints:
        variant="|".join(VARIANTS),
    params:
        settings=lambda w: {**variant_params(w.variant), "train": OVERRIDES.get("transformer_train", {})},
        cmd=lambda w: (f"{PUT} train-transformer --preset {PRESET} --variant {w.variant} "
                       f"{tag('train_transformer', w.variant)}"),
    resources:
        **resources_of("train_transformer"),
    retries: retries_of("train_transformer")
    shell:
        "exec {params.cmd} --gpus {resources.gpu} --split {input.split} --pvqvae {input.pvqvae} --out {output}"

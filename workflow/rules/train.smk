# Checkpoints: only the final file is an output. The resumable state (<name>.resume.pt beside it) is
# not, so Snakemake never deletes it when a job fails or hits its time limit; the retry resumes.

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
    shell:
        "{params.cmd} --split {input} --out {output}"


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
    shell:
        "{params.cmd} --split {input.split} --pvqvae {input.pvqvae} --out {output}"

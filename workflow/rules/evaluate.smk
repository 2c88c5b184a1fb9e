rule sample:
    input:
        checkpoint=transformer_checkpoint(PRESET, "{variant}"),
        masks=masks_dir(PRESET),
    output:
        directory(samples_dir(PRESET, "{variant}")),
    wildcard_constraints:
        variant="|".join(VARIANTS),
    params:
        settings=lambda w: {"preset": PRESET, "sample": OVERRIDES.get("sample", {})},
        cmd=lambda w: f"{PUT} sample --preset {PRESET} --variant {w.variant} {tag('sample', w.variant)}",
    resources:
        **resources_of("sample"),
    retries: retries_of("sample")
    shell:
        "{params.cmd} --checkpoint {input.checkpoint} --masks {input.masks} --out {output}"


rule evaluate:
    input:
        samples=samples_dir(PRESET, "{variant}"),
        masks=masks_dir(PRESET),
    output:
        metrics_file(PRESET, "{variant}"),
    wildcard_constraints:
        variant="|".join(VARIANTS),
    params:
        settings=lambda w: {"preset": PRESET, "evaluate": OVERRIDES.get("evaluate", {})},
        cmd=lambda w: f"{PUT} evaluate --preset {PRESET} --variant {w.variant} {tag('evaluate', w.variant)}",
    resources:
        **resources_of("evaluate"),
    retries: retries_of("evaluate")
    shell:
        "{params.cmd} --samples {input.samples} --masks {input.masks} --out {output}"

rule split:
    output:
        directory(split_dir(PRESET)),
    params:
        settings={"preset": PRESET, "data": OVERRIDES.get("data", {}), "model": OVERRIDES.get("model", {})},
        cmd=f"{PUT} split --preset {PRESET}",
    resources:
        **resources_of("split"),
    retries: retries_of("split")
    shell:
        "{params.cmd} --out {output}"


rule masks:
    input:
        split_dir(PRESET),
    output:
        directory(masks_dir(PRESET)),
    params:
        settings={"preset": PRESET, "masks": OVERRIDES.get("masks", {}), "model": OVERRIDES.get("model", {})},
        cmd=f"{PUT} masks --preset {PRESET}",
    resources:
        **resources_of("masks"),
    retries: retries_of("masks")
    shell:
        "{params.cmd} --split {input} --out {output}"

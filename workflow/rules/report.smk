BENCH = f"results/{PRESET}/bench"


rule bench:
    output:
        directory(BENCH),
    params:
        cmd=f"{PUT} bench sampling --preset {PRESET} --steps 5",
        pvqvae=f"{PUT} bench pvqvae --preset {PRESET}",
    resources:
        **resources_of("bench"),
    retries: retries_of("bench")
    shell:
        "{params.cmd} --out {output}/sampling.json && {params.pvqvae} --out {output}/pvqvae.json"


rule tables:
    input:
        metrics=[metrics_file(PRESET, v) for v in VARIANTS],
        bench=BENCH,
        samples=samples_dir(PRESET, "put"),
        masks=masks_dir(PRESET),
    output:
        directory(report_dir(PRESET)),
    params:
        cmd=f"{PUT} report --preset {PRESET} {tag('tables')}",
        samples_root=f"results/{PRESET}/samples",
    resources:
        **resources_of("tables"),
    retries: retries_of("tables")
    shell:
        "{params.cmd} --metrics {input.metrics} --samples-root {params.samples_root} --masks {input.masks} "
        "--benchmarks {input.bench} --out {output}"

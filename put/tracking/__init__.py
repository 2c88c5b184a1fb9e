"""MLflow tracking, the only package that imports mlflow: where a run comes from and which code it runs
(source.py), what its runs, metrics and views are named (names.py), the runs themselves with their models and
datasets (runs.py), and system metrics while a stage runs (system.py, which hands them to the run's logging).
Callers import from the module they need, so that a stage's code dependencies (put/io/code.py) take only
what it runs.

Layout in the experiment `put-<preset>` (tagged as model training, `mlflow.experimentKind`): one parent run per
DAG configuration (tag `put.dag_id`, a hash of the fully resolved parameters), named after what it is
(`demo · 6 variants · 3f2a91c`), with one child run per stage instance, named `<stage> <variant>` (`evaluate
conv`; the report's is `report`). Each run carries its own tags (preset, variant, stage, DVC stage or Snakemake
rule, Slurm job, host, the git commit as its source version, library versions); nothing is written into the
parent but its name and identity. A stage run's identity includes the version of the code it runs (put.code, a
hash of its command's source files): re-running a stage without a change finds its run again (looked up by
tags), so runs are never duplicated, and after a code change the stage gets a new run linked to the one before
(put.previous_run; the older one is tagged put.superseded_by). A stage DVC skipped gets its run from its outputs
(`put track`, tagged put.logged_from = outputs). `put ui` starts the UI and prints the link that opens the runs.

Metric names end with what they measure; the parts before say where: `<mode>/<group>/<metric>` for the
evaluation (`k50/10-60/psnr`, the nesting of the metrics files), `<setting>/<group>/<metric>` for the frontier,
`train/<loss>` and `eval/<metric>` for training curves. MLflow's charts group a run's metrics into sections by
everything before the last `/` (`k50/10-60`: PSNR, SSIM, MAE side by side), and a chart's title ends with what
it shows.

Models: every trained checkpoint becomes an MLflow LoggedModel (MLmodel file with a `put` flavour, its final
training metrics, the evaluation's metrics linked to it), registered as `put-<preset>-<variant>-<kind>` with the
alias `current` on the newest version (`latest` is reserved by MLflow). A checkpoint up to
`PUT_MLFLOW_MODEL_COPY_MB` (default 256 MiB) is copied into the model's artefacts, so the model is complete on
its own; a larger one (the paper presets' transformers: hundreds of MB to several GB) is logged as a reference
(path, size, SHA-256): it already lies in the workspace and in DVC's cache, and a third copy per training would
cost gigabytes for nothing.

Concurrency: the default backend is SQLite (`sqlite:///mlflow.db`), which does not survive concurrent writers,
so every MLflow call of every process goes through one inter-process file lock beside the database (the system
metrics thread too). With a tracking server (`MLFLOW_TRACKING_URI=http://...`, what a cluster run should use) no
lock is taken; a run created twice by a race is resolved to the oldest one.
"""

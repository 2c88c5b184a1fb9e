"""MLflow tracking, the only package that imports mlflow: the tracker protocol (base.py), where a run comes from
and which code it runs (source.py), the names of runs, metrics and views (names.py), the runs with their datasets
(runs.py), their models (models.py) and runs created twice by a race (races.py), the spool for a server's outages
(spool.py) and system metrics while a stage runs (system.py). Callers import from the module they need, so that a
stage's code dependencies (put/io/code.py) take only what it runs. Layout of the runs, metric names, models,
concurrency (docs/mlflow.md, "Layout of the runs")."""

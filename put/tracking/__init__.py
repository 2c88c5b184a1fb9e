"""MLflow tracking, the only package that imports mlflow: the tracker protocol and the null tracker (base.py), a
stage's tracker (factory.py), where a run comes from and which code it runs (source.py), the names of runs,
metrics and views (names.py), the runs with their datasets (runs.py), their models (models.py), runs created twice
by a race (races.py), look-ups that open no run (lookup.py), the tracker that spools during a server's outage
(resilient.py), the spool's file and its replay (spool.py), MLflow's private names behind one wrapper each
(mlflow_private.py) and system metrics while a stage runs (system.py). Callers import from the module they need,
so that a stage's code dependencies (put/io/code.py) take only what it runs. Layout of the runs, metric names,
models, concurrency (docs/mlflow.md, "Layout of the runs")."""

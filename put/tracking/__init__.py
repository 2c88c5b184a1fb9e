"""MLflow tracking, the only package that imports mlflow (docs/mlflow.md, "Layout of the runs"). Callers import
from the module they need, so that a stage's code dependencies (put/io/code.py) take only what it runs."""

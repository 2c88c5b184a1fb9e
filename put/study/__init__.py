"""Studies the DAG runs over a trained model: the speed/quality frontier."""

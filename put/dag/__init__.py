"""The DAG, declared once (declaration.py) and rendered for DVC (dvc_yaml.py) and Snakemake (snakemake.py)."""

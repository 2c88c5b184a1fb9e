"""One module per DAG stage: files in, files out (the `put` subcommands the DAG runs)."""

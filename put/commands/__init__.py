"""The `put` subcommands, one module each: `HELP`, `add_arguments(parser)` and `run(args)`. Heavy imports stay in
`run`, so that a DAG stage depends only on the code its own subcommand runs (put/io/code.py).
"""

from __future__ import annotations

from put.io.code import command_module

COMMANDS: dict[str, str] = {name: command_module(name) for name in (
    "info", "inpaint", "config", "dag", "import-official", "split", "prepare", "masks", "masks-export",
    "train-pvqvae", "train-transformer", "sample", "external", "evaluate", "frontier", "report", "weights",
    "bench-suite", "bench", "cost", "coverage", "compare", "serve", "track", "track-replay", "ui",
)}

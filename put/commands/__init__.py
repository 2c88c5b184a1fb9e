"""The `put` subcommands, one module each: subcommand -> the module that declares its arguments and runs it.

Each module has `HELP` (one line for `put --help`), `add_arguments(parser)` and `run(args)`; heavy imports
stay inside `run`. This table sits below both readers: `put/cli.py` builds its parser from it and
`put/dag/code_deps.py` finds the code a DAG stage runs from it (the stage's command module and its imports).
"""

from __future__ import annotations

COMMANDS: dict[str, str] = {name: f"put.commands.{name.replace('-', '_')}" for name in (
    "info", "inpaint", "config", "dag", "import-official", "split", "prepare", "masks", "train-pvqvae",
    "train-transformer", "sample", "evaluate", "frontier", "report", "weights", "bench-suite", "bench", "cost", "coverage",
    "serve", "track", "track-replay", "ui",
)}

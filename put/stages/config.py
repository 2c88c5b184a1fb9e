"""Stage `config`: params.yaml + the preset -> results/<preset>/resolved_params.yaml, every value the stages
use. DVC tracks each stage's sections of this file (`dvc params diff`, `dvc exp show` show resolved values),
and the report prints it. The file is rewritten only when its content changes."""

from __future__ import annotations

from pathlib import Path

import yaml

from put.config.params import Params
from put.io.files import atomic_write_text

HEADER = ("# Resolved parameters of the DAG (written by `put config` from params.yaml and "
          "put/config/presets.yaml; do not edit).\n")


def render(params: Params) -> str:
    return HEADER + yaml.safe_dump(params.resolved_document(), sort_keys=True, width=120)


def write_if_changed(path: Path, text: str) -> Path:
    """Rewritten only when its content changes (DVC and Snakemake see an unchanged file as unchanged)."""
    if not path.is_file() or path.read_text() != text:
        atomic_write_text(path, text)
    return path


def run_config(params: Params, out: Path) -> Path:
    return write_if_changed(Path(out), render(params))

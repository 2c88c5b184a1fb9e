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
CODE_HEADER = "# Code version of each stage command (written by `put config`; put/dag/code.py; do not edit).\n"


def render(params: Params) -> str:
    return HEADER + yaml.safe_dump(params.resolved_document(), sort_keys=True, width=120)


def write_if_changed(path: Path, text: str) -> Path:
    """Rewritten only when its content changes (DVC and Snakemake see an unchanged file as unchanged)."""
    if not path.is_file() or path.read_text() != text:
        atomic_write_text(path, text)
    return path


def write_code_versions(versions: dict[str, str], out: Path) -> Path:
    """{stage command: its code version} (put/dag/code.py), which the DAG's stages track."""
    return write_if_changed(out, CODE_HEADER + yaml.safe_dump(versions, sort_keys=True))


def run_config(params: Params, out: Path) -> Path:
    return write_if_changed(Path(out), render(params))

"""The source files a stage's command runs: its import closure inside the `put` package.

Found statically (`ast`), following every import of a module, at module level or inside functions, and
the `__init__.py` of every package on the way, from put/__main__.py and the stage's command module (the
table in put/commands/__init__.py). put/cli.py imports the command modules by name (importlib), so the
stages stay apart: a stage depends on the dispatcher and on what its own subcommand uses.

Preset files (put/config/presets/*.yaml) are data, not code: stages depend on the values they resolve to,
through the resolved parameter file (see put/dag/declaration.py), so that a changed iteration count re-runs
the stages it affects and no other.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from put.commands import COMMANDS

PACKAGE = "put"
ROOT = Path(__file__).resolve().parents[2]  # the repository root (the folder holding put/)


def module_file(name: str) -> Path | None:
    """put.a.b -> put/a/b.py or put/a/b/__init__.py (None when it is not a module of the package)."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported_names(nodes: list[ast.AST]) -> set[str]:
    """Modules named by the import statements among `nodes` (and everything nested in them)."""
    names: set[str] = set()
    for node in (n for top in nodes for n in ast.walk(top)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            # `from put.x import y` imports the submodule put.x.y when y is one.
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {n for n in names if module_file(n) is not None}


def _with_parents(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


@lru_cache(maxsize=None)
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _module_imports(name: str) -> set[str]:
    return _imported_names([_parsed(module_file(name))])


def closure(roots: set[str]) -> set[str]:
    """Every module of the package that importing `roots` (transitively) runs."""
    done: set[str] = set()
    todo = [m for root in roots for m in _with_parents(root)]
    while todo:
        name = todo.pop()
        if name in done or module_file(name) is None:
            continue
        done.add(name)
        for imported in _module_imports(name):
            todo += _with_parents(imported)
    return done


@lru_cache(maxsize=None)
def command_sources(command: str) -> tuple[str, ...]:
    """Repository-relative paths of the source files `python -m put <command>` depends on, sorted."""
    if command not in COMMANDS:
        raise KeyError(f"`put {command}` is not a subcommand (put/commands/__init__.py)")
    modules = closure({f"{PACKAGE}.__main__", COMMANDS[command]})
    return tuple(sorted(module_file(m).relative_to(ROOT).as_posix() for m in modules))

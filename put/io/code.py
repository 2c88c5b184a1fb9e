"""The package's own source files that a `put` subcommand runs: its import closure, found statically. The DAG and
tracking both read it, so they agree on which change re-runs which stage (docs/architecture.md, "Code dependencies").
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

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


@cache
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


def command_module(command: str) -> str:
    """The module of `put <command>`: put/commands/<command, dashes as underscores>.py."""
    name = f"{PACKAGE}.commands.{command.replace('-', '_')}"
    if module_file(name) is None:
        raise KeyError(f"`put {command}` is not a subcommand (no {name.replace('.', '/')}.py)")
    return name


@cache
def command_sources(command: str) -> tuple[str, ...]:
    """Repository-relative paths of the source files `python -m put <command>` depends on, sorted."""
    modules = closure({f"{PACKAGE}.__main__", command_module(command)})
    return tuple(sorted(module_file(m).relative_to(ROOT).as_posix() for m in modules))

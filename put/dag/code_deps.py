"""The source files a stage's command runs: its import closure inside the `put` package.

Found statically (`ast`), following every import of a module, at module level or inside functions, and
the `__init__.py` of every package on the way. One exception keeps the stages apart: `put/cli.py`
dispatches to every stage through imports inside its `cmd_*` handlers, so there only the module-level
imports and the imports reached from the handler of the stage's own subcommand (and the cli functions it
calls) count. A stage therefore depends on put/__main__.py, put/cli.py and what its subcommand uses.

Preset files (put/config/presets/*.yaml) are data, not code: stages depend on the values they resolve to,
through the resolved parameter file (see put/dag/declaration.py), so that a changed iteration count re-runs
the stages it affects and no other.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

PACKAGE = "put"
ROOT = Path(__file__).resolve().parents[2]  # the repository root (the folder holding put/)
CLI = "put.cli"


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


def _cli_imports(handler: str) -> set[str]:
    """put/cli.py: module-level imports, plus those inside `handler` and the cli functions it calls."""
    tree = _parsed(module_file(CLI))
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    names = _imported_names([n for n in tree.body if n not in functions.values()])
    seen, todo = set(), [handler]
    while todo:
        fn = todo.pop()
        if fn in seen or fn not in functions:
            continue
        seen.add(fn)
        names |= _imported_names(functions[fn].body)
        todo += [n.id for n in ast.walk(functions[fn]) if isinstance(n, ast.Name) and n.id in functions]
    if handler not in functions:
        raise KeyError(f"put/cli.py has no function {handler!r}")
    return names


def closure(roots: set[str]) -> set[str]:
    """Every module of the package that importing `roots` (transitively) runs; put/cli.py's own imports are
    not followed here (`_cli_imports` gives the part of them that a subcommand runs)."""
    done: set[str] = set()
    todo = [m for root in roots for m in _with_parents(root)]
    while todo:
        name = todo.pop()
        if name in done or module_file(name) is None:
            continue
        done.add(name)
        for imported in () if name == CLI else _module_imports(name):
            todo += _with_parents(imported)
    return done


def handler_of(command: str) -> str:
    """The cli function that runs `put <command>`."""
    from put.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    if command not in subparsers.choices:
        raise KeyError(f"`put {command}` is not a subcommand of put/cli.py")
    return subparsers.choices[command].get_default("func").__name__


@lru_cache(maxsize=None)
def command_sources(command: str) -> tuple[str, ...]:
    """Repository-relative paths of the source files `python -m put <command>` depends on, sorted."""
    modules = closure(_cli_imports(handler_of(command)) | {CLI, f"{PACKAGE}.__main__"})
    return tuple(sorted(module_file(m).relative_to(ROOT).as_posix() for m in modules))

"""The package's layout holds: every `import put.…` runs down the layers of docs/architecture.md, no import cycle,
nothing loose under put/ but cli.py, __main__.py and errors.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "put"
LOOSE = {"cli", "__main__", "errors"}


def layers() -> list[set[str]]:
    """The layers block of docs/architecture.md, top first."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no ```layers block"
    return [set(line.split()) for line in block.group(1).splitlines() if line.strip()]


def modules() -> dict[str, Path]:
    """put.a.b -> its file, for every module of the package (a package by its __init__.py)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules `path` imports, at any depth: `from put.x import y` counts put.x.y when y is a module."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import (the package imports absolutely)"
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name in known and (name + ".").startswith("put.")} - {"put"}


def package_of(module: str) -> str:
    return module.split(".")[1]


GRAPH = {name: imports(path, modules()) - {name} for name, path in modules().items()}


def test_the_layers_name_every_package_once():
    named = [name for layer in layers() for name in layer]
    assert len(named) == len(set(named)), f"a package named twice in docs/architecture.md: {named}"
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages | LOOSE == set(named), f"packages not placed: {packages | LOOSE ^ set(named)}"


def test_nothing_loose_under_put_but_the_dispatcher_and_the_errors():
    loose = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert loose == LOOSE, f"modules outside a package: {sorted(loose - LOOSE)}"


def test_every_import_runs_down_the_layers():
    rank = {name: i for i, layer in enumerate(layers()) for name in layer}
    wrong = sorted(f"{src} -> {dst}" for src, targets in GRAPH.items() if src != "put" for dst in targets
                   if package_of(src) != package_of(dst) and rank[package_of(dst)] <= rank[package_of(src)])
    assert not wrong, "imports against docs/architecture.md's layers:\n" + "\n".join(wrong)


def test_no_import_cycle():
    """Strongly connected components of the module graph (Tarjan's): every one a single module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not cycles, f"modules that import each other: {cycles}"


@pytest.mark.parametrize("source, target", [("put.config.evaluation", "put.stats.bootstrap"),
                                            ("put.stages.frontier", "put.bench.common"),
                                            ("put.sampling.inpaint", "put.train.common")])
def test_the_check_finds_a_wrong_arrow(source, target, monkeypatch):
    """The checks above are not vacuous: an arrow this layout ended is found again."""
    monkeypatch.setitem(GRAPH, source, GRAPH[source] | {target})
    with pytest.raises(AssertionError, match=f"{re.escape(source)} -> {re.escape(target)}"):
        test_every_import_runs_down_the_layers()


def stage_importers() -> list[str]:
    """`importer -> stage` for every stage module imported by another stage, a benchmark or the report: a stage
    reads its inputs, calls the domain modules and writes its outputs, so nothing else builds on one."""
    return sorted(f"{src} -> {dst}" for src, targets in GRAPH.items() for dst in targets
                  if dst.startswith("put.stages.") and package_of(src) in {"stages", "bench", "report"}
                  and dst != "put.stages" and src != "put.stages")


def test_no_stage_is_imported_by_another_stage_a_benchmark_or_the_report():
    wrong = stage_importers()
    assert not wrong, "stage modules others build on (move what they share to a domain module):\n" + "\n".join(wrong)


def test_the_thin_stage_check_finds_a_stage_importing_another(monkeypatch):
    monkeypatch.setitem(GRAPH, "put.stages.report", GRAPH["put.stages.report"] | {"put.stages.frontier"})
    with pytest.raises(AssertionError, match=re.escape("put.stages.report -> put.stages.frontier")):
        test_no_stage_is_imported_by_another_stage_a_benchmark_or_the_report()

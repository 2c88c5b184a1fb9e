"""The declared DAG made concrete for one preset: each stage instance's input and output paths, and which
instances read which outputs (what "downstream" means in tests and tools)."""

from __future__ import annotations

from put.dag.declaration import STAGES, CONFIG, EveryVariant, Stage
from put.paths import path_of
from put.config import VARIANTS


def instances() -> list[tuple[Stage, str | None]]:
    return [(s, v) for s in STAGES for v in (s.variants or (None,))]


def input_paths(stage: Stage, variant: str | None, preset: str) -> list[str]:
    found = []
    for pattern in stage.inputs.values():
        if isinstance(pattern, EveryVariant):
            found += [str(path_of(pattern.pattern, preset, v)) for v in VARIANTS]
        else:
            found.append(str(path_of(pattern, preset, variant or "put")))
    return found


def output_paths(stage: Stage, variant: str | None, preset: str) -> list[str]:
    return [str(path_of(out.pattern, preset, variant or "put")) for out in stage.outputs.values()]


def edges(preset: str = "demo") -> dict[str, set[str]]:
    """stage key -> keys of the stage instances that read one of its outputs. Every stage reads its
    parameters from the `config` stage's output."""
    producer = {path: stage.key(variant) for stage, variant in instances()
                for path in output_paths(stage, variant, preset)}
    graph: dict[str, set[str]] = {stage.key(variant): set() for stage, variant in instances()}
    for stage, variant in instances():
        for path in input_paths(stage, variant, preset):
            graph[producer[path]].add(stage.key(variant))
        if stage.params:
            graph[CONFIG.key()].add(stage.key(variant))
    return graph


def downstream(keys: set[str], preset: str = "demo") -> set[str]:
    """The given stage instances and every instance that reads their outputs, transitively."""
    graph = edges(preset)
    unknown = keys - set(graph)
    if unknown:
        raise KeyError(f"unknown stage(s) {sorted(unknown)}; known: {sorted(graph)}")
    result, frontier = set(keys), set(keys)
    while frontier:
        frontier = {child for key in frontier for child in graph[key]} - result
        result |= frontier
    return result

"""The declared DAG made concrete for one configuration: its stage instances, their input and output paths,
and which instances read which outputs (what "downstream" means in tests and tools)."""

from __future__ import annotations

from put.config import VARIANTS
from put.config.params import Params
from put.dag.declaration import CONFIG, STAGES, Evaluated, OfficialFile, Stage


def instance_names(stage: Stage, params: Params | None = None) -> tuple[str | None, ...]:
    """A stage's instances: variants, official or external entry names, seeds, or (None,) for a stage that runs once."""
    if stage.fan_out in ("official", "external"):
        return tuple(getattr(params, stage.fan_out)) if params is not None else ()
    if stage.fan_out == "seeds":
        return tuple(str(seed) for seed in params.seeds) if params is not None else ()
    return stage.variants or (None,)


def instances(params: Params | None = None) -> list[tuple[Stage, str | None]]:
    return [(stage, name) for stage in STAGES for name in instance_names(stage, params)]


def evaluated(params: Params | None = None) -> list[str]:
    return params.evaluated_labels() if params is not None else list(VARIANTS)


def concrete(pattern: str, preset: str, name: str | None) -> str:
    from put.config.paths import path_of

    return str(path_of(pattern, preset, name or "put", official=name or "", external=name or "",
                       seed=name or ""))


def input_paths(stage: Stage, name: str | None, preset: str, params: Params | None = None) -> list[str]:
    found = []
    for pattern in stage.inputs.values():
        if isinstance(pattern, Evaluated):
            found += [concrete(pattern.pattern, preset, label) for label in evaluated(params)]
        elif isinstance(pattern, OfficialFile):
            found.append(getattr(params.official[name], pattern.field))
        else:
            found.append(concrete(pattern, preset, name))
    return found


def output_paths(stage: Stage, name: str | None, preset: str) -> list[str]:
    return [concrete(out.pattern, preset, name) for out in stage.outputs.values() if out.declared]


def edges(preset: str = "demo", params: Params | None = None) -> dict[str, set[str]]:
    """stage key -> keys of the stage instances that read one of its outputs. Every stage with parameters reads
    them from the `config` stage's output."""
    everything = instances(params)
    producer = {path: stage.key(name) for stage, name in everything for path in output_paths(stage, name, preset)}
    graph: dict[str, set[str]] = {stage.key(name): set() for stage, name in everything}
    for stage, name in everything:
        for path in input_paths(stage, name, preset, params):
            if path in producer:  # not the official .pth files, which no stage makes
                graph[producer[path]].add(stage.key(name))
        if stage.params:
            graph[CONFIG.key()].add(stage.key(name))
    return graph


def downstream(keys: set[str], preset: str = "demo", params: Params | None = None) -> set[str]:
    """The given stage instances and every instance that reads their outputs, transitively."""
    graph = edges(preset, params)
    unknown = keys - set(graph)
    if unknown:
        raise KeyError(f"unknown stage(s) {sorted(unknown)}; known: {sorted(graph)}")
    result, frontier = set(keys), set(keys)
    while frontier:
        frontier = {child for key in frontier for child in graph[key]} - result
        result |= frontier
    return result

"""The sampling engine: the exact iterative step on fixed buffers, captured as one CUDA graph on GPUs; and
`sample_tokens` / `inpaint_batch`, the one entry every caller uses (the engine on CUDA, the eager sampler
of put/sampling.py elsewhere).

At batch 1 the eager step is bound by kernel launches (some 400 per forward): replaying the whole step --
forward, position choice, top-K draw, write-back into the token and input buffers -- as one graph removes
them. Everything the step reads lives in buffers of static shape (put/sampling.py `static_shape`): the
inputs, tokens and still-masked flags, the per-step counts of the run's plan, its uniforms, and a step
counter on the device that each replay advances. The step itself is put/sampling.py's `choose` and
`write_back`, so the engine draws the same tokens as the eager sampler for the same seed (tests compare
them). Kinds:

- "graph": the step captured in a CUDA graph (on CPU the same buffers and step, run without capture);
- "compile": the same with the transformer's forward compiled by torch.compile inside the graph;
- "eager": put/sampling.py's loop; "auto": "graph" on CUDA, "eager" elsewhere.

The blocks run in the caller's autocast precision (bf16 on GPUs); logits, scores and draws stay fp32.
A captured engine is kept per model and shape (a few at most) and reused by later batches.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
import torch

from put.models.put_model import PUTModel
from put.sampling import (Progress, SamplingOptions, choose, plan, sample_all_at_once, sample_iterative, sampler_inputs,
                          static_shape, write_back)
from put.seeding import run_seed, step_uniform

ENGINES = ("auto", "eager", "graph", "compile")
WARMUP_STEPS = 3  # run before a capture, on a side stream (allocator, cuBLAS handles, compilation)
CACHED_ENGINES = 8  # per model: the batch sizes and settings of one sampling stage fit


class SamplingEngine:
    """Static buffers and the step for one (model, batch, grid, options, precision); `run` samples."""

    @torch.inference_mode()
    def __init__(self, model: PUTModel, batch: int, grid: tuple[int, int], options: SamplingOptions,
                 compiled: bool = False, autocast: tuple[bool, torch.dtype] = (False, torch.bfloat16)):
        # A weak reference: the engine is cached under the model, and must not keep it alive.
        self.model, self.options, self.autocast = weakref.ref(model), options, autocast
        self.device = next(model.parameters()).device
        transformer = model.transformer
        length, dim = grid[0] * grid[1], transformer.config.n_embd
        codes = model.pvqvae.codebook.unmasked_book.shape[0]
        self.max_steps, width = static_shape(options, length)
        on = dict(device=self.device)
        self.x = torch.zeros(batch, length, dim, **on)
        self.tokens = torch.zeros(batch, length, dtype=torch.long, **on)
        self.remaining = torch.zeros(batch, length, dtype=torch.bool, **on)
        self.code_inputs = torch.zeros(codes, dim, **on)
        self.positions = torch.zeros(length, dim, **on)
        self.counts = torch.zeros(self.max_steps, batch, dtype=torch.long, **on)
        self.uniforms = torch.zeros(self.max_steps, batch, width, min(options.top_k, codes), **on)
        self.step_index = torch.zeros(1, dtype=torch.long, **on)
        self.forward = (torch.compile(transformer.forward_embedded, fullgraph=True, dynamic=False) if compiled
                        else transformer.forward_embedded)
        self.captured = self.device.type == "cuda"
        self.graph: torch.cuda.CUDAGraph | None = None

    def step(self) -> None:
        """One sampling step on the buffers, the step counter advanced: what the graph replays."""
        enabled, dtype = self.autocast
        with torch.autocast(self.device.type, dtype=dtype, enabled=enabled, cache_enabled=False):
            logits = self.forward(self.x)
        count = self.counts.index_select(0, self.step_index)[0]
        uniform = self.uniforms.index_select(0, self.step_index)[0]
        where, drawn, valid = choose(logits, self.remaining, count, uniform, self.options)
        write_back(self.x, self.tokens, self.remaining, where, drawn, valid, self.code_inputs, self.positions)
        self.step_index.add_(1)

    def _capture(self) -> None:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                self.step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.step()

    @torch.inference_mode()
    def run(self, features: torch.Tensor, known: torch.Tensor, tokens: torch.Tensor, seed: int | None = None,
            progress: Progress | None = None, known_fraction: torch.Tensor | None = None) -> torch.Tensor:
        """As put/sampling.py `sample_iterative`, on this engine's buffers."""
        if self.captured and self.graph is None:
            self._capture()  # on whatever the buffers hold: they are loaded below
        b, _, h, w = features.shape
        x, code_inputs, positions = sampler_inputs(self.model(), features, known_fraction)
        self.x.copy_(x)
        self.code_inputs.copy_(code_inputs)
        self.positions.copy_(positions)
        self.tokens.copy_(torch.where(known, tokens, torch.zeros_like(tokens)).flatten(1))
        self.remaining.copy_(~known.flatten(1))
        counts = plan(self.remaining, self.options)
        self.counts[:len(counts)].copy_(counts)
        seed = run_seed(seed)
        for step in range(len(counts)):
            step_uniform(seed, step, self.uniforms[step])
        self.step_index.zero_()
        for step in range(len(counts)):
            if self.graph is not None:
                self.graph.replay()
            else:
                self.step()
            if progress is not None:
                progress(step + 1, len(counts))
        return self.tokens.view(b, h, w).clone()


_ENGINES: weakref.WeakKeyDictionary[PUTModel, OrderedDict] = weakref.WeakKeyDictionary()


def engine_for(model: PUTModel, batch: int, grid: tuple[int, int], options: SamplingOptions,
               kind: str = "graph") -> SamplingEngine:
    """The model's engine for these shapes, settings and the current autocast state (built on first use).
    The key holds the weights' address: a model moved to another device gets new engines."""
    device = next(model.parameters()).device
    autocast = (torch.is_autocast_enabled(device.type), torch.get_autocast_dtype(device.type))
    key = (kind, batch, tuple(grid), options, autocast, next(model.parameters()).data_ptr())
    engines = _ENGINES.setdefault(model, OrderedDict())
    if key not in engines:
        engines[key] = SamplingEngine(model, batch, grid, options, compiled=kind == "compile", autocast=autocast)
        while len(engines) > CACHED_ENGINES:
            engines.popitem(last=False)
    engines.move_to_end(key)
    return engines[key]


def resolve_engine(engine: str, device: torch.device) -> str:
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    return ("graph" if device.type == "cuda" else "eager") if engine == "auto" else engine


@torch.inference_mode()
def sample_tokens(model: PUTModel, features: torch.Tensor, known: torch.Tensor, tokens: torch.Tensor,
                  options: SamplingOptions = SamplingOptions(), seed: int | None = None, engine: str = "auto",
                  progress: Progress | None = None, known_fraction: torch.Tensor | None = None) -> torch.Tensor:
    """Iterative sampling (see put/sampling.py) by the engine `engine` names; the same tokens whichever runs it."""
    kind = resolve_engine(engine, features.device)
    if kind == "eager":
        return sample_iterative(model, features, known, tokens, options, seed, progress, known_fraction)
    return engine_for(model, features.shape[0], tuple(features.shape[-2:]), options, kind).run(
        features, known, tokens, seed, progress, known_fraction)


@torch.inference_mode()
def inpaint_batch(model: PUTModel, images: torch.Tensor, keep_mask: torch.Tensor, mode: str = "iterative",
                  options: SamplingOptions = SamplingOptions(), seed: int | None = None,
                  composite: bool = False, engine: str = "auto", progress: Progress | None = None) -> torch.Tensor:
    """images (B, 3, H, W) in [-1, 1], keep_mask (B, 1, H, W) -> inpainted images in [-1, 1].
    `progress(done, total)` is called after each forward pass."""
    features, known, tokens = model.transformer_inputs(images, keep_mask)
    fraction = model.pvqvae.known_fraction(keep_mask)
    if mode == "all":
        tokens = sample_all_at_once(model, features, known, tokens, fraction)
        if progress is not None:
            progress(1, 1)
    elif mode == "iterative":
        tokens = sample_tokens(model, features, known, tokens, options, seed, engine, progress, fraction)
    else:
        raise ValueError(f"sampling mode must be 'iterative' or 'all', got {mode!r}")
    return model.decode(tokens, keep_mask, images, composite=composite)

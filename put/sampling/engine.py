"""The sampling engine: the exact iterative step on fixed buffers, captured as one CUDA graph on GPUs; and
`sample_tokens` / `inpaint_batch`, every caller's entry (eager sampler off CUDA). A `Sampler` draws the same tokens
as the eager sampler and falls back to it if a capture fails (docs/serving.md, "Sampling on GPUs")."""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict

import torch

from put.errors import InputError
from put.models.put_model import PUTModel
from put.models.seeding import run_seed, step_uniform
from put.sampling.eager import choose, sample_all_at_once, sample_iterative, sampler_inputs, write_back
from put.sampling.schedules import Progress, SamplingOptions, plan, static_shape

ENGINES = ("auto", "eager", "graph", "compile")
WARMUP_STEPS = 3  # run before a capture, on a side stream (allocator, cuBLAS handles, compilation)
CACHED_ENGINES = 8  # per sampler: the batch sizes and settings of one sampling stage fit
CAPTURE_LOCK = threading.Lock()  # one engine built and captured at a time, whichever thread asks


class SamplingEngine:
    """Static buffers and the step for one (model, batch, grid, options, precision); `run` samples."""

    @torch.inference_mode()
    def __init__(self, model: PUTModel, batch: int, grid: tuple[int, int], options: SamplingOptions,
                 compiled: bool = False, autocast: tuple[bool, torch.dtype] = (False, torch.bfloat16)):
        self.model, self.options, self.autocast = model, options, autocast
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

    @torch.inference_mode()
    def capture(self) -> None:
        """On CUDA: warm-up steps on a side stream, then the step captured (on whatever the buffers hold: `run`
        loads them). Thread-local capture mode: other threads' allocations and kernels do not invalidate it."""
        if not self.captured or self.graph is not None:
            return
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                self.step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self.step()
        self.graph = graph

    @torch.inference_mode()
    def run(self, features: torch.Tensor, known: torch.Tensor, tokens: torch.Tensor, seed: int | None = None,
            progress: Progress | None = None, known_fraction: torch.Tensor | None = None) -> torch.Tensor:
        """As put/sampling/eager.py `sample_iterative`, on this engine's buffers (captured first if not yet)."""
        self.capture()
        b, _, h, w = features.shape
        x, code_inputs, positions = sampler_inputs(self.model, features, known_fraction)
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


class Sampler:
    """Iterative sampling of one model by the engine `engine` names, for one caller (not shared across threads):
    the engines it built for graph/compile, by shape, settings and precision, reused by its later batches."""

    def __init__(self, model: PUTModel, engine: str = "auto") -> None:
        self.model = model
        self.kind = resolve_engine(engine, next(model.parameters()).device)
        self.engines: OrderedDict[tuple, SamplingEngine] = OrderedDict()
        self.fallback: str | None = None  # why it went back to the eager sampler, if it did

    @torch.inference_mode()
    def __call__(self, features: torch.Tensor, known: torch.Tensor, tokens: torch.Tensor,
                 options: SamplingOptions = SamplingOptions(), seed: int | None = None,
                 progress: Progress | None = None, known_fraction: torch.Tensor | None = None) -> torch.Tensor:
        engine = None if self.kind == "eager" else self.engine(features.shape[0], tuple(features.shape[-2:]), options)
        if engine is None:
            return sample_iterative(self.model, features, known, tokens, options, seed, progress, known_fraction)
        return engine.run(features, known, tokens, seed, progress, known_fraction)

    def engine(self, batch: int, grid: tuple[int, int], options: SamplingOptions) -> SamplingEngine | None:
        """The engine for these shapes, settings and the current autocast state, built and captured on first use;
        None once building or capturing one failed (said once, on stderr)."""
        device = next(self.model.parameters()).device
        autocast = (torch.is_autocast_enabled(device.type), torch.get_autocast_dtype(device.type))
        key = (batch, tuple(grid), options, autocast)
        if key not in self.engines:
            try:
                with CAPTURE_LOCK:
                    engine = SamplingEngine(self.model, batch, grid, options, self.kind == "compile", autocast)
                    engine.capture()
            except Exception as err:  # any reason: the eager sampler draws the same tokens, only slower
                self.fallback = f"{type(err).__name__}: {err}".strip().splitlines()[0]
                print(f"sampling: the {self.kind} engine failed ({self.fallback}); continuing with the eager "
                      "sampler", file=sys.stderr, flush=True)
                self.kind, self.engines = "eager", OrderedDict()
                return None
            self.engines[key] = engine
            while len(self.engines) > CACHED_ENGINES:
                self.engines.popitem(last=False)
        self.engines.move_to_end(key)
        return self.engines[key]


def resolve_engine(engine: str, device: torch.device) -> str:
    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    return ("graph" if device.type == "cuda" else "eager") if engine == "auto" else engine


@torch.inference_mode()
def sample_tokens(model: PUTModel, features: torch.Tensor, known: torch.Tensor, tokens: torch.Tensor,
                  options: SamplingOptions = SamplingOptions(), seed: int | None = None,
                  engine: str | Sampler = "auto", progress: Progress | None = None,
                  known_fraction: torch.Tensor | None = None) -> torch.Tensor:
    """Iterative sampling by `engine`: a caller's Sampler, or an engine's name (for this call only); the same tokens
    either way. `known_fraction` (B,): known pixel fractions for TPAMI's mask embedding (None for CVPR)."""
    sampler = engine if isinstance(engine, Sampler) else Sampler(model, engine)
    return sampler(features, known, tokens, options, seed, progress, known_fraction)


@torch.inference_mode()
def inpaint_batch(model: PUTModel, images: torch.Tensor, keep_mask: torch.Tensor, mode: str = "iterative",
                  options: SamplingOptions = SamplingOptions(), seed: int | None = None,
                  composite: bool = False, engine: str | Sampler = "auto",
                  progress: Progress | None = None) -> torch.Tensor:
    """images (B, 3, H, W) in [-1, 1], keep_mask (B, 1, H, W) -> inpainted images in [-1, 1].
    `engine` as in `sample_tokens`; `progress(done, total)` is called after each forward pass."""
    if mode not in ("all", "iterative"):
        raise InputError(f"sampling mode must be 'iterative' or 'all', got {mode!r}")
    features, known, tokens = model.transformer_inputs(images, keep_mask)
    fraction = model.pvqvae.known_fraction(keep_mask)
    if mode == "all":
        tokens = sample_all_at_once(model, features, known, tokens, fraction)
        if progress is not None:
            progress(1, 1)
    else:
        tokens = sample_tokens(model, features, known, tokens, options, seed, engine, progress, fraction)
    return model.decode(tokens, keep_mask, images, composite=composite)

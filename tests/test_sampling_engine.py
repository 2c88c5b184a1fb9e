"""The sampling engine (static buffers, the step the GPU captures, run here without capture) draws exactly the
eager sampler's tokens for the same seed, over batches, N tokens per step, cosine schedules, top-K,
temperature and both position rules; a caller's sampler reuses its engines across batches; `auto` is eager on
CPU; an engine that cannot be built or captured leaves the caller with the eager sampler, said in one line."""

from __future__ import annotations

import pytest
import torch

from put.models.put_model import PUTModel
from put.sampling.eager import sample_iterative
from put.sampling.engine import Sampler, SamplingEngine, inpaint_batch, resolve_engine, sample_tokens
from put.sampling.schedules import SamplingOptions
from tests.conftest import TINY, random_batch

SETTINGS = [
    SamplingOptions(top_k=5),
    SamplingOptions(top_k=3, temperature=0.5),
    SamplingOptions(top_k=50, tokens_per_step=3),
    SamplingOptions(top_k=4, steps=3),
    SamplingOptions(top_k=4, steps=40, position_rule="prob"),
    SamplingOptions(top_k=1, tokens_per_step=2, position_rule="prob"),
]


@pytest.fixture(scope="module")
def model() -> PUTModel:
    torch.manual_seed(0)
    m = PUTModel(TINY.model_copy(update={"image_size": 48})).eval()
    with torch.no_grad():  # logits of a few units: the top-K draws are far from deterministic
        m.transformer.head.weight.normal_(0, 0.5)
    return m


def inputs(model, batch: int, seed: int = 0):
    """`batch` rows with holes of different sizes (row 1: one masked patch only)."""
    images, keep = random_batch(batch, size=48, seed=seed)
    if batch > 1:
        keep[1] = 1
        keep[1, :, 8:14, 16:22] = 0
    return model.transformer_inputs(images, keep)


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: f"k{o.top_k}_t{o.temperature}_n{o.tokens_per_step}_"
                                                            f"s{o.steps}_{o.position_rule}")
@pytest.mark.parametrize("batch", [1, 3])
def test_engine_draws_the_eager_samplers_tokens(model, options, batch):
    features, known, tokens = inputs(model, batch)
    eager = sample_iterative(model, features, known, tokens, options, seed=5)
    engine = sample_tokens(model, features, known, tokens, options, seed=5, engine="graph")
    assert torch.equal(engine, eager)
    assert torch.equal(engine[known], tokens[known])
    if options.top_k > 1:  # the seed matters
        assert not torch.equal(sample_tokens(model, features, known, tokens, options, seed=6, engine="graph"), eager)


def test_engine_is_reused_and_reloaded_between_batches(model):
    """A second batch of the same shape runs on the same engine's buffers, from its own inputs and seed; the
    engines belong to the sampler that built them, not to the model."""
    options = SamplingOptions(top_k=5, tokens_per_step=2)
    first, second = inputs(model, 2, seed=0), inputs(model, 2, seed=1)
    sampler = Sampler(model, "graph")
    engine = sampler.engine(2, tuple(first[0].shape[-2:]), options)
    assert sampler.engine(2, tuple(first[0].shape[-2:]), options) is engine
    assert Sampler(model, "graph").engine(2, tuple(first[0].shape[-2:]), options) is not engine
    for features, known, tokens in (first, second, first):
        assert torch.equal(sampler(features, known, tokens, options, seed=9),
                           sample_iterative(model, features, known, tokens, options, seed=9))
    assert list(sampler.engines.values()) == [engine]


def test_engine_under_bf16_autocast_equals_eager_under_it(model):
    """The caller's autocast reaches the engine's blocks as it reaches the eager sampler's (its own engine)."""
    features, known, tokens = inputs(model, 2)
    options = SamplingOptions(top_k=5)
    sampler = Sampler(model, "graph")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager = sample_iterative(model, features, known, tokens, options, seed=2)
        engine = sampler(features, known, tokens, options, seed=2)
        assert sampler.engine(2, tuple(features.shape[-2:]), options).autocast[0]
    assert torch.equal(engine, eager)


def test_auto_is_eager_on_cpu_and_bad_names_are_errors(model):
    assert resolve_engine("auto", torch.device("cpu")) == "eager"
    assert resolve_engine("auto", torch.device("cuda")) == "graph"
    images, keep = random_batch(1, size=48)
    with pytest.raises(ValueError, match="engine must be one of"):
        inpaint_batch(model, images, keep, options=SamplingOptions(), seed=0, engine="fast")


def test_inpaint_batch_through_the_engine_equals_eager(model):
    images, keep = random_batch(2, size=48)
    a = inpaint_batch(model, images, keep, "iterative", SamplingOptions(top_k=5), seed=4, engine="graph")
    b = inpaint_batch(model, images, keep, "iterative", SamplingOptions(top_k=5), seed=4, engine="eager")
    assert torch.equal(a, b)


def test_a_failed_capture_falls_back_to_the_eager_sampler_in_one_line(model, monkeypatch, capsys):
    """As a CUDA capture that fails (here made to fail on the CPU): the same tokens, from the eager sampler, one
    line naming the cause, and no second attempt for the caller's later batches."""
    attempts = []

    def fail(engine):
        attempts.append(engine)
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore detail")

    monkeypatch.setattr(SamplingEngine, "capture", fail)
    features, known, tokens = inputs(model, 2)
    options = SamplingOptions(top_k=5, steps=3)
    sampler = Sampler(model, "graph")
    for seed in (3, 4):
        assert torch.equal(sampler(features, known, tokens, options, seed=seed),
                           sample_iterative(model, features, known, tokens, options, seed=seed))
    assert len(attempts) == 1 and sampler.kind == "eager" and not sampler.engines
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["sampling: the graph engine failed (RuntimeError: CUDA error: operation not permitted when "
                     "stream is capturing); continuing with the eager sampler"]


def test_a_command_whose_capture_fails_goes_on_with_the_eager_sampler(monkeypatch, capsys, tmp_path):
    """`put bench sampling --engine graph` with the capture failing: exit 0, the row says what ran, one line why."""
    import json

    from put.cli import main

    def fail(engine):
        raise RuntimeError("CUDA error: operation failed due to a previous error during capture")

    monkeypatch.setattr(SamplingEngine, "capture", fail)
    out = tmp_path / "bench.json"
    assert main(["bench", "sampling", "--preset", "demo", "--engine", "graph", "--steps", "1", "--device", "cpu",
                 "--out", str(out)]) == 0
    assert [row["engine"] for row in json.loads(out.read_text())] == ["eager"]
    assert ("sampling: the graph engine failed (RuntimeError: CUDA error: operation failed due to a previous error "
            "during capture); continuing with the eager sampler") in capsys.readouterr().err.splitlines()

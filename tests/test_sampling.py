"""Sampling: top-K membership, seeding, all-at-once = argmax, N tokens per step, the cosine schedule,
pluralistic batches."""

from __future__ import annotations

import pytest
import torch

from put.models.put_model import PUTModel
from put.sampling.eager import draw_top_k, sample_all_at_once, sample_iterative
from put.sampling.engine import inpaint_batch
from put.sampling.schedules import SamplingOptions, step_counts
from tests.conftest import TINY, random_batch


@pytest.fixture(scope="module")
def model() -> PUTModel:
    torch.manual_seed(0)
    m = PUTModel(TINY).eval()
    with torch.no_grad():  # a non-trivial head so that logits differ between positions
        m.transformer.head.weight.normal_(0, 1.0)
    return m


def inputs(model, batch=3):
    images, keep = random_batch(1)
    return model.transformer_inputs(images.expand(batch, -1, -1, -1), keep.expand(batch, -1, -1, -1))


def test_draw_top_k_only_draws_from_the_top_k():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 100, generator=g)
    top = logits.topk(5, dim=-1).indices
    for _ in range(20):
        drawn = draw_top_k(logits, 5, 1.0, torch.rand(64, 5, generator=g))
        assert (drawn.unsqueeze(-1) == top).any(-1).all()


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_gumbel_max_draws_follow_the_softmax_of_the_top_k(temperature):
    """Frequencies of 40,000 draws (noise from put/models/seeding.py, as the sampler takes it) against the softmax of
    the top 3 of 5 logits times the temperature: within 4 standard errors, and never outside the top 3."""
    from put.models.seeding import step_uniform

    logits = torch.tensor([2.0, 0.5, 1.0, -3.0, 1.5])
    draws = draw_top_k(logits.expand(40000, -1), 3, temperature, step_uniform(11, 0, torch.empty(40000, 3)))
    counts = torch.bincount(draws, minlength=5).double() / len(draws)
    top = torch.tensor([0, 4, 2])
    expected = torch.zeros(5, dtype=torch.double)
    expected[top] = torch.softmax(logits[top].double() * temperature, 0)
    error = (expected * (1 - expected) / len(draws)).sqrt()
    assert (counts[[1, 3]] == 0).all() and ((counts - expected).abs() <= 4 * error + 1e-12).all()


def test_iterative_tokens_are_in_the_top_k_of_their_step(model, monkeypatch):
    """Record each step's logits and check every drawn token against the top-K of its position."""
    seen = []
    original = model.transformer.forward_embedded

    def spy(x):
        logits = original(x)
        seen.append(logits.clone())
        return logits

    monkeypatch.setattr(model.transformer, "forward_embedded", spy)
    features, known, tokens = inputs(model)
    out = sample_iterative(model, features, known, tokens, SamplingOptions(top_k=3),
                           seed=1)
    masked = (~known).flatten(1)
    n_masked = int(masked[0].sum())
    assert len(seen) == n_masked  # one forward per masked patch
    # Replay: position chosen at each step = largest max-logit among still-masked positions.
    remaining = masked.clone()
    for logits in seen:
        score = logits.amax(-1).masked_fill(~remaining, float("-inf"))
        pos = score.argmax(1)
        top3 = logits[torch.arange(3), pos].topk(3, -1).indices
        assert (out.flatten(1)[torch.arange(3), pos].unsqueeze(-1) == top3).any(-1).all()
        remaining[torch.arange(3), pos] = False
    assert not remaining.any()
    assert torch.equal(out[known], tokens[known])  # known tokens untouched


def test_same_seed_same_tokens_and_pluralistic_rows_differ(model):
    features, known, tokens = inputs(model, batch=4)
    opts = SamplingOptions(top_k=10)
    a = sample_iterative(model, features, known, tokens, opts, seed=7)
    b = sample_iterative(model, features, known, tokens, opts, seed=7)
    c = sample_iterative(model, features, known, tokens, opts, seed=8)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert len({tuple(row.flatten().tolist()) for row in a}) > 1  # B samples of one input differ


def test_all_at_once_equals_argmax(model):
    features, known, tokens = inputs(model)
    out = sample_all_at_once(model, features, known, tokens)
    with torch.no_grad():
        argmax = model.transformer(features).argmax(-1).view_as(tokens)
    assert torch.equal(out[~known], argmax[~known])
    assert torch.equal(out[known], tokens[known])


def test_top_1_iterative_is_deterministic_without_seed(model):
    features, known, tokens = inputs(model, batch=2)
    a = sample_iterative(model, features, known, tokens, SamplingOptions(top_k=1))
    b = sample_iterative(model, features, known, tokens, SamplingOptions(top_k=1))
    assert torch.equal(a, b)


@pytest.mark.parametrize("n", [2, 3, 100])
def test_n_tokens_per_step_fills_every_position_in_fewer_forwards(model, monkeypatch, n):
    calls = []
    original = model.transformer.forward_embedded
    monkeypatch.setattr(model.transformer, "forward_embedded", lambda x: calls.append(1) or original(x))
    features, known, tokens = inputs(model, batch=2)
    out = sample_iterative(model, features, known, tokens, SamplingOptions(top_k=5, tokens_per_step=n),
                           seed=0)
    n_masked = int((~known[0]).sum())
    assert len(calls) == -(-n_masked // n)
    assert out.max() < TINY.pvqvae.codebook_size and out.min() >= 0


def test_rows_with_different_masks_in_one_batch(model):
    images, keep = random_batch(2)
    keep[1] = 1
    keep[1, :, :8, :8] = 0  # row 1 has a single masked patch
    features, known, tokens = model.transformer_inputs(images, keep)
    out = sample_iterative(model, features, known, tokens, SamplingOptions(top_k=5), seed=0)
    assert torch.equal(out[1][known[1]], tokens[1][known[1]])
    assert out.max() < TINY.pvqvae.codebook_size


@pytest.mark.parametrize("mode", ["iterative", "all"])
def test_inpaint_batch_composites_known_pixels(model, mode):
    images, keep = random_batch(2)
    out = inpaint_batch(model, images, keep, mode, SamplingOptions(top_k=5), seed=0,
                        composite=True)
    assert out.shape == images.shape
    assert torch.equal(out[keep.bool().expand_as(out)], images[keep.bool().expand_as(images)])
    raw = inpaint_batch(model, images, keep, mode, SamplingOptions(top_k=5), seed=0)
    assert raw.min() >= -1 and raw.max() <= 1


@pytest.mark.parametrize("steps", [1, 4, 8, 16])
def test_cosine_counts_sum_to_the_masked_count_in_exactly_s_steps(steps):
    masked = torch.tensor([0, 1, 3, 16, 17, 100, 577, 703, 1024])
    counts = step_counts(masked, steps=steps)
    assert counts.shape == (steps, len(masked))
    assert torch.equal(counts.sum(0), masked)
    assert (counts >= 0).all()
    needed = (counts > 0).sum(0)
    assert torch.equal(needed, masked.clamp(max=steps))  # S steps exactly, fewer only with fewer positions
    assert torch.equal(counts[:, masked >= steps].clamp(max=1), torch.ones_like(counts[:, masked >= steps]))


def test_cosine_counts_follow_the_cosine():
    """What is still masked after step s is S - s + floor((N - S) cos(pi/2 s/S)): few early, many late."""
    n, steps = torch.tensor([703]), 8
    counts = step_counts(n, steps=steps)[:, 0]
    done = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
    s = torch.arange(steps + 1)
    expected_left = steps - s + torch.floor((703 - steps) * torch.cos(torch.pi / 2 * s.double() / steps)).long()
    assert torch.equal(703 - done, expected_left)
    assert counts[0] < counts[steps // 2] and counts.argmax() >= steps // 2


@pytest.mark.parametrize("n", [1, 2, 5, 64])
def test_tokens_per_step_counts(n):
    masked = torch.tensor([0, 7, 13])
    counts = step_counts(masked, tokens_per_step=n)
    assert counts.shape[0] == -(-13 // n) and torch.equal(counts.sum(0), masked) and counts.max() <= n


def test_cosine_schedule_coincides_with_tokens_per_step(model):
    """S = N masked positions is one token per step; S = 1 is all of them in one step: the same steps, and the
    same tokens by top-1 (top-K draws differ: a step's noise has the shape of its ranked positions, which the
    cosine schedule sizes for any masked count)."""
    features, known, tokens = inputs(model, batch=2)
    n_masked = int((~known[0]).sum())
    for schedule, per_step in ((n_masked, 1), (1, n_masked)):
        assert torch.equal(step_counts(torch.tensor([n_masked]), steps=schedule),
                           step_counts(torch.tensor([n_masked]), tokens_per_step=per_step))
        a = sample_iterative(model, features, known, tokens, SamplingOptions(top_k=1, steps=schedule))
        b = sample_iterative(model, features, known, tokens, SamplingOptions(top_k=1, tokens_per_step=per_step))
        assert torch.equal(a, b)


@pytest.mark.parametrize("steps", [1, 3, 100])
def test_cosine_schedule_runs_exactly_s_forwards(model, monkeypatch, steps):
    calls = []
    original = model.transformer.forward_embedded
    monkeypatch.setattr(model.transformer, "forward_embedded", lambda x: calls.append(1) or original(x))
    images, keep = random_batch(2)
    keep[1] = 1
    keep[1, :, :8, :8] = 0  # row 1: a single masked patch, done after its first step
    features, known, tokens = model.transformer_inputs(images, keep)
    out = sample_iterative(model, features, known, tokens, SamplingOptions(top_k=5, steps=steps),
                           seed=0)
    assert len(calls) == min(steps, int((~known[0]).sum()))
    assert torch.equal(out[known], tokens[known]) and out.max() < TINY.pvqvae.codebook_size


def test_bad_options_are_errors():
    with pytest.raises(ValueError, match="top_k"):
        SamplingOptions(top_k=0)
    with pytest.raises(ValueError, match="tokens_per_step"):
        SamplingOptions(tokens_per_step=0)
    with pytest.raises(ValueError, match="steps"):
        SamplingOptions(steps=0)

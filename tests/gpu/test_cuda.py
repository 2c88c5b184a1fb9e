"""CUDA correctness, for anyone with a GPU (`make test-gpu`; skipped without CUDA): both training stages at FFHQ
size in bf16 on generated data (finite, falling losses), SIGTERM and resume on CUDA against an uninterrupted
run, fp32 code search and sampler decisions under bf16 autocast, the captured engine against the eager sampler
(captures in several threads too), and the demo DAG's stages on CUDA."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from put.bench.train import build_task
from put.config import model_config
from put.config import preset as load_preset
from put.models.checkpoint import load_checkpoint
from put.models.put_model import PUTModel
from put.models.seeding import derive_seed
from put.sampling.eager import sample_iterative
from put.sampling.engine import sample_tokens
from put.sampling.schedules import SamplingOptions
from put.train.loop import TrainingStopped, finite_or_raise, resume_path
from tests.tiny_training import TINY_PARAMS, params, stop_at

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
CUDA = torch.device("cuda")
ROOT = Path(__file__).resolve().parents[2]


def structured_images(count: int, size: int, seed: int = 0) -> torch.Tensor:
    """Smooth random images (bicubically upsampled 8x8 noise): something a model can learn in a few hundred
    steps, unlike white noise."""
    g = torch.Generator().manual_seed(seed)
    return F.interpolate(torch.rand(count, 3, 8, 8, generator=g) * 2 - 1, size=size, mode="bicubic").clamp(-1, 1)


@pytest.mark.parametrize("stage", ["pvqvae", "transformer"])
def test_both_stages_train_at_ffhq_size_in_bf16(stage, tmp_path):
    """300 steps of the stage's own training step at FFHQ size, bf16 autocast (the P-VQVAE's adversarial,
    perceptual and style terms from step 150): every loss finite, and the reconstruction (P-VQVAE) or masked-token
    loss of the last 30 steps well below the first 30's (a fixed batch of smooth images: learnable)."""
    steps = 300
    updates = {"iterations": steps, "warmup": 10}
    if stage == "pvqvae":
        updates["loss"] = load_preset("ffhq").pvqvae_train.loss.model_copy(update={"delayed_start": steps // 2})
    task, (images, *keeps), train = build_task(stage, "ffhq", 8, CUDA, tmp_path, **updates)
    batch = (structured_images(8, images.shape[-1]).to(CUDA), *keeps)
    key = "pixel" if stage == "pvqvae" else "masked_token_loss"
    losses = []
    for step in range(steps):
        torch.manual_seed(derive_seed(train.seed, step, 0))
        terms = task.train_step(batch, step)
        finite_or_raise(terms, step, task.dist, None)
        losses.append(float(terms[key]))
    first, last = sum(losses[:30]) / 30, sum(losses[-30:]) / 30
    assert last < 0.9 * first, (first, last)
    if stage == "pvqvae":
        assert {"adversarial", "perceptual", "style", "discriminator"} <= set(terms)


@pytest.mark.parametrize("stage", ["pvqvae", "transformer"])
def test_sigterm_and_resume_on_cuda_continue_the_uninterrupted_run(workdir, tmp_path, monkeypatch, stage):
    """The CPU test's interruption (tests/test_training.py), on CUDA in bf16: the resumed run ends where the
    uninterrupted one does, to bf16 tolerance (GPU kernels may sum in another order)."""
    from put.stages.train import train_pvqvae, train_transformer
    from put.train.pvqvae import PVQVAETask
    from put.train.transformer import TransformerTask

    p = params(workdir)
    pvqvae = workdir / "cuda_pvqvae.pt"
    if not pvqvae.exists():
        train_pvqvae(p, "put", workdir / "splits", pvqvae, device="cuda")

    def run(out):
        if stage == "pvqvae":
            return train_pvqvae(p, "put", workdir / "splits", out, device="cuda")
        return train_transformer(p, "put", pvqvae, workdir / "splits", out, device="cuda")

    straight, resumed = tmp_path / "straight.pt", tmp_path / "resumed.pt"
    run(straight)
    task_cls = PVQVAETask if stage == "pvqvae" else TransformerTask
    with monkeypatch.context() as m:
        m.setattr(task_cls, "train_step", stop_at(4, task_cls))
        with pytest.raises(TrainingStopped):
            run(resumed)
    assert load_checkpoint(resume_path(resumed)).training["step"] == 5
    run(resumed)
    a, b = load_checkpoint(straight), load_checkpoint(resumed)
    assert a.training["step"] == b.training["step"] == TINY_PARAMS["overrides"][f"{stage}_train"]["iterations"]
    for name, value in a.model.items():
        if value.is_floating_point():
            scale = value.float().norm().clamp_min(1e-6)
            assert (value.float() - b.model[name].float()).norm() / scale < 2e-2, name


@pytest.fixture(scope="module")
def ffhq_model() -> PUTModel:
    torch.manual_seed(0)
    return PUTModel(model_config("ffhq")).eval().to(CUDA)


def ffhq_inputs(model: PUTModel, batch: int, seed: int = 0):
    images = structured_images(batch, 256, seed).to(CUDA)
    keep = torch.ones(batch, 1, 256, 256, device=CUDA)
    keep[..., 64:120, 40:150] = 0  # 8 x 15 token rows and columns, some partly masked
    with torch.inference_mode():
        return model.transformer_inputs(images, keep)


def test_code_search_under_bf16_autocast_equals_fp32(ffhq_model):
    """Code indices from the same encoder features, with and without bf16 autocast (the search runs in fp32)."""
    images = structured_images(4, 256).to(CUDA)
    keep = torch.ones(4, 1, 256, 256, device=CUDA)
    keep[..., 100:180, 60:200] = 0
    with torch.inference_mode():
        features = ffhq_model.pvqvae.encode(images, keep)
        exact = ffhq_model.pvqvae.quantize(features, keep).indices
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert torch.equal(ffhq_model.pvqvae.quantize(features, keep).indices, exact)


@pytest.mark.parametrize("tokens_per_step", [1, 4])
def test_sampler_decisions_under_bf16_autocast_equal_fp32(ffhq_model, tokens_per_step):
    """Positions and tokens of top-1 sampling depend on the blocks' precision only: without blocks, bf16 autocast
    changes nothing (input projection, head, scores and draws run in fp32), eager and engine alike."""
    model = PUTModel(model_config("ffhq")).eval().to(CUDA)
    model.load_state_dict(ffhq_model.state_dict())
    model.transformer.blocks = nn.ModuleList()
    with torch.no_grad():
        model.transformer.pos_emb.normal_(std=3)
        model.transformer.head.weight.mul_(50)
    features, known, tokens = ffhq_inputs(model, 2)
    options = SamplingOptions(top_k=1, tokens_per_step=tokens_per_step)
    for engine in ("eager", "graph"):
        exact = sample_tokens(model, features, known, tokens, options, seed=0, engine=engine)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert torch.equal(sample_tokens(model, features, known, tokens, options, seed=0, engine=engine), exact)


@pytest.mark.parametrize("bf16", [True, False])
@pytest.mark.parametrize("options", [SamplingOptions(top_k=50), SamplingOptions(top_k=50, tokens_per_step=20),
                                     SamplingOptions(top_k=10, steps=8, temperature=0.7, position_rule="prob")],
                         ids=["k50", "k50_n20", "cosine8_prob"])
def test_captured_engine_draws_the_eager_samplers_tokens_on_cuda(ffhq_model, options, bf16):
    """The CUDA graph replays the eager step: the same tokens for the same seed, at batch 1 and 3."""
    for batch in (1, 3):
        features, known, tokens = ffhq_inputs(ffhq_model, batch)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            eager = sample_iterative(ffhq_model, features, known, tokens, options, seed=11)
            graph = sample_tokens(ffhq_model, features, known, tokens, options, seed=11, engine="graph")
            again = sample_tokens(ffhq_model, features, known, tokens, options, seed=11, engine="graph")
        assert torch.equal(graph, eager) and torch.equal(again, eager)


def test_captures_in_several_threads_while_another_loads_a_model(ffhq_model):
    """As `put serve` runs: one worker thread per model, each capturing its own sampler's engines while another
    thread loads a model onto the GPU and runs eager kernels. Thread-local capture, one capture at a time: no
    capture fails (none falls back to the eager sampler) and each draws the eager sampler's tokens."""
    import threading

    from put.sampling.engine import Sampler

    options = SamplingOptions(top_k=50, tokens_per_step=4)
    inputs = [ffhq_inputs(ffhq_model, batch) for batch in (1, 2, 3)]
    expected = [sample_iterative(ffhq_model, *batch, options, seed=5) for batch in inputs]
    samplers = [Sampler(ffhq_model, "graph") for _ in inputs]
    results, errors, stop = [None] * len(inputs), [], threading.Event()

    def worker(i: int) -> None:
        try:
            results[i] = samplers[i](*inputs[i], options, seed=5)
        except Exception as err:  # reported below
            errors.append(err)

    def busy() -> None:  # a model loaded, kernels launched, memory allocated and freed, until the workers end
        while not stop.is_set():
            other = PUTModel(model_config("demo")).to(CUDA)
            (other.transformer.pos_emb @ other.transformer.pos_emb.transpose(1, 2)).sum().item()
            del other

    noise = threading.Thread(target=busy)
    noise.start()
    workers = [threading.Thread(target=worker, args=(i,)) for i in range(len(inputs))]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    stop.set()
    noise.join()
    assert not errors and all(s.kind == "graph" and s.fallback is None for s in samplers)
    for result, exact in zip(results, expected):
        assert torch.equal(result, exact)


def test_compiled_engine_samples_valid_tokens_reproducibly(ffhq_model):
    """The compiled forward differs from eager in rounding only, so its tokens are not compared with the eager
    sampler's (a random model's near-tied logits flip): shapes, codes in range, known tokens kept, and the same
    tokens for the same seed."""
    features, known, tokens = ffhq_inputs(ffhq_model, 2)
    options = SamplingOptions(top_k=50)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        first = sample_tokens(ffhq_model, features, known, tokens, options, seed=0, engine="compile")
        again = sample_tokens(ffhq_model, features, known, tokens, options, seed=0, engine="compile")
    assert torch.equal(first, again) and torch.equal(first[known], tokens[known])
    assert first.shape == tokens.shape and 0 <= first.min() and first.max() < ffhq_model.config.pvqvae.codebook_size


def test_demo_dag_stages_on_cuda(tmp_path):
    """split, masks, both trainings, sampling (engine) and, where its packages exist, evaluation of the demo
    preset on CUDA, through the command line as the DAG runs them."""
    env = {**os.environ, "PUT_TRACKING": "0", "TQDM_DISABLE": "1"}
    out = tmp_path / "demo"

    def put(*args: str) -> None:
        result = subprocess.run([sys.executable, "-m", "put", *args], cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]

    common = ("--preset", "demo")
    put("split", *common, "--out", str(out / "splits"))
    put("masks", *common, "--split", str(out / "splits"), "--out", str(out / "masks"))
    put("train-pvqvae", *common, "--variant", "put", "--split", str(out / "splits"), "--out", str(out / "pvqvae.pt"),
        "--curves", str(out / "pc"), "--device", "cuda")
    put("train-transformer", *common, "--variant", "put", "--split", str(out / "splits"), "--pvqvae",
        str(out / "pvqvae.pt"), "--out", str(out / "transformer.pt"), "--curves", str(out / "tc"), "--device", "cuda")
    put("sample", *common, "--variant", "put", "--checkpoint", str(out / "transformer.pt"), "--masks",
        str(out / "masks"), "--out", str(out / "samples"), "--device", "cuda")
    assert len(list((out / "samples").rglob("*.png"))) > 0
    try:
        import lpips  # noqa: F401
        import skimage  # noqa: F401
        import torch_fidelity  # noqa: F401
    except ImportError:
        pytest.skip("evaluation's packages (scikit-image, lpips, torch-fidelity) are not installed here")
    put("evaluate", *common, "--variant", "put", "--samples", str(out / "samples"), "--masks", str(out / "masks"),
        "--out", str(out / "metrics" / "put.json"))
    shutil.rmtree(out)

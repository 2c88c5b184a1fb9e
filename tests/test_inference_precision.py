"""--precision for inference (put/sampling/precision.py): auto takes bf16 on CUDA and fp32 on the CPU, bf16 is
refused where it would be emulated, and a bf16 run multiplies in bf16 but keeps the logits (whence the scores and
top-K) in fp32; the code search's fp32 under autocast is tests/test_precision.py's."""

from __future__ import annotations

import pytest
import torch

from put.errors import InputError
from put.sampling import precision
from put.sampling.inpaint import InpaintSettings, inpaint_tensors


def test_cpu_bf16_units_are_read_from_cpuinfo(tmp_path):
    with_units, without = tmp_path / "with", tmp_path / "without"
    with_units.write_text("flags\t\t: fpu sse avx512f avx512_bf16 avx512_vnni\n")
    without.write_text("flags\t\t: fpu sse avx2 avx512f\n")
    assert precision.cpu_has_bf16(with_units) and not precision.cpu_has_bf16(without)
    assert not precision.cpu_has_bf16(tmp_path / "absent")


@pytest.mark.parametrize("units", [True, False])
def test_auto_is_fp32_on_the_cpu_and_bf16_without_units_is_refused(monkeypatch, units):
    """auto is fp32 on any CPU (its bf16 would change the results from machine to machine: the parity tests of
    `put inpaint` against the authors' code fail under it), bf16 on CUDA; bf16 is asked of a CPU by name."""
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: units)
    assert precision.use_bf16("auto", "cpu") is False
    assert precision.use_bf16("auto", "cuda") is True
    assert precision.use_bf16("fp32", "cpu") is False
    if units:
        assert precision.use_bf16("bf16", "cpu") is True
    else:
        with pytest.raises(InputError, match="no bf16 units"):
            precision.use_bf16("bf16", "cpu")
    with pytest.raises(InputError, match="precision must be one of fp32, bf16, auto"):
        InpaintSettings(precision="half")


def test_a_bf16_run_multiplies_in_bf16_and_keeps_the_logits_fp32(tiny_checkpoints, monkeypatch):
    model = tiny_checkpoints[0]
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    seen = {}

    def record(name: str):
        return lambda module, inputs, out: seen.setdefault(name, out.dtype) and None  # None: output unchanged

    model.transformer.head.register_forward_hook(record("logits"))
    model.transformer.blocks[0].mlp.register_forward_hook(record("block"))
    image = torch.rand(3, 32, 32) * 2 - 1
    keep = torch.ones(1, 32, 32)
    keep[:, 8:24, 8:24] = 0
    out = inpaint_tensors(model, image, keep, InpaintSettings(samples=2, precision="bf16"))
    assert out.dtype == torch.float32 and out.shape == (2, 3, 32, 32)
    assert seen["block"] == torch.bfloat16  # the networks' matmuls ran in bf16 ...
    assert seen["logits"] == torch.float32  # ... the logits, whence the scores and top-K, not

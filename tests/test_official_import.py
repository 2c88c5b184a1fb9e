"""`put import-official`: every key of the authors' full-size models mapped, files read without running
pickled code, and clear errors for missing, extra or mis-shaped tensors and mismatched inputs."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest
import torch

from put.cli import main
from put.config import PRESETS
from put.models.discriminator import PatchDiscriminator
from put.models.put_model import PUTModel
from put.models.pvqvae import PVQVAE
from put.official import import_official, read_overrides
from put.official.keys import (
    KeyMappingError,
    check_against,
    infer_pvqvae_variant,
    pvqvae_state,
    split_transformer_checkpoint,
    transformer_state,
)
from put.official.load import Inert, OfficialCheckpointError, official_state_dict, read_official_file
from tests.official_fixtures import DEMO_OVERRIDES, FIXTURES, official_state, write_official

FULL_LAYOUTS = json.loads((FIXTURES / "official_full_layouts.json").read_text())


def meta_state(layout: dict) -> dict[str, torch.Tensor]:
    return {k: torch.empty(shape, device="meta") for k, shape in layout.items()}


@pytest.mark.parametrize("preset", ["ffhq", "places2", "imagenet"])
def test_every_key_of_the_full_size_models_maps_with_nothing_left_over(preset):
    """Their FFHQ / Places2 / ImageNet P-VQVAE (with its training losses) and transformer (with its
    content_codec), built from their configs: each tensor lands on one of ours with its shape, and each
    of ours is covered."""
    official = FULL_LAYOUTS[preset]
    with torch.device("meta"):
        model, disc = PUTModel(PRESETS[preset].model), PatchDiscriminator()
    pvqvae = meta_state(official["pvqvae"])
    sizes = model.config.pvqvae.codebook_size, model.config.pvqvae.masked_book_size
    assert infer_pvqvae_variant(pvqvae, *sizes) == "put"
    ours, theirs_disc = pvqvae_state(pvqvae)
    ours.add("codebook.initialized", model.pvqvae.codebook.initialized, "(set by the importer)")
    check_against(ours, model.pvqvae.state_dict(), "P-VQVAE")
    check_against(theirs_disc, disc.state_dict(), "discriminator")

    codec, own = split_transformer_checkpoint(meta_state(official["transformer"]))
    assert set(codec) == {k for k in official["pvqvae"] if not k.startswith("loss.")}
    check_against(transformer_state(own), model.transformer.state_dict(), "transformer")


class Evil:
    """Unpickling it for real would run a command that leaves a file behind."""

    def __init__(self, sentinel):
        self.sentinel = sentinel

    def __reduce__(self):
        return subprocess.check_call, (["touch", str(self.sentinel)],)


def test_pickled_objects_are_never_run(tmp_path, monkeypatch):
    """Their files may pickle classes of their package (optimizers, schedulers), numpy scalars or worse:
    each becomes an inert placeholder; nothing is imported or called."""
    sentinel = tmp_path / "ran"
    scheduler_module = types.ModuleType("image_synthesis.engine.lr_scheduler")

    class CosineAnnealingLRWithWarmup:
        def __setstate__(self, state):
            sentinel.touch()

    CosineAnnealingLRWithWarmup.__module__ = scheduler_module.__name__
    CosineAnnealingLRWithWarmup.__qualname__ = "CosineAnnealingLRWithWarmup"
    scheduler_module.CosineAnnealingLRWithWarmup = CosineAnnealingLRWithWarmup
    for name in ("image_synthesis", "image_synthesis.engine"):  # pickle imports the parents by name
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, scheduler_module.__name__, scheduler_module)
    state = {"w": torch.arange(3.0)}
    scheduler = CosineAnnealingLRWithWarmup()
    scheduler.last_epoch = 7  # pickled as state that their __setstate__ would receive
    payload = {"model": state, "scheduler": scheduler, "evil": Evil(sentinel),
               "spend_time": __import__("numpy").float64(1.5)}
    torch.save(payload, tmp_path / "theirs.pth")
    for name in ("image_synthesis", "image_synthesis.engine", scheduler_module.__name__):
        monkeypatch.delitem(sys.modules, name)  # as where the file is read: their code is absent

    loaded = read_official_file(tmp_path / "theirs.pth")
    assert torch.equal(official_state_dict(tmp_path / "theirs.pth")["w"], state["w"])
    assert isinstance(loaded["scheduler"], Inert) and isinstance(loaded["evil"], Inert)
    assert not sentinel.exists()


def test_files_pickling_blocked_modules_are_refused(tmp_path):
    class Shell:
        def __reduce__(self):
            import os
            return os.system, ("true",)

    torch.save({"model": {"w": torch.zeros(1)}, "x": Shell()}, tmp_path / "theirs.pth")
    with pytest.raises(OfficialCheckpointError, match=r"refused.*(posix|os)\.system"):
        read_official_file(tmp_path / "theirs.pth")


def test_unreadable_inputs_are_clear_errors(tmp_path):
    with pytest.raises(OfficialCheckpointError, match="no such checkpoint"):
        official_state_dict(tmp_path / "missing.pth")
    (tmp_path / "text.pth").write_text("not a checkpoint")
    with pytest.raises(OfficialCheckpointError, match="not a readable torch checkpoint"):
        official_state_dict(tmp_path / "text.pth")
    torch.save({"model": {"w": 1}, "last_epoch": 3}, tmp_path / "no_tensors.pth")
    with pytest.raises(OfficialCheckpointError, match="no state dict of tensors under 'model'"):
        official_state_dict(tmp_path / "no_tensors.pth")
    with pytest.raises(ValueError, match="give --pvqvae, --transformer or both"):
        import_official(tmp_path / "out", "demo")


@pytest.fixture
def demo_overrides():
    return read_overrides(DEMO_OVERRIDES)


def test_missing_extra_and_misshaped_tensors_name_the_key(tmp_path, demo_overrides):
    state = official_state("pvqvae_put")
    del state["decoder.up_layers.1.deconv.bias"]
    torch.save({"model": state}, tmp_path / "missing.pth")
    with pytest.raises(KeyMappingError, match=r"no tensor for our decoder\.up\.1\.bias"):
        import_official(tmp_path / "a", "demo", pvqvae=tmp_path / "missing.pth", model_overrides=demo_overrides)

    state = official_state("transformer_put")
    state["blocks.0.attn.gate.weight"] = torch.zeros(1)
    torch.save({"model": state}, tmp_path / "extra.pth")
    with pytest.raises(KeyMappingError, match=r"unexpected keys .*blocks\.0\.attn\.gate\.weight"):
        import_official(tmp_path / "b", "demo", transformer=tmp_path / "extra.pth", model_overrides=demo_overrides)

    # The demo preset itself has an 8-channel ladder; theirs is fixed at 64 * 2^level.
    source = write_official(tmp_path / "put.pth", "pvqvae_put")
    with pytest.raises(KeyMappingError, match=r"decoder\.up_layers\.0\.deconv\.weight has shape \(32, 256, 4, 4\) "
                                              r"in the checkpoint, but our decoder\.up\.0\.weight has shape "
                                              r"\(32, 32, 4, 4\)"):
        import_official(tmp_path / "c", "demo", pvqvae=source)


def test_variant_and_pairing_mismatches_are_errors(tmp_path, demo_overrides):
    source = write_official(tmp_path / "put.pth", "pvqvae_put")
    with pytest.raises(KeyMappingError, match="tensors are those of a 'put' P-VQVAE, which variant 'conv'"):
        import_official(tmp_path / "a", "demo", pvqvae=source, variant="conv", model_overrides=demo_overrides)
    transformer = write_official(tmp_path / "transformer.pth", "transformer_put")
    with pytest.raises(KeyMappingError, match="was trained on another P-VQVAE"):
        import_official(tmp_path / "b", "demo", pvqvae=source, transformer=transformer, model_overrides=demo_overrides)


def test_pvqvae_alone_and_a_matching_pair(tmp_path, demo_overrides):
    transformer = write_official(tmp_path / "transformer.pth", "transformer_put")
    codec, _ = split_transformer_checkpoint(official_state("transformer_put"))
    torch.save({"model": codec}, tmp_path / "pvqvae.pth")  # the P-VQVAE the transformer was trained on

    alone = import_official(tmp_path / "alone", "demo", pvqvae=tmp_path / "pvqvae.pth", model_overrides=demo_overrides)
    assert alone.transformer is None and alone.variant == "put"
    pair = import_official(tmp_path / "pair", "demo", pvqvae=tmp_path / "pvqvae.pth", transformer=transformer,
                           variant="qua0", model_overrides=demo_overrides)
    assert pair.variant == "qua0" and pair.config.transformer.random_quant_prob == 0.0
    from put.models.checkpoint import load_put_model, load_pvqvae
    model = load_put_model(pair.transformer)
    assert torch.equal(model.pvqvae.codebook.embed, load_pvqvae(alone.pvqvae)[0].codebook.embed)
    assert bool(model.pvqvae.codebook.initialized.all())  # no data-dependent init may overwrite trained books


def test_cli_reports_errors_without_a_traceback(tmp_path, capsys):
    source = write_official(tmp_path / "put.pth", "pvqvae_put")
    assert main(["import-official", "--pvqvae", str(source), "--preset", "demo", "--out", str(tmp_path / "o")]) == 2
    assert "put import-official: error:" in capsys.readouterr().err
    overrides = tmp_path / "overrides.yaml"
    overrides.write_text("pvqvae: {base_chanels: 64}\n")
    assert main(["import-official", "--pvqvae", str(source), "--preset", "demo", "--model-overrides",
                 str(overrides), "--out", str(tmp_path / "o")]) == 2
    assert "base_chanels" in capsys.readouterr().err


def test_every_official_model_config_builds_our_model():
    """The demo-sized authors' models are the demo preset at their fixed 64-channel ladder."""
    overrides = read_overrides(DEMO_OVERRIDES)
    assert {k: v for k, v in overrides["pvqvae"].items() if k != "base_channels"}.items() <= \
        PRESETS["demo"].model.pvqvae.model_dump().items()
    model = PVQVAE(PRESETS["demo"].model.pvqvae.model_copy(update=overrides["pvqvae"]))
    assert [m.out_channels for m in model.decoder.up] == [256, 128, 64]

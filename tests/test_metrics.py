"""Metrics: hand-checked PSNR/SSIM/MAE, the per-file table, pairing logic, and missing weights."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from pydantic import ValidationError

from put.io.pretrained import INCEPTION_FID, LPIPS_ALEXNET, LPIPS_VGG16, PRETRAINED_FILES, weights_report
from put.metrics import MetricValue
from put.metrics.diversity import Distance, diversity_lpips_per_input, pairwise_sums
from put.metrics.fid import fid_of_features, inception_features
from put.metrics.image import MetricProtocol, image_metrics, metrics_table, opencv_gray

SMALL = MetricProtocol(ssim_window=7)  # the paper's 51-px window needs images of at least 51 px


def mean_pairwise(groups: Iterable[torch.Tensor], distance: Distance, pairs: int, seed: int) -> float:
    """Average distance over `pairs` random distinct sample pairs per group, over all groups (see
    `pairwise_sums`): every group contributes the same number of pairs, so the mean over all pairs equals
    the mean of per-input means."""
    sums = pairwise_sums(groups, distance, pairs, seed)
    return sum(sums) / (pairs * len(sums))


def diversity_lpips(groups: list[list[Path]], protocol: MetricProtocol, seed: int,
                    device: str | torch.device | None = None) -> MetricValue:
    """Mean LPIPS over protocol.lpips_pairs random sample pairs per input (one path list per input)."""
    per_input = diversity_lpips_per_input(groups, protocol, seed, device)
    return per_input if isinstance(per_input, MetricValue) else MetricValue(float(np.mean(per_input)))


def const(value, size: int = 16) -> np.ndarray:
    return np.broadcast_to(np.asarray(value, dtype=np.uint8), (size, size, 3)).copy()


def noise(size: int = 64, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)


def save_png(path, array: np.ndarray):
    Image.fromarray(array).save(path)
    return path


def test_protocol_defaults_are_the_papers_and_strict():
    p = MetricProtocol()
    assert (p.grayscale, p.ssim_window, p.ssim_gaussian, p.data_range) == ("opencv", 51, False, 255)
    assert (p.lpips_net, p.lpips_pairs, p.lpips_spatial, p.fid_backend) == ("vgg", 5, True, "torch-fidelity")
    with pytest.raises(ValidationError):
        MetricProtocol(ssim_windw=7)
    with pytest.raises(ValidationError):
        MetricProtocol(ssim_window=8)
    with pytest.raises(ValidationError):
        p.grayscale = "none"
    with pytest.raises(ValidationError):
        MetricProtocol(grayscale=True)


def test_identical_images():
    a = noise()
    m = image_metrics(a, a.copy(), MetricProtocol())
    assert m["psnr"] == math.inf and m["ssim"] == pytest.approx(1.0) and m["mae"] == 0.0


def test_constant_offset_psnr_and_mae():
    a, b = const(100), const(110)  # gray pixels: the grey conversion keeps 100 and 110 exactly
    m = image_metrics(a, b, SMALL)
    assert m["psnr"] == pytest.approx(10 * math.log10(255**2 / 10**2))
    assert m["mae"] == pytest.approx(10 / 210)  # sum|a-b| / sum(a+b), scale-free


def test_mae_formula_on_small_arrays():
    a = np.zeros((8, 8, 3), np.uint8)
    b = a.copy()
    a[0, 0] = 255
    b[0, 1] = 51
    # per-pixel [0,1]: |a-b| sums to 1 + 0.2, a+b sums to 1 + 0.2
    assert image_metrics(a, b, SMALL.model_copy(update={"ssim_window": 3}))["mae"] == pytest.approx(1.0)
    a[1, 1] = b[1, 1] = 255  # common pixel adds to the denominator only
    assert image_metrics(a, b, SMALL.model_copy(update={"ssim_window": 3}))["mae"] == pytest.approx(1.2 / 3.2)


@pytest.mark.parametrize("grayscale", ["opencv", "pil"])
def test_grayscale_switch_hides_colour_only_differences(grayscale):
    gray, colour = const(100), const((130, 90, 70))  # the same luma in both conversions
    g = image_metrics(gray, colour, SMALL.model_copy(update={"grayscale": grayscale}))
    c = image_metrics(gray, colour, SMALL.model_copy(update={"grayscale": "none"}))
    assert g["psnr"] == math.inf and g["mae"] == 0
    assert math.isfinite(c["psnr"]) and c["mae"] > 0


def test_opencv_gray_formula():
    rgb = np.array([[[255, 255, 255], [0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255], [187, 1, 0]]], np.uint8)
    # (9798 R + 19235 G + 3735 B + 2^14) >> 15; PIL's convert("L") gives 56 for (187, 1, 0) where OpenCV gives 57
    assert opencv_gray(rgb).tolist() == [[255, 0, 76, 150, 29, 57]]
    assert np.asarray(Image.fromarray(rgb).convert("L"))[0, 5] == 56


def test_image_metrics_rejects_small_images_and_bad_arrays():
    with pytest.raises(ValueError, match=r"16x16.*SSIM window 51"):
        image_metrics(const(1), const(2), MetricProtocol())
    with pytest.raises(ValueError, match="uint8"):
        image_metrics(const(1).astype(np.float32), const(2), SMALL)


def test_metrics_table_rows_and_size_mismatch(tmp_path):
    r1 = save_png(tmp_path / "r1.png", const(100))
    t1 = save_png(tmp_path / "t1.png", const(110))
    r2 = save_png(tmp_path / "r2.png", noise(16))
    df = metrics_table([(r1, t1), (r2, r2)], SMALL)
    assert list(df.columns) == ["result", "target", "psnr", "ssim", "mae"] and len(df) == 2
    assert df.loc[0, "result"] == str(r1) and df.loc[0, "target"] == str(t1)
    assert df.loc[0, "mae"] == pytest.approx(10 / 210) and df.loc[1, "psnr"] == math.inf
    assert df.attrs["protocol"]["ssim_window"] == 7

    big = save_png(tmp_path / "big.png", const(100, 20))
    with pytest.raises(ValueError) as err:
        metrics_table([(r1, big)], SMALL)
    assert str(r1) in str(err.value) and str(big) in str(err.value)
    with pytest.raises(ValueError, match="r1.png"):  # window errors name the files too
        metrics_table([(r1, t1)], MetricProtocol())


@pytest.fixture
def empty_torch_home(tmp_path, monkeypatch):
    home = tmp_path / "torch_home"
    monkeypatch.setenv("TORCH_HOME", str(home))
    return home / "hub" / "checkpoints"


def test_fid_unavailable_without_inception(tmp_path, empty_torch_home):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        for i in range(2):
            save_png(tmp_path / d / f"{i}.png", noise(16, i))
    v = fid_of_features(inception_features(tmp_path / "a", tmp_path / "b", MetricProtocol()))
    assert v.value is None and not v.available
    assert INCEPTION_FID.filename in v.unavailable and "put weights --download" in v.unavailable
    assert not empty_torch_home.exists()  # nothing was fetched


def test_fid_needs_two_images_per_side(tmp_path, empty_torch_home):
    empty_torch_home.mkdir(parents=True)
    INCEPTION_FID.path.write_bytes(b"")  # presence only; torch-fidelity is never reached
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    save_png(tmp_path / "a" / "0.png", noise(16))
    v = fid_of_features(inception_features(tmp_path / "a", tmp_path / "b", MetricProtocol()))
    assert v.value is None and "at least 2" in v.unavailable and "has 1" in v.unavailable


@pytest.mark.parametrize("net, file", [("vgg", LPIPS_VGG16), ("alex", LPIPS_ALEXNET)])
def test_diversity_unavailable_without_backbone(tmp_path, empty_torch_home, net, file):
    paths = [save_png(tmp_path / f"{i}.png", noise(16, i)) for i in range(3)]
    v = diversity_lpips([paths], MetricProtocol(lpips_net=net), seed=0)
    assert v.value is None and file.filename in v.unavailable and "put weights --download" in v.unavailable


def mean_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.mean(dim=(1, 2, 3)) - b.mean(dim=(1, 2, 3))).abs()


def test_mean_pairwise_averages_distinct_pairs():
    # samples are constants 0..n-1 so a pair (i, j) has distance |i - j|
    groups = [torch.arange(4.0).view(4, 1, 1, 1).expand(4, 1, 2, 2) for _ in range(3)]
    seen = []

    def recording(a, b):
        seen.extend(zip(a.flatten(1)[:, 0].tolist(), b.flatten(1)[:, 0].tolist()))
        return mean_distance(a, b)

    # all 6 pairs of 4 samples: mean |i-j| = (3*1 + 2*2 + 1*3) / 6
    assert mean_pairwise(groups, recording, pairs=6, seed=0) == pytest.approx(10 / 6)
    for group_pairs in (seen[0:6], seen[6:12], seen[12:18]):
        assert all(i != j for i, j in group_pairs)
        assert len({frozenset(p) for p in group_pairs}) == 6

    one = [torch.tensor([0.0, 2.0]).view(2, 1, 1, 1), torch.tensor([1.0, 5.0]).view(2, 1, 1, 1)]
    assert mean_pairwise(one, mean_distance, pairs=1, seed=3) == pytest.approx((2 + 4) / 2)


def test_mean_pairwise_is_seeded():
    groups = [torch.rand(10, 3, 4, 4, generator=torch.Generator().manual_seed(i)) for i in range(5)]
    a = mean_pairwise(groups, mean_distance, pairs=5, seed=7)
    assert a == mean_pairwise(groups, mean_distance, pairs=5, seed=7)
    assert a != mean_pairwise(groups, mean_distance, pairs=5, seed=8)
    with pytest.raises(ValueError, match="3 distinct pairs"):
        mean_pairwise([torch.zeros(3, 1, 1, 1)], mean_distance, pairs=5, seed=0)


def test_metric_value_holds_exactly_one():
    assert MetricValue(1.5).available
    with pytest.raises(ValueError):
        MetricValue(None, None)
    with pytest.raises(ValueError):
        MetricValue(1.0, "why")


def test_weights_report_follows_torch_home(empty_torch_home):
    report = weights_report()
    assert [r["file"] for r in report] == [f.filename for f in PRETRAINED_FILES]
    assert {f.filename for f in PRETRAINED_FILES} >= {
        "weights-inception-2015-12-05-6726825d.pth", "vgg16-397923af.pth", "alexnet-owt-7be5be79.pth"}
    assert all(not r["present"] and r["folder"] == str(empty_torch_home) for r in report)
    assert all(set(r) == {"name", "file", "folder", "present", "used_by", "url"} for r in report)
    empty_torch_home.mkdir(parents=True)
    for r in report:
        (empty_torch_home / r["file"]).write_bytes(b"")
    assert all(r["present"] for r in weights_report())


def test_lpips_linear_layers_ship_with_the_package():
    from importlib.resources import files

    assert files("lpips").joinpath("weights/v0.1/vgg.pth").is_file()
    assert files("lpips").joinpath("weights/v0.1/alex.pth").is_file()

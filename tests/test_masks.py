"""Mask generators, bins, mask folders, training-mask sampling and the evaluation-mask stage."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from put.config import PVQVAETrainConfig, TransformerTrainConfig
from put.config.bins import EVAL_GROUPS, FINE_BINS, TABLE_GROUPS, hole_ratio
from put.masks.evaluation import read_manifest, write_eval_masks
from put.masks.generate import blocky, irregular_mask, mask_with_ratio
from put.masks.io import MaskError, MaskFolder, read_mask
from put.masks.strokes import fill_small_holes, stroke_keep_mask
from put.masks.training import TrainingMasks, batch_of, pconv_candidates

SIZES = [(32, 32), (64, 48), (128, 128)]


def in_group(ratio: float, name: str) -> bool:
    """Whether a hole ratio lies in the [lo, hi) interval of an evaluation group or fine bin."""
    try:
        lo, hi = EVAL_GROUPS[name]
    except KeyError:
        raise KeyError(f"unknown mask group {name!r}; expected one of {', '.join(EVAL_GROUPS)}") from None
    return lo <= ratio < hi


def fine_bin_of(ratio: float) -> str | None:
    """The fine bin holding a hole ratio, or None outside [0.1, 0.6)."""
    return next((name for name, (lo, hi) in FINE_BINS.items() if lo <= ratio < hi), None)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def keep_with_ratio(size: tuple[int, int], holes: int) -> np.ndarray:
    keep = np.ones(size[0] * size[1], dtype=np.float32)
    keep[:holes] = 0
    return keep.reshape(size)


# ------------------------------------------------------------------------------------------- bins

def test_bin_tables():
    assert list(FINE_BINS) == ["10-20", "20-30", "30-40", "40-50", "50-60"]
    assert TABLE_GROUPS == {"20-40": (0.2, 0.4), "40-60": (0.4, 0.6), "10-60": (0.1, 0.6)}
    assert list(EVAL_GROUPS) == [*TABLE_GROUPS, *FINE_BINS]
    assert FINE_BINS["30-40"] == (0.3, 0.4)


def test_hole_ratio_numpy_and_torch():
    keep = keep_with_ratio((10, 10), 37)
    assert hole_ratio(keep) == 0.37
    assert hole_ratio(torch.from_numpy(keep).unsqueeze(0)) == 0.37


def test_bin_edges():
    ratio = hole_ratio(keep_with_ratio((10, 10), 20))
    assert ratio == 0.2
    assert fine_bin_of(ratio) == "20-30" and in_group(ratio, "20-30") and in_group(ratio, "20-40")
    assert not in_group(ratio, "10-20")
    assert fine_bin_of(0.6) is None and not any(in_group(0.6, g) for g in EVAL_GROUPS)
    assert fine_bin_of(0.0999) is None and fine_bin_of(0.1) == "10-20" and fine_bin_of(0.5999) == "50-60"
    assert in_group(0.1, "10-60") and not in_group(0.4, "20-40") and in_group(0.4, "40-60")
    with pytest.raises(KeyError, match="unknown mask group"):
        in_group(0.3, "30-50")


# ------------------------------------------------------------------------------------------- generators

STROKE = TransformerTrainConfig.model_fields["masks"].default.stroke.model_dump()


def strokes(size, g, **changes):
    return stroke_keep_mask(size, g, **{**STROKE, **changes})


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("make", [strokes, irregular_mask])
def test_generators_deterministic_binary(make, size):
    a, b = make(size, rng(3)), make(size, rng(3))
    assert a.shape == size and a.dtype == np.float32
    assert np.array_equal(a, b)
    assert set(np.unique(a)) == {0.0, 1.0}
    assert not np.array_equal(a, make(size, rng(4)))


@pytest.mark.parametrize("keep", [(0.0, 0.5), (0.3, 0.6), (0.7, 0.9)])
def test_stroke_keep_mask_reaches_its_keep_ratio(keep):
    g = rng(5)
    known = [1 - hole_ratio(strokes((64, 64), g, keep_ratio=keep)) for _ in range(40)]
    assert min(known) >= keep[0] and np.mean(known) > np.mean(keep)  # strokes are added until the target is met
    assert max(known) < 1


def test_stroke_keep_mask_rejects_bad_parameters():
    with pytest.raises(ValueError, match="keep_ratio"):
        strokes((32, 32), rng(0), keep_ratio=(0.5, 0.4))
    with pytest.raises(ValueError, match="min_vertices"):
        strokes((32, 32), rng(0), min_vertices=0)


def test_fill_small_holes_uses_the_contour_area():
    known = np.ones((40, 40), dtype=bool)
    known[5:12, 5:12] = False  # 7x7 hole: contour area 49 + 28 / 2 - 1 = 62 < 64, filled
    known[20:27, 5:13] = False  # 7x8 hole: 56 + 30 / 2 - 1 = 70, kept
    known[0:3, 30:33] = False  # touches the border: background, not a hole
    filled = fill_small_holes(known, 64)
    assert filled[5:12, 5:12].all() and not filled[20:27, 5:13].any() and not filled[0:3, 30:33].any()
    assert not fill_small_holes(known, 62)[5:12, 5:12].any()  # 62 is not below 62


@pytest.mark.parametrize("size", [(32, 32), (64, 96), (128, 128)])
@pytest.mark.parametrize("kind", ["irregular", "stroke"])
def test_mask_with_ratio_hits_every_group(size, kind):
    g = rng(7)
    for name, (lo, hi) in EVAL_GROUPS.items():
        keep = mask_with_ratio(size, lo, hi, g, kind=kind)
        assert keep.shape == size and keep.dtype == np.float32
        assert lo <= hole_ratio(keep) < hi and in_group(hole_ratio(keep), name)
    assert np.array_equal(mask_with_ratio(size, 0.3, 0.4, rng(1), kind=kind),
                          mask_with_ratio(size, 0.3, 0.4, rng(1), kind=kind))


def test_mask_with_ratio_narrow_and_impossible():
    keep = mask_with_ratio((32, 32), 0.25, 0.26, rng(0))
    assert 0.25 <= hole_ratio(keep) < 0.26
    assert hole_ratio(mask_with_ratio((4, 4), 0.5, 0.51, rng(0))) == 0.5  # 8/16 is the one ratio that fits
    with pytest.raises(MaskError, match="no mask"):
        mask_with_ratio((4, 4), 0.51, 0.55, rng(0))
    with pytest.raises(MaskError, match="no mask"):
        mask_with_ratio((32, 32), 0.99999, 1.0, rng(0))
    with pytest.raises(MaskError, match="no mask"):
        mask_with_ratio((32, 32), 0.4, 0.3, rng(0))


def test_blocky_takes_each_patch_top_left_pixel():
    keep = np.ones((32, 48), dtype=np.float32)
    keep[3, 5] = 0  # inside patch (0, 0), not its top-left pixel: dropped
    keep[16, 40] = 0  # top-left pixel of patch (2, 5): the whole patch becomes hole
    out = blocky(keep, 8)
    assert out.shape == keep.shape and out.dtype == np.float32
    assert (out[:8, :8] == 1).all() and (out[16:24, 40:48] == 0).all()
    assert out.sum() == keep.size - 64
    assert np.array_equal(blocky(out, 8), out)
    b = blocky(irregular_mask((64, 64), rng(2)), 8)
    patches = b.reshape(8, 8, 8, 8)
    assert (patches.min(axis=(1, 3)) == patches.max(axis=(1, 3))).all()  # each patch uniform
    with pytest.raises(ValueError, match="not divisible"):
        blocky(np.ones((30, 32)), 8)


# ------------------------------------------------------------------------------------------- MaskFolder

def write_gray(path: Path, values: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(values.astype(np.uint8)).save(path)
    return path


def hole_white(size: tuple[int, int], holes: int) -> np.ndarray:
    return np.where(keep_with_ratio(size, holes) == 0, 255, 0)


def test_mask_folder_both_polarities_and_resize(tmp_path):
    root = tmp_path / "pconv"
    write_gray(root / "b" / "m2.png", hole_white((64, 64), 64 * 16))  # a quarter of the image is hole
    write_gray(root / "a.png", hole_white((32, 32), 32 * 8))
    (root / "notes.txt").write_text("not a mask")
    folder = MaskFolder(root, "hole-white", (32, 32))
    assert len(folder) == 2 and [p.name for p in folder.paths] == ["a.png", "m2.png"]
    for i in range(2):
        keep = folder.load(i)
        assert keep.shape == (32, 32) and keep.dtype == np.float32 and hole_ratio(keep) == 0.25
    inverted = MaskFolder(root, "keep-white", (16, 24))
    keep = inverted.load(0)
    assert keep.shape == (16, 24) and hole_ratio(keep) == 0.75


def test_mask_folder_resizes_like_opencv_nearest(tmp_path):
    """Halving keeps the top-left pixel of each 2x2 block (OpenCV INTER_NEAREST, as the released code)."""
    values = np.zeros((8, 8))
    values[0, 0] = values[3, 3] = values[4:6, 6:8] = 255  # holes
    write_gray(tmp_path / "m.png", values)
    keep = MaskFolder(tmp_path, "hole-white", (4, 4)).load(0)
    assert np.argwhere(keep == 0).tolist() == [[0, 0], [2, 3]]


def test_mask_folder_errors_name_the_file(tmp_path):
    with pytest.raises(MaskError, match="missing.*does not exist"):
        MaskFolder(tmp_path / "missing", "hole-white", (32, 32))
    (tmp_path / "empty").mkdir()
    with pytest.raises(MaskError, match=r"empty.*no mask files"):
        MaskFolder(tmp_path / "empty", "hole-white", (32, 32))
    with pytest.raises(MaskError, match="polarity"):
        MaskFolder(tmp_path, "white", (32, 32))
    cases = {
        "grey.png": (np.full((32, 32), 128), "not binary"),
        "white.png": (np.full((32, 32), 255), "all hole"),
        "black.png": (np.zeros((32, 32)), "no hole"),
    }
    for name, (values, message) in cases.items():
        root = tmp_path / name.removesuffix(".png")
        write_gray(root / name, values)
        with pytest.raises(MaskError, match=rf"{name}.*{message}"):
            MaskFolder(root, "hole-white", (32, 32)).load(0)
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "fake.png").write_bytes(b"this is not a png")
    with pytest.raises(MaskError, match="fake.png"):
        MaskFolder(junk, "hole-white", (32, 32)).load(0)


def test_read_mask_unchanged(tmp_path):
    path = write_gray(tmp_path / "m.png", hole_white((32, 32), 100))
    mask = read_mask(path, "hole-white", (32, 32))
    assert mask.shape == (1, 32, 32) and hole_ratio(mask) == 100 / 1024
    with pytest.raises(MaskError, match="expected 16x16"):
        read_mask(path, "hole-white", (16, 16))


# ------------------------------------------------------------------------------------------- training masks

def fake_pconv(root: Path, size: tuple[int, int], ratios: list[float], upscale: int = 1) -> Path:
    """Hole-white masks of `size` with the given hole ratios, stored `upscale` times larger (blocks of
    upscale x upscale pixels, so nearest resizing back to `size` keeps the ratio exactly)."""
    n = size[0] * size[1]
    for i, r in enumerate(ratios):
        # shuffle the holes so masks differ in shape, not only in count
        keep = keep_with_ratio(size, int(round(r * n))).ravel()
        rng(i).shuffle(keep)
        values = np.kron(np.where(keep.reshape(size) == 0, 255, 0), np.ones((upscale, upscale)))
        write_gray(root / f"{i:05d}.png", values)
    return root


def stage_masks(stage: str = "pvqvae", pconv: MaskFolder | None = None, size=(32, 32), select: str = "ratio",
                **changes) -> TrainingMasks:
    train = PVQVAETrainConfig if stage == "pvqvae" else TransformerTrainConfig
    config = train.model_fields["masks"].default.model_copy(update=changes)
    erase_prob = PVQVAETrainConfig.model_fields["erase_prob"].default if stage == "pvqvae" else 0.0
    return TrainingMasks(size, 8, config, pconv, pconv_select=select, erase_prob=erase_prob)


def test_pvqvae_pair_frequencies():
    masks = stage_masks("pvqvae")
    g = rng(0)
    pairs = [masks.pvqvae_pair(g) for _ in range(400)]
    erased = np.mean([e.min() == 0 for e, _ in pairs])
    all_hole = np.mean([r.max() == 0 for _, r in pairs])
    assert 0.12 < erased < 0.28 and 0.22 < all_hole < 0.38
    assert all((e.max() == 1) for e, _ in pairs)  # an erase mask is never all-hole
    assert all(r.min() == 0 for _, r in pairs)  # the reference mask always hides something
    for e, r in pairs:
        assert e.shape == r.shape == (32, 32) and e.dtype == r.dtype == np.float32
    g = rng(0)
    again = [stage_masks("pvqvae").pvqvae_pair(g) for _ in range(5)]
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(pairs, again))


@pytest.mark.parametrize("stage, share", [("pvqvae", 0.7), ("transformer", 0.8)])
def test_irregular_vs_stroke_choice(monkeypatch, stage, share):
    masks = stage_masks(stage)
    assert masks.config.irregular_prob == share
    calls: list[str] = []
    stroke, irregular = masks.stroke, masks.irregular
    monkeypatch.setattr(masks, "stroke", lambda g: calls.append("stroke") or stroke(g))
    monkeypatch.setattr(masks, "irregular", lambda g: calls.append("irregular") or irregular(g))
    g = rng(1)
    for _ in range(400):
        masks.pvqvae_pair(g) if stage == "pvqvae" else masks.transformer_mask(g)
    assert share - 0.08 < calls.count("irregular") / len(calls) < share + 0.08


def test_transformer_masks_blocky_and_masked_patch():
    masks = stage_masks("transformer", blocky_prob=0.5)
    g = rng(2)
    draws = [masks.transformer_mask(g) for _ in range(200)]
    assert all(k.min() == 0 for k in draws)
    is_blocky = [np.array_equal(blocky(k, 8), k) for k in draws]
    assert 0.35 < np.mean(is_blocky) < 0.75  # blocky ones plus the rare mask that happens to be
    default = stage_masks("transformer")
    assert 0.03 < np.mean([np.array_equal(blocky(k, 8), k) for k in
                            (default.transformer_mask(g) for _ in range(400))]) < 0.2


def test_training_masks_from_pconv_folder_by_ratio_or_list(tmp_path):
    root = fake_pconv(tmp_path / "pconv", (32, 32), [0.5, 0.1, 0.3])  # not sorted by ratio
    folder = MaskFolder(root, "hole-white", (32, 32))
    g = rng(0)
    for select, expected in (("ratio", {0.3, 0.5}), ("list", {0.1, 0.3})):
        masks = stage_masks("transformer", folder, select=select, irregular_prob=1.0, pconv_hole_ratio=(0.2, 0.6))
        assert {round(hole_ratio(masks.irregular(g)), 2) for _ in range(40)} == expected
    assert pconv_candidates(folder, (0.0, 0.6), "list").tolist() == [0, 1, 2]
    with pytest.raises(MaskError, match=r"no mask has a hole ratio.*\[0.55, 0.6\]"):
        stage_masks("transformer", folder, pconv_hole_ratio=(0.55, 0.6))
    with pytest.raises(MaskError, match="slice"):
        stage_masks("transformer", folder, select="list", pconv_hole_ratio=(0.0, 0.1))
    nonsquare = stage_masks("pvqvae", MaskFolder(root, "hole-white", (32, 48)), size=(32, 48))
    assert all(nonsquare.irregular(g).shape == (32, 48) for _ in range(5))
    with pytest.raises(ValueError, match="training size"):
        stage_masks("pvqvae", folder, size=(64, 64))


def test_batch_of():
    masks, pair_masks = stage_masks("transformer"), stage_masks("pvqvae")
    batch = batch_of(masks.transformer_mask, rng(0), 4)
    assert batch.shape == (4, 1, 32, 32) and batch.dtype == torch.float32
    erase, ref = batch_of(pair_masks.pvqvae_pair, rng(0), 3)
    assert erase.shape == ref.shape == (3, 1, 32, 32)
    assert torch.equal(batch, batch_of(masks.transformer_mask, rng(0), 4))


# ------------------------------------------------------------------------------------------- evaluation masks

IMAGES = ["test/img_a.jpg", "test/img_b.png", "img_c.png"]


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def check_written(out: Path, size: tuple[int, int]) -> pd.DataFrame:
    frame = read_manifest(out)
    assert len(frame) == len(IMAGES) * len(EVAL_GROUPS)
    assert set(zip(frame["image"], frame["group"])) == {(i, g) for i in IMAGES for g in EVAL_GROUPS}
    for row in frame.itertuples():
        assert row.mask == f"{row.group}/{Path(row.image).stem}.png"
        keep = read_mask(out / row.mask, "hole-white", size).numpy()
        assert hole_ratio(keep) == row.ratio and in_group(row.ratio, row.group)
    pngs = {p.relative_to(out).as_posix() for p in out.rglob("*.png")}
    assert pngs == set(frame["mask"])
    return frame


def test_write_eval_masks_generated(tmp_path):
    size = (48, 64)
    manifest = write_eval_masks(IMAGES, tmp_path / "a", size, seed=3, progress=False)
    assert manifest == tmp_path / "a" / "manifest.csv"
    check_written(tmp_path / "a", size)
    write_eval_masks(IMAGES, tmp_path / "b", size, seed=3, progress=False)
    assert files_of(tmp_path / "a") == files_of(tmp_path / "b")
    write_eval_masks(IMAGES, tmp_path / "c", size, seed=4, progress=False)
    other = files_of(tmp_path / "c")
    assert other.keys() == files_of(tmp_path / "a").keys()
    assert other != files_of(tmp_path / "a")
    assert sum(other[k] != v for k, v in files_of(tmp_path / "a").items() if k.endswith(".png")) > 10


def test_write_eval_masks_from_pconv(tmp_path):
    size = (32, 32)
    ratios = [0.12, 0.15, 0.22, 0.28, 0.33, 0.37, 0.42, 0.45, 0.52, 0.58, 0.05, 0.7]
    root = fake_pconv(tmp_path / "pconv", size, ratios, upscale=2)  # stored at 64x64, read at 32x32
    folder = MaskFolder(root, "hole-white", size)
    write_eval_masks(IMAGES, tmp_path / "a", size, seed=0, pconv=folder, progress=False)
    frame = check_written(tmp_path / "a", size)
    assert set(frame["source"]) <= {p.name for p in folder.paths}
    assert not {"00010.png", "00011.png"} & set(frame["source"])  # 5% and 70% fit no group
    # distinct masks per group while there are enough candidates
    assert frame.groupby("group")["source"].nunique()["10-60"] == len(IMAGES)
    write_eval_masks(IMAGES, tmp_path / "b", size, seed=0, pconv=folder, progress=False)
    assert files_of(tmp_path / "a") == files_of(tmp_path / "b")


def test_write_eval_masks_errors(tmp_path):
    root = fake_pconv(tmp_path / "pconv", (32, 32), [0.15, 0.25])
    folder = MaskFolder(root, "hole-white", (32, 32))
    with pytest.raises(MaskError, match=r"pconv.*group\(s\) 40-60, 30-40, 40-50, 50-60;"):
        write_eval_masks(IMAGES, tmp_path / "out", (32, 32), seed=0, pconv=folder, progress=False)
    assert not (tmp_path / "out" / "manifest.csv").exists()
    # A PConv set (0-60% holes) read with the wrong polarity: the message points at it.
    inverted = fake_pconv(tmp_path / "inverted", (32, 32), [0.05, 0.15, 0.25, 0.35, 0.4])
    with pytest.raises(MaskError, match=r"group\(s\) 20-40, 10-20, 20-30.*most are holes as read \(keep-white\): "
                                        r"is the polarity \(masks.pconv_polarity\) the other one\?"):
        write_eval_masks(IMAGES, tmp_path / "out", (32, 32), seed=0, progress=False,
                         pconv=MaskFolder(inverted, "keep-white", (32, 32)))
    with pytest.raises(ValueError, match="share the stem"):
        write_eval_masks(["a/x.png", "b/x.jpg"], tmp_path / "out2", (32, 32), seed=0, progress=False)
    with pytest.raises(MaskError, match="manifest"):
        read_manifest(tmp_path / "nowhere")


def test_manifest_removed_before_rewrite(tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_eval_masks(IMAGES[:1], out, (32, 32), seed=0, progress=False)
    import put.masks.evaluation as evaluation

    def boom(*args, **kwargs):
        raise RuntimeError("crash")

    monkeypatch.setattr(evaluation, "write_mask", boom)
    with pytest.raises(RuntimeError):
        write_eval_masks(IMAGES, out, (32, 32), seed=1, progress=False)
    assert not (out / "manifest.csv").exists()


# The user's own evaluation masks (masks.eval_root, masks.eval_polarity), through the masks stage.
OWN_RATIOS = [0.12, 0.15, 0.22, 0.28, 0.33, 0.37, 0.42, 0.45, 0.52, 0.58, 0.05, 0.7]


def own_masks(root: Path, size: tuple[int, int], upscale: int = 2, keep_white: bool = True) -> Path:
    """OWN_RATIOS masks stored `upscale` times larger, white = kept (the polarity users' tools often write)."""
    fake_pconv(root, size, OWN_RATIOS, upscale=upscale)
    if keep_white:
        for path in root.glob("*.png"):
            write_gray(path, 255 - np.asarray(Image.open(path)))
    return root


def masks_stage(tmp_path: Path, masks: dict, images: int = 3) -> Path:
    """`put masks` of the demo preset with these mask settings on `images` test images of 64x64."""
    from put.config.params import Params
    from put.data.split import write_split
    from put.stages.masks import run_masks

    test = [write_gray(tmp_path / "images" / f"t{i}.png", rng(i).integers(0, 256, (64, 64))) for i in range(images)]
    write_split({"train": test[:1], "test": test}, tmp_path / "split")
    return run_masks(Params(preset="demo", overrides={"masks": masks}), tmp_path / "split", tmp_path / "masks")


def test_own_evaluation_masks_of_any_size_are_binned_by_hole_ratio_and_take_the_place_of_the_pconv_set(tmp_path):
    own = own_masks(tmp_path / "own", (64, 64), upscale=2)  # 128x128, keep-white
    pconv = fake_pconv(tmp_path / "pconv", (64, 64), [0.15, 0.35, 0.55])  # training's: not drawn from
    manifest = masks_stage(tmp_path, {"eval_root": str(own), "eval_polarity": "keep-white",
                                      "pconv_root": str(pconv)})
    frame = pd.read_csv(manifest)
    assert set(frame["group"]) == set(EVAL_GROUPS) and len(frame) == 3 * len(EVAL_GROUPS)
    assert set(frame["source"]) <= {f"{i:05d}.png" for i in range(10)}  # 5% and 70% fit no group
    for row in frame.itertuples():  # each mask as written (hole-white, 64x64) has its own file's ratio
        keep = read_mask(manifest.parent / row.mask, "hole-white", (64, 64)).numpy()
        assert hole_ratio(keep) == row.ratio == pytest.approx(OWN_RATIOS[int(row.source[:5])], abs=1 / 4096)
        assert in_group(row.ratio, row.group)


def test_own_evaluation_masks_of_the_wrong_polarity_or_aspect_are_refused_naming_the_setting(tmp_path):
    own = own_masks(tmp_path / "own", (64, 64))
    with pytest.raises(MaskError, match=r"own \(masks.eval_root\): no mask has a hole ratio .*most are holes as "
                                        r"read \(hole-white\): is the polarity \(masks.eval_polarity\) the other one"):
        masks_stage(tmp_path, {"eval_root": str(own)})  # keep-white files read as hole-white
    assert not (tmp_path / "masks").exists()  # nothing half written
    wide = own_masks(tmp_path / "wide", (64, 96), upscale=1)
    with pytest.raises(MaskError, match=r"00000.png: mask is 96x64 \(WxH\), not of the working size's aspect ratio "
                                        r"\(64x64\).*\(masks.eval_root\)"):
        masks_stage(tmp_path, {"eval_root": str(wide), "eval_polarity": "keep-white"})
    with pytest.raises(MaskError, match=r"missing: mask folder does not exist"):
        masks_stage(tmp_path, {"eval_root": str(tmp_path / "missing")})


def test_changing_the_evaluation_masks_retrains_nothing():
    from put.dag.declaration import STAGES

    tracked = {stage.name: stage.params for stage in STAGES}
    assert "masks" in tracked["masks"]  # eval_root, eval_polarity, seed and the PConv set
    for stage in ("train_pvqvae", "train_transformer"):
        assert not any(p == "masks" or p.startswith("masks.eval") for p in tracked[stage]), tracked[stage]
        assert {"masks.pconv_root", "masks.pconv_polarity", "masks.pconv_select"} <= set(tracked[stage])

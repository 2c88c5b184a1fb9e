"""`put masks-export`: the frozen evaluation pairs in LaMa's and ICT's layouts and in plain folders (MAT's with hole
value 0), each read back by the method's own pairing rule, the manifest that brings results back by name, and an
--out that is refused or replaced whole."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from put.cli import main
from put.config.bins import EVAL_GROUPS
from put.config.evaluation import MetricProtocol
from put.config.external import EXPORT_FORMATS
from put.data.images import read_rgb, write_png
from put.errors import InputError, PathError
from put.masks.evaluation import read_manifest, write_eval_masks
from put.masks.export import EXPORT_MANIFEST, ExportedPair, export_masks, read_export_manifest, read_export_table
from put.masks.io import read_mask
from put.masks.layouts import sample_file
from put.metrics.image import image_metrics

SIZE = (32, 32)
# Stems with "mask" in them: LaMa would take such an image for a mask, unless the export renames it.
IMAGES = ["photos/cat.jpg", "photos/mask_of_zorro.png", "other/TheMaskedOne.png"]
PROTOCOL = MetricProtocol(ssim_window=7)  # the released 51x51 window does not fit 32x32 images


@pytest.fixture(scope="module")
def masks_dir(tmp_path_factory) -> Path:
    """A `put masks` folder as the stage writes it: masks and manifest, and the ground truth gt/<stem>.png."""
    out = tmp_path_factory.mktemp("masks")
    write_eval_masks(IMAGES, out, SIZE, seed=0, progress=False)
    rng = np.random.default_rng(0)
    for image in IMAGES:
        write_png(out / "gt" / f"{Path(image).stem}.png", rng.integers(0, 256, (*SIZE, 3), dtype=np.uint8))
    return out


def hole_of(masks_dir: Path, mask: str) -> np.ndarray:
    """The hole (True) of a mask of the masks folder, as the pipeline reads it."""
    return read_mask(masks_dir / mask, "hole-white", SIZE).numpy()[0] < 0.5


def lama_pairs(indir: Path) -> list[tuple[str, str]]:
    """(image, mask) as LaMa's InpaintingDataset finds them (saicinpainting/evaluation/data.py, img_suffix .png
    from configs/prediction/default.yaml): every `**/*mask*.png`, its image the path up to the last `_mask`."""
    masks = sorted(glob.glob(os.path.join(str(indir), "**", "*mask*.png"), recursive=True))
    return [(mask.rsplit("_mask", 1)[0] + ".png", mask) for mask in masks]


def test_lama_layout_read_by_lamas_own_rule(masks_dir, tmp_path):
    out = tmp_path / "lama"
    export_masks(masks_dir, out, "lama", "demo")
    table = read_export_table(out)
    assert len(table) == len(IMAGES) * len(EVAL_GROUPS) == len(read_manifest(masks_dir))
    found = lama_pairs(out)
    # every exported mask is found, nothing else (no image is taken for a mask), each with its own image
    assert sorted(Path(m).relative_to(out).as_posix() for _, m in found) == sorted(table.mask_file)
    rows = table.set_index("mask_file")
    for image_path, mask_path in found:
        row = rows.loc[Path(mask_path).relative_to(out).as_posix()]
        assert Path(image_path).relative_to(out).as_posix() == row.image_file
        image, mask = Image.open(image_path), Image.open(mask_path)
        assert image.mode == "RGB" and mask.mode == "L" and image.size == mask.size
        values = np.asarray(mask)
        assert set(np.unique(values)) <= {0, 255}
        np.testing.assert_array_equal(values == 255, hole_of(masks_dir, row["mask"]))  # white = hole
        assert np.array_equal(read_rgb(image_path), read_rgb(masks_dir / "gt" / f"{Path(row['mask']).stem}.png"))
    assert all("mask" not in Path(name).name.lower() for name in table.image_file)


def mat_pairs(dpath: Path, mpath: Path) -> list[tuple[str, str, np.ndarray, str]]:
    """(image, mask, hole, output name) as MAT's generate_image.py (fenglinglwb/MAT at d273d89) pairs and names
    them: images and masks each `sorted(glob(<dir>/*.png) + glob(<dir>/*.jpg))`, zipped by position (lines 90,
    94-95); the mask `cv2.imread(..., IMREAD_GRAYSCALE) / 255` (line 142), 1 = known, 0 = hole (README.md:125;
    networks/mat.py:853, `img * (1 - masks_in) + images_in * masks_in`); the output `<outdir>/<image basename>`,
    `.jpg` made `.png` (lines 136, 152)."""
    images = sorted(glob.glob(str(dpath) + "/*.png") + glob.glob(str(dpath) + "/*.jpg"))
    masks = sorted(glob.glob(str(mpath) + "/*.png") + glob.glob(str(mpath) + "/*.jpg"))
    assert len(images) == len(masks), "illegal mapping"
    return [(i, m, cv2.imread(m, cv2.IMREAD_GRAYSCALE).astype(np.float32) / 255.0 == 0,
             os.path.basename(i).replace(".jpg", ".png")) for i, m in zip(images, masks)]


def ict_pairs(image_url: Path, mask_url: Path, samples: int) -> list[tuple[str, str, np.ndarray, list[str]]]:
    """(image, mask, hole, output names) as ICT (raywzy/ICT at 59dd12d) reads and names them. Its transformer
    (Transformer/inference.py) zips `sorted(os.listdir(...))` of both folders, expecting equal names (lines 77-78,
    90), and takes `convert("L")` / 255 > 0.5 for hole (lines 101-104); its upsampler (Guided_Upsample/src/
    dataset_my.py) pairs the sorted walks of both folders (load_flist, lines 223-227, 248-255), takes
    `convert("RGB") > 0` for hole (lines 177-180), and repeats each image once per sample (lines 29-40), the
    output of dataset item `index` being `name[:-4] + "_%d" % (index % condition_num) + ".png"` (Guided_Upsampler.py:
    208, batch 1 without --visualize_all: run.py:36-41)."""
    def walk(path: Path) -> list[str]:
        return sorted(f"{d}/{f}" for d, _, files in os.walk(path) for f in files if f.endswith((".png", ".jpg")))

    names, mask_names = sorted(os.listdir(image_url)), sorted(os.listdir(mask_url))
    assert names == mask_names  # inference.py:90 prints "### Something Wrong ###" otherwise
    assert [os.path.basename(p) for p in walk(image_url)] == [os.path.basename(p) for p in walk(mask_url)] == names
    pairs = []
    for i, name in enumerate(names):
        mask = mask_url / name
        hole = np.asarray(Image.open(mask).convert("L")) / 255.0 > 0.5
        assert np.array_equal(hole, (np.asarray(Image.open(mask).convert("RGB")) > 0).all(axis=-1))
        outputs = [f"{name[:-4]}_{(i * samples + j) % samples}.png" for j in range(samples)]  # index = i*k + j
        pairs.append((str(image_url / name), str(mask), hole, outputs))
    return pairs


@pytest.mark.parametrize("method, samples", [("mat", 1), ("ict", 1), ("ict", 3)])
def test_mat_and_ict_read_the_export_by_their_own_rules(masks_dir, tmp_path, method, samples):
    """MAT, run per group on `--format folder --hole-value 0`, and ICT, on `--format ict`: every image meets its
    own mask, read with the method's polarity, and the method writes each result at the manifest's result_file
    (ICT's k samples at sample_file's names), given --outdir / --save_place <results>/<group>."""
    fmt, hole_value = ("folder", 0) if method == "mat" else ("ict", 255)
    out = tmp_path / method
    export_masks(masks_dir, out, fmt, "demo", hole_value)
    rows = read_export_table(out).set_index("image_file")
    seen = set()
    for group in EVAL_GROUPS:
        images, masks = out / group / "images", out / group / "masks"
        if method == "mat":
            found = [(i, m, hole, [name]) for i, m, hole, name in mat_pairs(images, masks)]
        else:
            found = ict_pairs(images, masks, samples)
        assert len(found) == len(IMAGES)
        for image_path, mask_path, hole, outputs in found:
            row = rows.loc[Path(image_path).relative_to(out).as_posix()]
            assert Path(mask_path).relative_to(out).as_posix() == row.mask_file
            np.testing.assert_array_equal(hole, hole_of(masks_dir, row["mask"]))
            assert Image.open(image_path).mode == "RGB" and Image.open(mask_path).mode == "L"
            written = [f"{group}/{name}" for name in outputs]
            assert written[0] == row.result_file
            if method == "ict":  # its own sample numbering, which the `external:` entry's `samples: k` reads
                assert written == [sample_file(fmt, row.result_file, k) for k in range(samples)]
            seen.add(row.result_file)
    assert len(seen) == len(rows)


def test_ict_layout_is_white_hole_only_and_names_its_samples_as_ict_does(masks_dir, tmp_path):
    with pytest.raises(InputError, match="ict layout's masks are white = hole"):
        export_masks(masks_dir, tmp_path / "ict", "ict", "demo", hole_value=0)
    assert not (tmp_path / "ict").exists()
    assert sample_file("folder", "20-40/00001_cat.png", 2) == "20-40/00001_cat_s2.png"
    assert sample_file("lama", "20-40/00001_cat_mask001.png", 0) == "20-40/00001_cat_mask001_s0.png"
    assert sample_file("ict", "20-40/00001_cat_0.png", 4) == "20-40/00001_cat_4.png"


@pytest.mark.parametrize("hole_value", [255, 0])
def test_folder_layout_either_polarity(masks_dir, tmp_path, hole_value):
    out = tmp_path / "folder"
    export_masks(masks_dir, out, "folder", "demo", hole_value)
    table = read_export_table(out)
    for group in EVAL_GROUPS:
        images = sorted(p.name for p in (out / group / "images").iterdir())
        assert images == sorted(p.name for p in (out / group / "masks").iterdir())
        assert len(images) == len(IMAGES)
    for row in table.itertuples():
        values = np.asarray(Image.open(out / row.mask_file))
        hole = hole_of(masks_dir, row.mask)
        assert (values[hole] == hole_value).all() and (values[~hole] == 255 - hole_value).all()
        polarity = "hole-white" if hole_value == 255 else "keep-white"
        np.testing.assert_array_equal(read_mask(out / row.mask_file, polarity, SIZE).numpy()[0] < 0.5, hole)
    assert set(table.hole_value) == {hole_value}


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
def test_manifest_maps_every_exported_name_back(masks_dir, tmp_path, fmt):
    out = tmp_path / fmt
    export_masks(masks_dir, out, fmt, "demo")
    names = read_export_manifest(out)
    table = read_export_table(out)
    expected = {ExportedPair(r.group, r.image, r.mask) for r in read_manifest(masks_dir).itertuples()}
    for column in ("image_file", "mask_file", "result_file"):
        assert {names[name] for name in table[column]} == expected
    assert len(set(table.image_file)) == len(set(table.result_file)) == len(expected)  # one name per pair


def stand_in(image: np.ndarray, hole: np.ndarray) -> np.ndarray:
    """A stand-in inpainting method: the holes filled with the mean colour of the known pixels."""
    result = image.copy()
    result[hole] = np.round(image[~hole].mean(axis=0)).astype(np.uint8)
    return result


@pytest.mark.parametrize("fmt, hole_value", [("lama", 255), ("folder", 0), ("ict", 255)])
def test_metrics_of_exported_results_equal_in_place(masks_dir, tmp_path, fmt, hole_value):
    """The stand-in run in memory on the pipeline's own pairs, and run on the exported files with its results
    brought back by name through the manifest: the same PSNR, SSIM and MAE, bit for bit."""
    def target(mask: str) -> np.ndarray:
        return read_rgb(masks_dir / "gt" / f"{Path(mask).stem}.png")

    in_place = {(r.group, r.image): image_metrics(stand_in(target(r.mask), hole_of(masks_dir, r.mask)),
                                                  target(r.mask), PROTOCOL)
                for r in read_manifest(masks_dir).itertuples()}

    out, results = tmp_path / "export", tmp_path / "results"
    export_masks(masks_dir, out, fmt, "demo", hole_value)
    for row in read_export_table(out).itertuples():  # the other codebase: files in, files out, named its way
        hole = np.asarray(Image.open(out / row.mask_file)) == hole_value
        write_png(results / row.result_file, stand_in(read_rgb(out / row.image_file), hole))
    names = read_export_manifest(out)
    exported = {}
    for path in results.rglob("*.png"):
        pair = names[path.relative_to(results).as_posix()]
        exported[(pair.group, pair.image)] = image_metrics(read_rgb(path), target(pair.mask), PROTOCOL)
    assert exported == in_place
    assert len(exported) == len(IMAGES) * len(EVAL_GROUPS)


def test_refuses_an_out_that_is_not_an_export_of_this_preset(masks_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no params.yaml here: the default preset, demo
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    with pytest.raises(PathError, match=f"^{stray}: not empty and not an earlier masks export"):
        export_masks(masks_dir, stray, "lama", "demo")
    command = ["masks-export", "--masks", str(masks_dir), "--format", "lama", "--out", str(stray)]
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(stray) in err and err.startswith("put masks-export: error:")
    assert [p.name for p in stray.iterdir()] == ["notes.txt"]

    # an earlier export of this preset is replaced whole (another layout too); one of another preset is refused
    out = tmp_path / "export"
    export_masks(masks_dir, out, "lama", "demo")
    assert main(["masks-export", "--masks", str(masks_dir), "--format", "folder", "--out", str(out)]) == 0
    assert set(read_export_table(out).format) == {"folder"} and not list(out.glob("*/*.png"))
    with pytest.raises(PathError, match=f"^{out}: holds an export of preset demo, not ffhq"):
        export_masks(masks_dir, out, "lama", "ffhq")
    (out / EXPORT_MANIFEST).write_text("image,mask\n")  # a manifest, but not an export's
    with pytest.raises(PathError, match=f"^{out}: not empty and not an earlier masks export"):
        export_masks(masks_dir, out, "lama", "demo")
    with pytest.raises(PathError, match=f"^{masks_dir / 'export'}: inside the masks folder"):
        export_masks(masks_dir, masks_dir / "export", "lama", "demo")
    with pytest.raises(InputError, match="white = hole"):
        export_masks(masks_dir, tmp_path / "new", "lama", "demo", hole_value=0)
    assert not (tmp_path / "new").exists()


def test_a_failed_export_leaves_the_old_one(masks_dir, tmp_path, monkeypatch):
    out = tmp_path / "export"
    export_masks(masks_dir, out, "lama", "demo")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    import put.masks.export as export

    calls = []

    def crash_on_third(*args):
        calls.append(args)
        if len(calls) == 3:
            raise RuntimeError("killed")
        return write_mask(*args)

    write_mask = export._export_mask
    monkeypatch.setattr(export, "_export_mask", crash_on_third)
    with pytest.raises(RuntimeError, match="killed"):
        export_masks(masks_dir, out, "folder", "demo", 0)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # no temporary folder left beside it
    assert (out / EXPORT_MANIFEST).is_file()


def test_the_command_reads_the_presets_masks_folder_by_default(masks_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no params.yaml here: the default preset, demo
    shutil.copytree(masks_dir, tmp_path / "data" / "demo" / "masks")
    assert main(["masks-export", "--format", "folder", "--hole-value", "0", "--out", "export"]) == 0
    table = read_export_table(tmp_path / "export")
    assert set(table.preset) == {"demo"} and set(table.hole_value) == {0}
    assert len(table) == len(IMAGES) * len(EVAL_GROUPS)
    capsys.readouterr()
    assert main(["masks-export", "--preset", "ffhq", "--format", "lama", "--out", "ffhq_export"]) == 2
    assert "data/ffhq/masks/manifest.csv: no evaluation-mask manifest" in capsys.readouterr().err
    assert not (tmp_path / "ffhq_export").exists()


def test_blank_zeroes_the_hole_of_the_exported_images_only(masks_dir, tmp_path):
    """For a method that does not blank the hole itself: nothing of the ground truth under the hole is exported."""
    out = tmp_path / "blanked"
    main(["masks-export", "--preset", "demo", "--masks", str(masks_dir), "--format", "lama", "--blank",
          "--out", str(out)])
    table = read_export_table(out)
    assert table["blanked"].astype(str).eq("True").all()
    for row in table.itertuples():
        image, gt = read_rgb(out / row.image_file), read_rgb(masks_dir / "gt" / f"{Path(row.mask).stem}.png")
        hole = hole_of(masks_dir, row.mask)
        assert (image[hole] == 0).all() and (image[~hole] == gt[~hole]).all() and hole.any()

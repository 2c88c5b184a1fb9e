"""The `put` command: info, inpaint (images, masks, polarity, sizes) and bench."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from put.cli import main


def write_inputs(folder, size=(32, 32), mode="RGB", hole_white=True):
    h, w = size
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (h, w, len(mode) if mode != "L" else 1), dtype=np.uint8)
    image = folder / f"img_{mode}.png"
    Image.fromarray(pixels.squeeze(-1) if mode == "L" else pixels, mode).save(image)
    hole = np.zeros((h, w), bool)
    hole[h // 4: h // 2, w // 4: w // 2 + 3] = True
    mask = folder / "mask.png"
    Image.fromarray(np.where(hole == hole_white, 255, 0).astype(np.uint8)).save(mask)
    return image, mask, hole


def test_info_json_reports_paper_counts(capsys):
    assert main(["info", "--preset", "ffhq", "--variant", "put", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["token_grid"] == [32, 32]
    assert round(info["parameters"]["transformer"] / 1e6, 2) == 95.49
    assert round(info["parameters"]["pvqvae_generator"] / 1e6, 2) == 7.40
    assert info["parameters"]["discriminator"] == 2_763_776


def test_module_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "put", "info", "--preset", "demo", "--variant", "tok", "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["config"]["transformer"]["input"] == "quantized"


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L"])
def test_inpaint_writes_n_diverse_composited_results(tiny_checkpoints, tmp_path, mode):
    _, _, transformer = tiny_checkpoints
    image, mask, hole = write_inputs(tmp_path, mode=mode)
    out = tmp_path / "out"
    assert main(["inpaint", "--checkpoint", str(transformer), "--image", str(image), "--mask", str(mask),
                 "--samples", "3", "--top-k", "8", "--seed", "1", "--out", str(out), "--device", "cpu"]) == 0
    results = sorted(out.glob("*.png"))
    assert len(results) == 3
    arrays = [np.asarray(Image.open(p)) for p in results]
    original = np.asarray(Image.open(image).convert("RGB"))
    for arr in arrays:
        assert arr.shape == original.shape
        assert np.array_equal(arr[~hole], original[~hole])  # known pixels composited back
    assert len({a.tobytes() for a in arrays}) > 1


def test_inpaint_with_a_cosine_schedule(tiny_checkpoints, tmp_path, capsys):
    _, _, transformer = tiny_checkpoints
    image, mask, _ = write_inputs(tmp_path)
    common = ["inpaint", "--checkpoint", str(transformer), "--image", str(image), "--mask", str(mask),
              "--samples", "2", "--device", "cpu"]
    assert main(common + ["--steps", "2", "--out", str(tmp_path / "out")]) == 0
    assert len(list((tmp_path / "out").glob("*.png"))) == 2
    assert main(common + ["--steps", "0", "--out", str(tmp_path / "bad")]) == 2
    assert "steps must be >= 1" in capsys.readouterr().err


def test_inpaint_is_reproducible_and_polarity_is_honoured(tiny_checkpoints, tmp_path):
    _, _, transformer = tiny_checkpoints
    image, mask, hole = write_inputs(tmp_path)
    (tmp_path / "kw").mkdir()
    _, keep_white_mask, _ = write_inputs(tmp_path / "kw", hole_white=False)
    common = ["inpaint", "--checkpoint", str(transformer), "--image", str(image), "--samples", "2",
              "--seed", "5", "--device", "cpu", "--no-composite"]
    main(common + ["--mask", str(mask), "--out", str(tmp_path / "a")])
    main(common + ["--mask", str(keep_white_mask), "--mask-polarity", "keep-white", "--out", str(tmp_path / "b")])
    for name in ("img_RGB_000.png", "img_RGB_001.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_wrong_size_mask_and_non_multiple_image_are_clear_errors(tiny_checkpoints, tmp_path, capsys):
    _, _, transformer = tiny_checkpoints
    image, _, _ = write_inputs(tmp_path)
    small = tmp_path / "small"
    small.mkdir()
    _, small_mask, _ = write_inputs(small, size=(16, 16))
    base = ["inpaint", "--checkpoint", str(transformer), "--device", "cpu", "--out", str(tmp_path / "o")]
    assert main(base + ["--image", str(image), "--mask", str(small_mask)]) == 2
    assert "mask is 16x16 (WxH), expected 32x32" in capsys.readouterr().err

    odd = tmp_path / "odd"
    odd.mkdir()
    odd_image, odd_mask, hole = write_inputs(odd, size=(30, 37))
    assert main(base + ["--image", str(odd_image), "--mask", str(odd_mask)]) == 2
    assert "not a multiple of the patch size 8" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").iterdir())
    assert main(base + ["--image", str(odd_image), "--mask", str(odd_mask), "--pad"]) == 0
    assert np.asarray(Image.open(tmp_path / "o" / "img_RGB_000.png")).shape == (30, 37, 3)


def test_bad_mask_and_image_files_are_clear_errors(tiny_checkpoints, tmp_path, capsys):
    _, _, transformer = tiny_checkpoints
    image, mask, _ = write_inputs(tmp_path)
    grey = tmp_path / "grey.png"
    Image.fromarray(np.full((32, 32), 128, np.uint8)).save(grey)
    full = tmp_path / "full.png"
    Image.fromarray(np.zeros((32, 32), np.uint8)).save(full)
    broken = tmp_path / "broken.png"
    broken.write_bytes(image.read_bytes()[:60])
    base = ["inpaint", "--checkpoint", str(transformer), "--device", "cpu", "--out", str(tmp_path / "o")]
    cases = [(["--image", str(image), "--mask", str(grey)], "not binary"),
             (["--image", str(image), "--mask", str(full)], "has no hole"),
             (["--image", str(broken), "--mask", str(mask)], "broken.png: not a readable image"),
             (["--image", str(tmp_path / "nope.png"), "--mask", str(mask)], "nope.png: no such image file")]
    for extra, message in cases:
        assert main(base + extra) == 2
        assert message in capsys.readouterr().err


def test_deterministic_mode_ignores_seed(tiny_checkpoints, tmp_path):
    _, _, transformer = tiny_checkpoints
    image, mask, _ = write_inputs(tmp_path)
    for seed in ("1", "2"):
        main(["inpaint", "--checkpoint", str(transformer), "--image", str(image), "--mask", str(mask),
              "--deterministic", "--seed", seed, "--device", "cpu", "--out", str(tmp_path / seed)])
    assert (tmp_path / "1" / "img_RGB_000.png").read_bytes() == (tmp_path / "2" / "img_RGB_000.png").read_bytes()


def test_bench_sampling_writes_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "sampling", "--preset", "demo", "demo", "--steps", "3", "--device", "cpu",
                 "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert len(results) == 2 and all(r["matmul_gflops"] > 0 for r in results)
    result = results[0]
    assert result["steps"] == 3 and result["seconds_per_step"] > 0 and result["wall_seconds"] > 0
    assert 0 < result["fraction_of_matmul"]
    assert (result["n_layer"], result["n_embd"], result["image_size"]) == (4, 128, 64) and result["parameters"] > 0
    assert "tokens/s" in capsys.readouterr().out


def test_inpaint_folders_pairs_by_stem_and_lists_what_it_skipped(tiny_checkpoints, tmp_path, capsys):
    _, _, transformer = tiny_checkpoints
    images, masks, out = tmp_path / "images", tmp_path / "masks", tmp_path / "out"
    images.mkdir()
    masks.mkdir()
    image, mask, hole = write_inputs(tmp_path)
    for stem in ("a", "b", "c"):
        (masks / f"{stem}.png").write_bytes(mask.read_bytes())
    (images / "a.png").write_bytes(image.read_bytes())
    Image.open(image).save(images / "b.bmp")               # any image format, paired by stem
    (images / "c.txt").write_text("not an image")          # unreadable: skipped, the others go on
    (images / "d.png").write_bytes(image.read_bytes())     # no mask
    (masks / "e.png").write_bytes(mask.read_bytes())       # no image
    (images / ".hidden.png").write_bytes(b"")              # hidden files are not inputs
    with pytest.raises(SystemExit) as exit_:
        main(["inpaint", "--checkpoint", str(transformer), "--images", str(images), "--masks", str(masks),
              "--samples", "2", "--device", "cpu", "--out", str(out)])
    assert exit_.value.code == 1  # some results written, some files skipped
    assert sorted(p.name for p in out.iterdir()) == ["a_000.png", "a_001.png", "b_000.png", "b_001.png"]
    original = np.asarray(Image.open(image).convert("RGB"))
    assert np.array_equal(np.asarray(Image.open(out / "b_000.png"))[~hole], original[~hole])
    err = capsys.readouterr().err
    assert f"inpainted 2 of 4 images into {out} (2 result(s) each)" in err and "skipped 3 file(s):" in err
    assert "  c.txt: " in err and "c.txt: not a readable image" in err
    assert f"  d.png: no mask named d.* in {masks}" in err
    assert f"  e.png: mask without an image named e.* in {images}" in err
    # the same image alone gives the same results: each pair is seeded on its own
    assert main(["inpaint", "--checkpoint", str(transformer), "--image", str(images / "a.png"), "--mask",
                 str(masks / "a.png"), "--samples", "2", "--device", "cpu", "--out", str(tmp_path / "one")]) == 0
    assert (tmp_path / "one" / "a_001.png").read_bytes() == (out / "a_001.png").read_bytes()


def test_inpaint_folders_with_nothing_usable_is_an_error(tiny_checkpoints, tmp_path, capsys):
    _, _, transformer = tiny_checkpoints
    images, masks = tmp_path / "images", tmp_path / "masks"
    images.mkdir()
    masks.mkdir()
    image, _, _ = write_inputs(tmp_path)
    (images / "a.png").write_bytes(image.read_bytes())
    Image.fromarray(np.full((32, 32), 128, np.uint8)).save(masks / "a.png")   # not binary
    base = ["inpaint", "--checkpoint", str(transformer), "--device", "cpu", "--out", str(tmp_path / "o")]
    assert main(base + ["--images", str(images), "--masks", str(masks)]) == 2
    err = capsys.readouterr().err
    assert "a.png: " in err and "not binary" in err and f"{images}: no image could be inpainted (1 skipped" in err
    assert main(base + ["--images", str(images), "--mask", str(masks / "a.png")]) == 2
    assert "--images needs --masks" in capsys.readouterr().err
    assert main(base + ["--images", str(tmp_path / "nope"), "--masks", str(masks)]) == 2
    assert f"{tmp_path / 'nope'}: not a folder" in capsys.readouterr().err

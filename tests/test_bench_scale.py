"""`put bench scale`: the fabricated data, the per-stage measurement, the fit and its table. The
benchmark itself runs the DAG's stages for an hour (`make bench-scale`); these check its parts on tiny inputs."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from put.bench import scale
from put.bench.scale import ROWS, recorded_rows, variant_metrics
from put.bench.scale_data import fabricate, image_paths
from put.bench.scale_fit import MARKERS, exponent, extrapolate, fit, stage_items, with_scale_tables
from put.bench.scale_run import folder_bytes, measured_run
from put.cli import main
from put.config.paths import metrics_bins_file, metrics_images_file, metrics_info_file, pasted_metrics_file
from put.data.sources import list_dataset
from put.errors import FileMismatchError, InputError
from tests.helpers import ROOT


def test_fabricated_data_is_reproducible_and_in_imagenets_layout(tmp_path):
    csv = fabricate(tmp_path / "a", 5, 3, 16, seed=1)
    fabricate(tmp_path / "b", 5, 3, 16, seed=1)
    train, test = image_paths(5, 3)
    for name in [*train, *test]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / train[0]).read_bytes() != (tmp_path / "a" / train[1]).read_bytes()
    splits = list_dataset("imagenet", tmp_path / "a", eval_count=3)
    assert (len(splits["train"]), len(splits["test"])) == (5, 3)
    rows = csv.read_text().splitlines()
    assert rows[0] == "path,source" and len(rows) == 9 and len({r.split(",")[1] for r in rows[1:]}) == 8


def test_a_measured_run_reports_its_childs_cpu_and_memory(tmp_path):
    row = measured_run([sys.executable, "-c", "x = bytearray(200 * 2 ** 20); sum(range(3 * 10 ** 6))"], tmp_path,
                       tmp_path / "log")
    assert row["peak_rss_mib"] >= 200 and row["cpu_seconds"] > 0 and row["wall_seconds"] >= row["cpu_seconds"] / 4
    # not this process's size: a child forked by a large process would start its peak there
    ballast = bytearray(300 * 2 ** 20)  # noqa: F841
    assert measured_run([sys.executable, "-c", "pass"], tmp_path, tmp_path / "log")["peak_rss_mib"] < 100
    with pytest.raises(RuntimeError, match="exited 3"):
        measured_run([sys.executable, "-c", "raise SystemExit(3)"], tmp_path, tmp_path / "log")
    (tmp_path / "f").write_bytes(b"x" * 10000)
    assert folder_bytes(tmp_path / "f") >= 10000 and folder_bytes(tmp_path) >= 10000


def _point(train: int, test: int, per_item: float, fixed: float, rss: float) -> dict:
    stages = {key: {"cpu_seconds": fixed + per_item * stage_items(key, train, test, None), "wall_seconds": 1.0,
                    "peak_rss_mib": rss, "items": stage_items(key, train, test, None)}
              for key in ("split", "prepare", "masks", "external", "evaluate", "report")}
    return {"train_images": train, "test_images": test, "stages": stages,
            "bookkeeping": {"dvc_add_masks": {"cpu_seconds": 2.0, "wall_seconds": 2.0, "peak_rss_mib": 100.0,
                                              "serves": "masks"}}}


def test_the_fit_finds_linear_stages_linear_and_extrapolates_them_as_such():
    points = [_point(1000, 100, 0.01, 3.0, 900.0), _point(10000, 1000, 0.01, 3.0, 900.0)]
    found = fit(points)
    assert found["fit"]["split"]["cpu_exponent"][0] < 1  # the fixed part: sublinear between small sizes
    imagenet = found["extrapolated"]["presets"]["imagenet"]["stages"]["split"]
    assert imagenet["cpu_hours"] == pytest.approx((3.0 + 0.01 * (1_281_167 + 1000)) / 3600, rel=1e-3)
    assert imagenet["peak_rss_gib"] == pytest.approx(900 / 1024, rel=1e-2)  # bounded memory stays bounded
    assert "not measured" in found["extrapolated"]["label"]
    assert exponent(10, 1.0, 100, 100.0) == pytest.approx(2.0)
    assert extrapolate(10, 1.0, 100, 100.0, 1000)[1].startswith("power law")


def test_the_tables_go_between_the_markers_only():
    points = [_point(1000, 100, 0.01, 3.0, 900.0), _point(10000, 1000, 0.01, 3.0, 900.0)]
    result = {**fit(points), "points": points, "device_name": "cpu", "nice": 19, "preset": "imagenet",
              "commit": "abc", "command": "put bench scale"}
    page = f"before\n{MARKERS[0]}\nold\n{MARKERS[1]}\nafter\n"
    text = with_scale_tables(page, result)
    assert text.startswith("before\n") and text.endswith(f"{MARKERS[1]}\nafter\n") and "old" not in text
    assert "| split |" in text and "Extrapolated, not measured" in text and "% of masks)" in text
    with pytest.raises(FileMismatchError, match="scale-table markers"):
        with_scale_tables("no markers", result)


def test_every_variant_gets_the_stand_ins_evaluation_raw_and_pasted(tmp_path):
    """The report reads each evaluated label's metrics, and (issue 44) their `pasted/` companions: both copied,
    each record naming its variant (a 100,000-image run failed at its report on the missing pasted files)."""
    metrics = tmp_path / "metrics" / "external_telea.json"
    for source in (metrics, pasted_metrics_file(metrics)):
        source.parent.mkdir(parents=True, exist_ok=True)
        for path in (source, metrics_bins_file(source), metrics_images_file(source)):
            path.write_text(f"{path.name}\n")
        metrics_info_file(source).write_text(json.dumps({"variant": "external_telea", "rule": source.parent.name}))
    variant_metrics(metrics, ["put", "tok", "external_telea"])
    for label in ("put", "tok"):
        for source in (metrics, pasted_metrics_file(metrics)):
            target = source.with_name(f"{label}.json")
            assert target.read_text() == source.read_text()
            assert metrics_bins_file(target).read_text() == metrics_bins_file(source).read_text()
            assert metrics_images_file(target).read_text() == metrics_images_file(source).read_text()
            info = json.loads(metrics_info_file(target).read_text())
            assert info == {"variant": label, "rule": source.parent.name}


def test_a_rerun_of_the_same_size_resumes_from_the_stages_it_measured(tmp_path):
    identity = {"preset": "imagenet", "train": 1000, "test": 100, "seed": 0}
    assert recorded_rows(tmp_path, identity) == {}  # nothing measured yet
    (tmp_path / ROWS).write_text(json.dumps({"identity": identity, "rows": {"split": {"cpu_seconds": 1.0}}}))
    assert recorded_rows(tmp_path, identity) == {"split": {"cpu_seconds": 1.0}}
    assert recorded_rows(tmp_path, {**identity, "test": 300}) == {}  # another size's workspace: start over
    (tmp_path / ROWS).write_text("{")  # cut short while written
    assert recorded_rows(tmp_path, identity) == {}


# Misuse of `put bench scale` and its fit (docs/speed-and-cost.md, "At the paper's data sizes"): each case a
# correct result or one line, exit 2. The fit runs on synthetic points; the benchmark's measurement is replaced by
# one that returns such a point, so no stage runs.

COMMITTED = ROOT / "reports" / "benchmarks" / "scale_cpu.json"


def _file(tmp_path: Path, points: list[dict], name: str = "scale.json", **fields) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"benchmark": "scale_cpu", "preset": "imagenet", "points": points, **fields}))
    return path


def _page(tmp_path: Path) -> Path:
    page = tmp_path / "page.md"
    page.write_text(f"before\n{MARKERS[0]}\nold\n{MARKERS[1]}\n")
    return page


def _cli(capsys, *words: str) -> tuple[int, str]:
    code = main(["bench", "scale", *words])
    return code, capsys.readouterr().err.strip()


@pytest.fixture
def measured(monkeypatch):
    """`measure_size` replaced by a synthetic point of the asked size (image size 256, the imagenet preset's);
    the sizes it was asked for are recorded."""
    asked = []

    def fake(work, repo, preset, train, test, **_):
        asked.append((train, test))
        return {**_point(train, test, 0.01, 3.0, 900.0 + len(asked)), "image_size": 256}

    monkeypatch.setattr(scale, "measure_size", fake)
    return asked


def test_a_remeasured_size_replaces_its_point_and_a_rerun_lists_its_command_once(tmp_path, measured, capsys):
    out = tmp_path / "scale.json"
    scale.run_scale([1000, 10000], [100, 300], tmp_path / "work", out)
    first = json.loads(out.read_text())
    scale.run_scale([10000], [300], tmp_path / "work", out, append=True)
    again = json.loads(out.read_text())
    assert [(p["train_images"], p["test_images"]) for p in again["points"]] == [(1000, 100), (10000, 300)]
    assert again["points"][1]["stages"]["split"]["peak_rss_mib"] == 903.0  # the new measurement, not the old
    assert "replaces the point of 10,000 + 300 images" in capsys.readouterr().out
    assert len(again["commands"]) == 1 and again["commands"] == first["commands"]  # the same command line
    scale.run_scale([100000], [1000], tmp_path / "work", out, append=True)
    assert [p["train_images"] for p in json.loads(out.read_text())["points"]] == [1000, 10000, 100000]


def test_a_fit_through_two_points_of_one_size_is_refused(tmp_path, capsys):
    """The committed file with its largest point repeated (what `--append` of a size already there wrote): no
    fit, no tables (a line through two equal sizes put Places2's evaluate at 35.6 GiB instead of 2.6)."""
    committed = json.loads(COMMITTED.read_text())
    points = committed["points"] + committed["points"][-1:]
    with pytest.raises(InputError, match=r"points\[2\] and points\[3\] are both of 100,000 training images"):
        fit(points)
    with pytest.raises(InputError, match="both of 1,000 training images"):
        fit(committed["points"] + committed["points"])  # the same input twice
    path, page = _file(tmp_path, points, commands=committed["commands"]), _page(tmp_path)
    before = path.read_text(), page.read_text()
    code, err = _cli(capsys, "--tables-only", "--out", str(path), "--page", str(page))
    assert code == 2 and "\n" not in err and "both of 100,000 training images" in err and str(path) in err
    assert (path.read_text(), page.read_text()) == before  # neither file touched


def test_no_line_is_drawn_between_equal_item_counts():
    """Two sizes of the same test images give the masks stage the same items: no exponent or extrapolation
    between them (the larger size's row stands for that count); the other stages are fitted as before."""
    points = [_point(1000, 300, 0.01, 3.0, 900.0), _point(10000, 300, 0.01, 3.0, 900.0)]
    found = fit(points)
    assert found["fit"]["masks"]["items"] == [300 * 8] and found["fit"]["masks"]["cpu_exponent"] == []
    for preset in found["extrapolated"]["presets"].values():
        assert "masks" not in preset["stages"] and "dvc_add_masks" not in preset["stages"]
        assert preset["stages"]["split"]["peak_rss_gib"] == pytest.approx(900 / 1024, rel=1e-2)
    with pytest.raises(InputError, match="sizes 2,400 and 2,400: equal"):
        extrapolate(2400, 1.0, 2400, 2.0, 10 ** 6)


def test_a_size_of_one_image_fits():
    found = fit([_point(1, 1, 0.01, 3.0, 900.0), _point(1000, 100, 0.01, 3.0, 900.0)])
    assert found["fit"]["split"]["items"] == [2, 1100]
    imagenet = found["extrapolated"]["presets"]["imagenet"]["stages"]["split"]
    assert imagenet["cpu_hours"] == pytest.approx((3.0 + 0.01 * (1_281_167 + 1000)) / 3600, rel=1e-3)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, "3", None])
@pytest.mark.parametrize("cost", ["cpu_seconds", "peak_rss_mib"])
def test_a_hand_edited_cost_that_is_not_a_measurement_is_refused(value, cost):
    points = [_point(1000, 100, 0.01, 3.0, 900.0), _point(10000, 300, 0.01, 3.0, 900.0)]
    points[1]["stages"]["evaluate"][cost] = value
    with pytest.raises(InputError, match=rf"points\[1\]\.stages\.evaluate\.{cost} = .*expected a finite cost"):
        fit(points, "scale.json")


def test_a_zero_cost_fits_to_finite_figures():
    points = [_point(1000, 100, 0.01, 3.0, 900.0), _point(10000, 300, 0.01, 3.0, 900.0)]
    points[0]["bookkeeping"]["dvc_add_masks"]["cpu_seconds"] = 0.0
    row = fit(points)["extrapolated"]["presets"]["imagenet"]["stages"]["dvc_add_masks"]
    assert math.isfinite(row["cpu_hours"]) and row["cpu_hours"] >= 0
    assert fit(points)["fit"]["dvc_add_masks"]["cpu_exponent"] == [None]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("train_images", 0, r"train_images = 0: expected a whole number of images"),
    ("test_images", 2.5, r"test_images = 2.5: expected a whole number of images"),
    ("items", 0, r"stages\.split\.items = 0: expected a whole number"),
    ("serves", "nothing", r"dvc_add_masks\.serves = 'nothing': no such stage row")])
def test_a_hand_edited_point_that_cannot_be_fitted_is_refused(field, value, message):
    points = [_point(1000, 100, 0.01, 3.0, 900.0), _point(10000, 300, 0.01, 3.0, 900.0)]
    target = {"items": points[1]["stages"]["split"], "serves": points[1]["bookkeeping"]["dvc_add_masks"]}
    target.get(field, points[1])[field] = value
    with pytest.raises(InputError, match=message):
        fit(points)
    with pytest.raises(InputError, match="1 size"):
        fit(points[:1])


def test_sizes_given_twice_or_a_single_size_for_the_tables_are_refused_before_measuring(tmp_path, measured,
                                                                                        capsys):
    code, err = _cli(capsys, "--sizes", "1000", "1000", "--test-images", "100", "300", "--work", str(tmp_path))
    assert code == 2 and "--sizes: 1000 given twice" in err and "\n" not in err
    code, err = _cli(capsys, "--sizes", "1000", "--test-images", "100", "--page", str(_page(tmp_path)),
                     "--work", str(tmp_path))
    assert code == 2 and "two sizes or more" in err and "\n" not in err
    assert measured == []


def test_appending_to_a_missing_corrupt_or_other_file_is_refused(tmp_path, measured, capsys):
    args = ["--sizes", "1000", "--test-images", "100", "--append", "--work", str(tmp_path / "work")]
    point = {**_point(1000, 100, 0.01, 3.0, 900.0), "image_size": 256}
    cases = {"missing": (None, "no such file to append to"),
             "corrupt": ("{", "not valid JSON"),
             "another benchmark": ("[]", "benchmark 'list', not 'scale_cpu'"),
             "another preset": ({"preset": "imagenet_tpami256"},
                                "measured with preset 'imagenet_tpami256', not 'imagenet'"),
             "another image size": ({"points": [{**point, "image_size": 512}]},
                                    "points[0] has image size 512, this run's preset imagenet 256"),
             "a duplicate size": ({"points": [point, point]}, "both of 1,000 training images")}
    for case, (content, message) in cases.items():
        out = tmp_path / f"{case}.json"
        if isinstance(content, dict):
            out = _file(tmp_path, content.pop("points", [point]), out.name, **content)
        elif content is not None:
            out.write_text(content)
        code, err = _cli(capsys, *args, "--out", str(out))
        assert code == 2 and message in err and "\n" not in err, (case, err)
    assert measured == []


def test_a_rerun_without_append_writes_the_file_afresh(tmp_path, measured):
    out = tmp_path / "scale.json"
    for _ in range(2):
        scale.run_scale([1000, 10000], [100, 300], tmp_path / "work", out)
    again = json.loads(out.read_text())
    assert [p["train_images"] for p in again["points"]] == [1000, 10000] and len(again["commands"]) == 1
    assert again["points"][0]["stages"]["split"]["peak_rss_mib"] == 903.0  # the second run's measurement


@pytest.mark.parametrize(("content", "words", "message"), [
    (None, ["--tables-only"], "file not found"),
    ("[1, 2]", ["--tables-only"], "benchmark 'list', not 'scale_cpu'"),
    ({"points": []}, ["--tables-only"], "0 size(s) measured; a fit needs two sizes or more"),
    (None, ["--append", "--sizes", "1000", "--test-images", "100"], "--append: give the file to append to")])
def test_tables_only_or_append_without_a_usable_file_is_one_line(tmp_path, measured, capsys, content, words,
                                                                  message):
    out = tmp_path / "scale.json"
    if isinstance(content, dict):
        _file(tmp_path, **content)
    elif content is not None:
        out.write_text(content)
    page = _page(tmp_path)
    where = ["--out", str(out), "--page", str(page)] if "--tables-only" in words else ["--work", str(tmp_path)]
    code, err = _cli(capsys, *words, *where)
    assert code == 2 and message in err and "\n" not in err, err
    assert MARKERS[0] + "\nold\n" in page.read_text() and measured == []


def _edited(path_of, where: str, value) -> list[dict]:
    points = json.loads(COMMITTED.read_text())["points"]
    target = points[-1] if where == "point" else points[-1]["stages"]["evaluate"]
    target[path_of] = value
    return points


@pytest.mark.parametrize("preset, field, where, value, message", [
    ("zzz", None, None, None, "preset 'zzz': the scale benchmark fabricates ImageNet's layout"),
    ("ffhq", None, None, None, "preset 'ffhq': the scale benchmark fabricates ImageNet's layout"),
    ("imagenet", "image_size", "point", 512, "points[2] has image size 512"),
    ("imagenet", "data_bytes", "point", float("nan"), "points[2].data_bytes = nan: expected a finite value"),
    ("imagenet", "fabricate_seconds", "point", -1, "points[2].fabricate_seconds = -1: expected a finite value"),
    ("imagenet", "disk_bytes", "row", float("inf"), "points[2].stages.evaluate.disk_bytes = inf"),
    ("imagenet", "items", "row", 100, "points[2].stages.evaluate.items = 100: 100,000 + 1,000 images give"),
])
def test_tables_only_refuses_a_hand_edit_the_fit_would_silently_bend(tmp_path, capsys, preset, field, where, value,
                                                                      message):
    """--tables-only on a hand-edited file: another preset, a point of another image size, a recorded byte count
    or time that is no measurement, a stage's items that its sizes do not give (a negative exponent): one line,
    exit 2, neither file touched."""
    points = json.loads(COMMITTED.read_text())["points"] if field is None else _edited(field, where, value)
    path, page = _file(tmp_path, points, preset=preset), _page(tmp_path)
    before = path.read_text(), page.read_text()
    code, err = _cli(capsys, "--tables-only", "--out", str(path), "--page", str(page))
    assert code == 2 and "\n" not in err and message in err, err
    assert (path.read_text(), page.read_text()) == before
